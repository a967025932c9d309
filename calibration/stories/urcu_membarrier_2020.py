"""Not modelled yet: needs membarrier and userspace RCU (issue 5)."""

STORY = None
