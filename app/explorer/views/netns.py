"""Story page: netns-2014."""

from app.explorer import ui

ui.story_page("netns-2014")
