"""The explorer's entry point: ``streamlit run app/explorer/main.py`` (or ``rcusim app``).

Lists the pages with ``st.navigation``: Home, one page per seed story, the workload lab and
A/B mode. Each page is a small script in ``views/`` that calls :mod:`app.explorer.ui`, so a
test can also load any page on its own.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
PAGES = HERE / "views"  # not "pages/": that name would switch Streamlit to its file-based navigation

st.set_page_config(page_title="rcusim explorer", page_icon=":material/memory:", layout="wide")

nav = st.navigation(
    {
        "": [st.Page(PAGES / "home.py", title="Home", icon=":material/home:", default=True)],
        "Stories": [
            st.Page(PAGES / "netns.py", title="netns and NOCB", icon=":material/hub:", url_path="netns"),
            st.Page(PAGES / "hackbench.py", title="hackbench and rt-mutex", icon=":material/lock:", url_path="hackbench"),
            st.Page(PAGES / "urcu.py", title="membarrier and urcu", icon=":material/memory:", url_path="urcu"),
            st.Page(PAGES / "rcu_sync.py", title="rcu_sync", icon=":material/sync:", url_path="rcu_sync"),
            st.Page(PAGES / "timers.py", title="timers: push vs pull", icon=":material/timer:", url_path="timers"),
        ],
        "Tools": [
            st.Page(PAGES / "lab.py", title="Workload lab", icon=":material/science:", url_path="lab"),
            st.Page(PAGES / "ab.py", title="A/B mode", icon=":material/balance:", url_path="ab"),
            st.Page(PAGES / "machine.py", title="This machine", icon=":material/computer:", url_path="machine"),
        ],
    }
)
nav.run()
