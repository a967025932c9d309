"""Not modelled yet: needs Tree RCU and NOCB (issue 3)."""

STORY = None
