"""Not modelled yet: needs the lock models (issue 4)."""

STORY = None
