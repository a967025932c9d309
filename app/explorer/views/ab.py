"""A/B mode: two configurations over several seeds, the difference with its interval."""

from app.explorer import ui

ui.ab_page()
