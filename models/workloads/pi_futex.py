"""PI-futex lock throughput: N threads loop lock / critical section / unlock on one
``FUTEX_LOCK_PI`` futex, as the collector's ``pi_futex_handoff`` item does
(calibration/collector/item_futex.c).

The futex word holds the owner's TID and the ``FUTEX_WAITERS`` bit (kernel/futex/pi.c):

* lock: user space ``cmpxchg(0 -> tid)``; if the word is not 0, ``futex(FUTEX_LOCK_PI)``:
  entry, the hash-bucket work (``futex_op``), ``futex_lock_pi_atomic`` sets ``FUTEX_WAITERS``
  and the caller blocks on the futex's rt-mutex (``rt_mutex_wait_proxy_lock``), whose wait loop
  spins while it is the top waiter and the owner runs, else sleeps (rt_mutex_slowlock_block);
  once it has the rt-mutex it takes the hash-bucket lock again (``futex_q_lockptr_lock``,
  ``fixup_pi_owner``, ``futex_unqueue_pi``) before returning, costed as a second ``futex_op``;
* unlock: ``cmpxchg(tid -> 0)`` succeeds while ``FUTEX_WAITERS`` is clear; otherwise
  ``futex(FUTEX_UNLOCK_PI)``: with a waiter, ``wake_futex_pi`` writes the top waiter's TID (and
  ``FUTEX_WAITERS``) into the word and hands it the rt-mutex (``mark_wakeup_next_waiter``), so
  the unlocker's next lock attempt queues behind it; without one, the word becomes 0.

The rt-mutex is :class:`models.locks.core.RtMutex` with the strict handoff rule and
``top_spin`` (today's spinning rules). Threads are pinned round-robin to the CPUs, as the
collector pins them. Throughput is operations over the measured span; a handoff latency is the
time from a release to the acquisition by another thread that went through FUTEX_LOCK_PI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.config import knob
from sim.errors import ScenarioError
from sim.machine import Machine
from sim.ops import CpuWork, Syscall
from sim.stats import LogHistogram
from sim.task import Task
from sim.units import MS, S

SLOW_HANDOFF = 4096
"""A handoff at least this long (ns) did not reach a running waiter: the waiter slept and was
woken, or an interrupt came in between (a spinning handoff takes 1-2 us). 4096 is a bucket edge
of the collector's log2-quarter histograms, so the measured share is exact."""


@dataclass(frozen=True)
class PiFutexConfig:
    threads: int = knob(2, doc="contending threads, pinned round-robin to the CPUs", min=1, max=4096, source="collector")
    critical_section: int = knob(
        47,
        doc="user-mode work under the lock (100 shared increments and a clock read)",
        unit="ns",
        min=0,
        source="collector: items.pi_futex_handoff.params.critical_section_ns",
    )
    duration: int = knob(100 * MS, doc="measured span", unit="ns", min=1, source="collector runs 2 s; a rate")
    warmup: int = knob(5 * MS, doc="span before the measurement starts", unit="ns", min=0, source="engine choice")
    futex_op: int = knob(
        139,
        doc="futex(2) work besides entry/exit and the rt-mutex, per hash-bucket pass: hashing the word, the hash-bucket "
        "lock, the pi_state lookup (a FUTEX_LOCK_PI that blocks makes a second pass after taking the rt-mutex)",
        unit="ns",
        min=0,
        source="dev-machine profile (calibration/profiles/history/dev-2026-11-22T0210.json): pi_futex_uncontended lock_unlock_pair / 2 - "
        "syscall_baseline (medians; FUTEX_LOCK_PI / FUTEX_UNLOCK_PI on an unowned word, which reaches no pi_state: the "
        "pi_state lookup of a contended call is not in it); rcusim calibrate measures it per profile into "
        "[workload.pi_futex] (calibration/fit.py WORKLOAD_DIRECT). Prior before the measurement: 150 ns",
    )


class PiFutexBench:
    """One run of the PI-futex contention loop."""

    def __init__(self, m: Machine, cfg: PiFutexConfig) -> None:
        model = getattr(m, "models", {}).get("locks")
        if model is None:
            raise ScenarioError("the pi_futex workload needs the lock mechanism ([kernel.locks])")
        from models.locks.core import Lock, RtMutex, Unlock

        self.m = m
        self.cfg = cfg
        self.rtm = RtMutex(model, "pi_futex", model._stats("pi_futex"), lateral=False, adaptive=True, top_spin=True)
        model.locks.append(self.rtm)
        self.lock_op = Lock(self.rtm, 0)
        self.unlock_op = Unlock(self.rtm, 0)
        self.waiters_bit = False  # FUTEX_WAITERS in the word
        self.ops = 0
        self.kernel_waits = 0
        self.t_start = cfg.warmup
        self.t_end = cfg.warmup + cfg.duration
        self.last_release = -1
        self.last_owner = -1
        self.handoff = LogHistogram()
        self.slow_handoffs = 0
        self.per_thread = [0] * cfg.threads
        ncpu = len(m.cpus)
        first: Task | None = None
        for i in range(cfg.threads):  # threads of one process: one mm (no Costs.mm_switch between them)
            t = m.spawn(self._thread(i), f"pi-{i}", affinity=[i % ncpu], thread_of=first)
            first = first or t
        m.call_at(self.t_end, self._stop)

    def _stop(self) -> None:
        self.m.done.succeed()

    def _thread(self, index: int):  # type: ignore[no-untyped-def]
        cfg = self.cfg
        rtm = self.rtm
        m = self.m
        cs = CpuWork(cfg.critical_section) if cfg.critical_section else None
        futex_call = Syscall(cfg.futex_op)
        # futex_lock_pi after the rt-mutex is taken: the hash bucket again (futex_q_lockptr_lock,
        # fixup_pi_owner, futex_unqueue_pi, spin_unlock), the same kind of pass as futex_op's
        hb_again = CpuWork(cfg.futex_op) if cfg.futex_op else None
        lock_op = self.lock_op
        unlock_op = self.unlock_op

        def script(task: Task):  # type: ignore[no-untyped-def]
            while True:
                waited = False
                if rtm.owner is None and not self.waiters_bit:
                    yield lock_op  # cmpxchg(0 -> tid): free word, no waiters
                else:
                    yield futex_call  # FUTEX_LOCK_PI: entry and the hash bucket
                    if rtm.owner is not None:
                        self.waiters_bit = True  # futex_lock_pi_atomic
                    waited = rtm.owner is not None
                    yield lock_op
                    if waited and hb_again is not None:
                        yield hb_again
                now = m.env._now
                if waited:
                    if now >= self.t_start:
                        self.kernel_waits += 1
                        if self.last_owner != index and self.last_release >= self.t_start:
                            lat = now - self.last_release
                            self.handoff.add(lat)
                            if lat >= SLOW_HANDOFF:
                                self.slow_handoffs += 1
                if cs is not None:
                    yield cs
                self.last_owner = index
                self.last_release = m.env._now
                if self.waiters_bit:
                    yield futex_call  # FUTEX_UNLOCK_PI
                    if not rtm.waiters:
                        self.waiters_bit = False  # no waiter: the word becomes 0
                yield unlock_op  # hands the rt-mutex to the top waiter, if any
                if m.env._now >= self.t_start:
                    self.ops += 1
                    self.per_thread[index] += 1

        return script

    def progress(self) -> float:
        return min(1.0, self.m.now / self.t_end)

    def metrics(self) -> dict[str, float]:
        span = (min(self.m.now, self.t_end) - self.t_start) / S
        return {
            "ops": float(self.ops),
            "throughput_ops_per_s": self.ops / span if span > 0 else float("nan"),
            "kernel_waits": float(self.kernel_waits),
            "handoff_median_ns": self.handoff.percentile(50) if self.handoff.n else float("nan"),
            "slow_handoff_share": self.slow_handoffs / self.handoff.n if self.handoff.n else float("nan"),
        }

    def latency(self) -> dict[str, Any]:
        return {"handoff_ns": self.handoff}


def build(m: Machine, cfg: PiFutexConfig) -> PiFutexBench:
    return PiFutexBench(m, cfg)
