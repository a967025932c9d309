"""The ``[kernel.membarrier]`` and ``[kernel.percpu_rwsem]`` sections.

Kernel behaviour cites its file; costs that no collector item measures are marked as
estimates and documented in docs/kernel/membarrier-urcu-rcu-sync.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.config import knob

NOTES = "docs/kernel/membarrier-urcu-rcu-sync.md"


@dataclass(frozen=True)
class MembarrierConfig:
    """membarrier(2) and futex(2) as the kernel implements them (kernel/sched/membarrier.c,
    kernel/futex/)."""

    era: Literal["v4.15", "v6"] = knob(
        "v6",
        doc="which membarrier to model: 'v4.15' (REGISTER_PRIVATE_EXPEDITED only sets a flag; PRIVATE_EXPEDITED "
        "IPIs other CPUs running the caller's mm even when the process has one thread; no GLOBAL_EXPEDITED) or 'v6' "
        "(GLOBAL_EXPEDITED; a single-user mm returns at once; registering a multi-threaded mm waits for a grace period)",
        source="kernel/sched/membarrier.c (v4.15 and today)",
    )
    scan_per_cpu: int = knob(
        20,
        doc="PRIVATE/GLOBAL_EXPEDITED: reading one CPU's rq->curr (or rq->membarrier_state) to build the IPI mask",
        unit="ns",
        min=0,
        source=f"estimate: one remote cache-line read ({NOTES})",
    )
    futex_op: int = knob(
        150,
        doc="futex(2) work besides entry/exit: hashing the word, taking the hash-bucket lock, (de)queueing",
        unit="ns",
        min=0,
        source=f"estimate ({NOTES}); the collector's futex_handoff item is held back from fitting",
    )


@dataclass(frozen=True)
class PercpuRwsemConfig:
    """How a percpu_rw_semaphore writer switches readers to the slow path
    (kernel/locking/percpu-rwsem.c, kernel/rcu/sync.c)."""

    writer_sync: Literal["expedited", "normal", "rcu_sync"] = knob(
        "rcu_sync",
        doc="'expedited': the writer bumps write_ctr and calls synchronize_sched_expedited() in down_write and again "
        "in up_write (v3.8-v4.3); 'normal': the same with synchronize_sched(); 'rcu_sync': rcu_sync_enter()/"
        "rcu_sync_exit(), which pays a grace period only when the rcu_sync is idle and lets readers back onto the "
        "fast path one grace period after the last writer, through call_rcu (v4.4+)",
        source="kernel/locking/percpu-rwsem.c (v3.13, v4.4), kernel/rcu/sync.c",
    )
    rcu_sync_era: Literal["v4.4", "v5.4"] = knob(
        "v5.4",
        doc="which rcu_sync state machine: 'v4.4' (gp_state IDLE/PENDING/PASSED x cb_state IDLE/PENDING/REPLAY, "
        "Oleg Nesterov's 2015 version) or 'v5.4' (GP_IDLE/GP_ENTER/GP_PASSED/GP_EXIT/GP_REPLAY, today's)",
        source="kernel/rcu/sync.c (v4.4; v5.4 onwards)",
    )
    fast_path: int = knob(
        20,
        doc="a reader's fast path: preempt_disable, test the writer state, this_cpu_inc/dec, preempt_enable",
        unit="ns",
        min=0,
        source=f"estimate: a handful of instructions on a per-CPU cache line ({NOTES})",
    )
    slow_path: int = knob(
        200,
        doc="a reader's slow path besides waiting: down_read/__up_read on rw_sem and an atomic on slow_read_ctr",
        unit="ns",
        min=0,
        source=f"estimate: two atomics on shared cache lines ({NOTES})",
    )
    sum_per_cpu: int = knob(
        20,
        doc="the writer summing (and clearing) one CPU's fast_read_ctr",
        unit="ns",
        min=0,
        source=f"estimate: one remote cache-line read ({NOTES})",
    )
