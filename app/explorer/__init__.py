"""The Streamlit what-if explorer (``rcusim app``).

Pages live in ``app/explorer/views/`` and are listed by :mod:`app.explorer.main`, the script
``streamlit run`` starts. :mod:`app.explorer.core` holds everything that does not need Streamlit
(knob forms described from the configuration dataclasses, scenario assembly, cached-run keys,
tables, the timeline built from a trace, downloads); :mod:`app.explorer.ui` draws it;
:mod:`app.explorer.content` holds the stories' explanations. No modelling logic lives here:
every number comes from :mod:`sim.scenario`, :mod:`models` and :mod:`calibration`.
"""
