"""Story page: rcu-sync-2015."""

from app.explorer import ui

ui.story_page("rcu-sync-2015")
