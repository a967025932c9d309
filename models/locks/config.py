"""The ``[kernel.locks]`` section: which lock implementations the kernel has and what their
atomic operations cost.

Kernel facts cite their file; costs without a measurement are priors from
``docs/kernel/rtmutex-hackbench.md`` §6 (marked "prior").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sim.config import knob
from sim.errors import ConfigError
from sim.units import US

PRIOR = "prior, docs/kernel/rtmutex-hackbench.md §6 (not measured)"


@dataclass(frozen=True)
class LocksConfig:
    """Kernel lock implementations (kernel/locking/, the 2.6.24-rt patch's kernel/rtmutex.c)."""

    preempt_rt: bool = knob(
        False,
        doc="CONFIG_PREEMPT_RT: spinlock_t and rwlock_t become sleeping rt-mutexes with priority inheritance, "
        "struct mutex becomes an rt_mutex, the timer softirq runs in a SCHED_FIFO thread; raw_spinlock_t keeps "
        "spinning. Needs kernel.preempt = 'full'",
        source="kernel/Kconfig.preempt; patch-2.6.24.7-rt6 (include/linux/spinlock.h, kernel/rt.c)",
    )
    policy: Literal["strict", "lateral", "adaptive"] = knob(
        "strict",
        doc="handoff policy of the sleeping spinlocks (spinlock_t, rwlock_t) under preempt_rt: 'strict' = the woken "
        "top waiter owns the lock before it runs (pending owner) and only a strictly higher-priority task may take it "
        "(2.6.24-rt6); 'lateral' = a running non-RT task of equal priority may take it from a pending owner that has "
        "not run yet, an RT waiter is never robbed; 'adaptive' = lateral, and a waiter spins while the owner runs on a "
        "CPU and sleeps only when it does not (2.6.24-rt7). struct mutex and rt_mutex keep the strict rules",
        source="2.6.24-rt kernel/rtmutex.c: try_to_steal_lock, lock_is_stealable (STEAL_LATERAL), adaptive_wait",
    )
    spinlock: Literal["ticket", "test_and_set"] = knob(
        "ticket",
        doc="raw spinning lock: 'ticket' hands the lock to spinners in arrival order (x86 since 2.6.25, "
        "qspinlock since 4.2); 'test_and_set' lets a random spinner win (x86 before 2.6.25)",
        source="arch/x86/include/asm/spinlock.h (ticket spinlocks, 2.6.25)",
    )
    mutex: Literal["2.6.24", "mainline"] = knob(
        "mainline",
        doc="struct mutex without preempt_rt: '2.6.24' = FIFO sleepers, unlock releases and wakes the first waiter, "
        "which may lose to a newcomer; 'mainline' = optimistic spinning while the owner runs, and a first waiter that "
        "lost once gets the next unlock handed to it (HANDOFF)",
        source="kernel/mutex.c (2.6.24); kernel/locking/mutex.c (mutex_optimistic_spin, MUTEX_FLAG_HANDOFF)",
    )
    rwlock: Literal["exclusive", "shared"] = knob(
        "exclusive",
        doc="rwlock_t read side under preempt_rt: 'exclusive' = one reader at a time (an rt-mutex); 'shared' = "
        "readers share it. Without preempt_rt readers always share",
        source="linux-rt-users, Apr 2008 (msg02534): 'Currently in the -rt patch the rwlocks ... can only have one "
        "reader at a time' (whether 2.6.24.7-rt6 still had that is unverified)",
    )
    rt_softirq_thread: bool = knob(
        True,
        doc="under preempt_rt, the timer softirq raised by every tick runs in a per-CPU SCHED_FIFO thread "
        "(softirq-timer/N) that preempts whatever SCHED_OTHER task runs, lock holders included",
        source="2.6.24 kernel/timer.c run_local_timers raises TIMER_SOFTIRQ every tick; -rt did so until "
        "'timers: do not raise softirq unconditionally' (T. Gleixner, 3.12-rt, Nov 2013); -rt kernel/softirq.c threads",
    )
    rt_softirq_prio: int = knob(
        50, doc="SCHED_FIFO priority of the softirq threads", min=1, max=99, source="-rt kernel/softirq.c (unverified)"
    )
    timer_softirq: int = knob(
        2 * US, doc="CPU time of one run of the timer softirq thread (run_timer_softirq)", unit="ns", min=0, source=PRIOR
    )
    max_lock_depth: int = knob(
        1024, doc="longest priority-inheritance chain walked", min=1, max=1_000_000, source="kernel/rtmutex.c"
    )
    atomic: int = knob(
        20, doc="an uncontended lock or unlock: one locked instruction (cmpxchg, xchg, decb)", unit="ns", min=0, source=PRIOR
    )
    cacheline: int = knob(
        100,
        doc="a spinning waiter noticing that the lock word changed (the cache line moving between CPUs)",
        unit="ns",
        min=0,
        source=PRIOR,
    )
    rt_slowpath: int = knob(
        500,
        doc="one pass through the rt-mutex slow path under lock->wait_lock (try-to-take or steal, plist enqueue, "
        "pi_lock bookkeeping) or the slow unlock (pick the pending owner)",
        unit="ns",
        min=0,
        source="prior 300-800 ns, " + PRIOR + "; on the development machine a side probe "
        "(calibration/trace/pi_unlock.c) leaves about 100 ns for the unlock's pass (docs/notes/bundled-profile.md)",
    )
    mutex_slowpath: int = knob(200, doc="one pass through the mutex slow path under wait_lock", unit="ns", min=0, source=PRIOR)

    def check(self, path: str) -> None:
        if not self.preempt_rt and self.policy != "strict":
            where = f"{path}.policy" if path else "policy"
            raise ConfigError(
                where,
                f"{self.policy!r} applies to the sleeping spinlocks of preempt_rt only",
                "set preempt_rt = true, or leave policy = 'strict'",
            )

    def check_kernel(self, kernel: Any, path: str) -> None:
        if self.preempt_rt and kernel.preempt != "full":
            raise ConfigError(
                f"{path}.preempt_rt",
                f"PREEMPT_RT needs a fully preemptible kernel, but kernel.preempt = {kernel.preempt!r}",
                "set kernel.preempt = 'full'",
            )
