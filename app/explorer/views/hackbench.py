"""Story page: hackbench-rt-2008."""

from app.explorer import ui

ui.story_page("hackbench-rt-2008")
