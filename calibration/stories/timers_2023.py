"""Not modelled yet: needs the timer models (issue 6)."""

STORY = None
