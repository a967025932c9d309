"""Not modelled yet: needs percpu-rwsem and rcu_sync (issue 5)."""

STORY = None
