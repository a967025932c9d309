"""membarrier and futex, userspace RCU (liburcu), percpu-rwsem and rcu_sync.

Mechanisms: ``[kernel.membarrier]`` (membarrier(2) and futex(2), kernel/sched/membarrier.c)
and ``[kernel.percpu_rwsem]`` (kernel/locking/percpu-rwsem.c with kernel/rcu/sync.c).
Workloads: ``test_urcu`` (liburcu's benchmark, :mod:`models.sync.urcu_bench`) and
``trace_toggle`` (the uprobe enable/disable loop, :mod:`models.sync.trace_toggle`).
Research notes with sources: docs/kernel/membarrier-urcu-rcu-sync.md.
"""

from sim.scenario import Mechanism, WorkloadSpec

from . import membarrier, percpu_rwsem, trace_toggle, urcu_bench
from .config import MembarrierConfig, PercpuRwsemConfig
from .futex import FutexWait, FutexWake, FutexWord
from .membarrier import Membarrier, MembarrierModel, Mm
from .percpu_rwsem import PercpuRwsem, PercpuRwsemModel, RcuSync
from .urcu import Urcu, UrcuCosts

MECHANISMS: dict = {
    "membarrier": Mechanism("membarrier", MembarrierConfig, membarrier.install, MembarrierConfig.__doc__ or ""),
    "percpu_rwsem": Mechanism("percpu_rwsem", PercpuRwsemConfig, percpu_rwsem.install, PercpuRwsemConfig.__doc__ or ""),
}
WORKLOADS: dict = {
    "test_urcu": WorkloadSpec("test_urcu", urcu_bench.TestUrcuConfig, urcu_bench.build, urcu_bench.__doc__ or ""),
    "trace_toggle": WorkloadSpec("trace_toggle", trace_toggle.TraceToggleConfig, trace_toggle.build, trace_toggle.__doc__ or ""),
}

__all__ = [
    "MECHANISMS",
    "WORKLOADS",
    "FutexWait",
    "FutexWake",
    "FutexWord",
    "Membarrier",
    "MembarrierConfig",
    "MembarrierModel",
    "Mm",
    "PercpuRwsem",
    "PercpuRwsemConfig",
    "PercpuRwsemModel",
    "RcuSync",
    "Urcu",
    "UrcuCosts",
]
