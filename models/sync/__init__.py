"""membarrier, userspace RCU, percpu-rwsem and rcu_sync."""

MECHANISMS: dict = {}
WORKLOADS: dict = {}
