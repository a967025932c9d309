"""Story page: timers-2023."""

from app.explorer import ui

ui.story_page("timers-2023")
