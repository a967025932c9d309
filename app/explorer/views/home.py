"""Home: what rcusim is, the stories and their status, the tools."""

from app.explorer import ui

ui.home_page()
