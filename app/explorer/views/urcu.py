"""Story page: urcu-membarrier-2020."""

from app.explorer import ui

ui.story_page("urcu-membarrier-2020")
