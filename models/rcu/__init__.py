"""Tree RCU: grace periods, callbacks, offloading (NOCB), expedited GPs, rcu_barrier."""

MECHANISMS: dict = {}
WORKLOADS: dict = {}
