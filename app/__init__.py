"""rcusim's user interfaces: the ``rcusim`` CLI and the Streamlit explorer. No modelling here."""
