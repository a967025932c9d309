"""Userspace RCU (liburcu 0.10-0.11, ``src/urcu.c``, ``src/urcu-bp.c``,
``include/urcu/static/urcu.h``, ``urcu-bp.h``, ``src/urcu-wait.h``): readers, the grace-period
counter, ``synchronize_rcu()`` and how each flavor orders memory.

**Readers.** A registered reader thread keeps a counter ``ctr``: ``rcu_read_lock()`` copies the
global ``rcu_gp.ctr`` (its phase bit) into it, ``rcu_read_unlock()`` clears the nesting count.
Between the two stores the reader is *active* with the phase it copied. What orders those
stores against the writer is the flavor's ``smp_mb_slave()``:

=========  ==================================  =======================================
flavor     reader side                          writer side (``smp_mb_master()``)
=========  ==================================  =======================================
memb       compiler barriers (``cmm_barrier``)  ``membarrier()`` (SHARED / PRIVATE_EXPEDITED)
           full fences if membarrier is absent  full fence if membarrier is absent
mb         full fences: after the lock store,   full fence
           around the unlock store
signal     compiler barriers                    a signal to every reader, whose handler
                                                runs ``smp_mb()`` (``force_mb_all_readers``)
bp         compiler barrier if membarrier is    ``membarrier()``, else a fence
           used, else a fence after the lock
           store and before the unlock store
=========  ==================================  =======================================

memb, mb and signal readers also run ``wake_up_gp()`` after the unlock store: if the writer
parked ``rcu_gp.futex`` at -1 they reset it to 0 and issue FUTEX_WAKE.

**Writers** (``synchronize_rcu``): memb/mb/signal batch concurrent callers on a wait stack (the
first pusher leads a grace period, the others spin ``URCU_WAIT_ATTEMPTS`` times then sleep on
a futex until the leader wakes them), take ``rcu_gp_lock`` (a glibc mutex), issue
``smp_mb_master()``, wait for readers active with the *old* phase (``wait_for_readers``), flip
the phase, wait for readers active with the pre-flip phase, issue ``smp_mb_master()`` again.
``wait_for_readers`` polls the registry ``RCU_QS_ACTIVE_ATTEMPTS`` (100) times with
``caa_cpu_relax()``; after that every loop decrements ``rcu_gp.futex`` and issues
``smp_mb_master()``, and ``wait_gp()`` issues it again and sleeps in FUTEX_WAIT if the word is
still -1 (v0.10). bp has no batching, blocks signals around the grace period, and after the
active attempts sleeps ``poll(NULL, 0, 10)`` (10 ms) per loop.

**How readers are simulated.** ``reader_model = "explicit"`` runs every read-side critical
section as ops (lock, critical-section work, unlock, the rest of the loop): exact, one event
per section, for tests and long critical sections. ``"aggregate"`` (the default, for the
benchmark's ~3 ns loops) runs the loop as long user-mode chunks and counts reads from the CPU
time the loop got. A running reader passes through quiescence every few nanoseconds, so the
writer sees it inactive or current; what can hold a grace period is a reader *preempted*
inside its critical section. When a reader is switched out by preemption it is inside one
with probability ``f`` (the share of the loop's time between its two ``ctr`` stores, fences
included: they sit inside the section), with the phase of that moment; it leaves the section
as soon as it runs again. A running reader notices ``rcu_gp.futex == -1`` within one loop and
wakes the writer.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sim.config import knob
from sim.errors import ConfigError
from sim.ops import Call, CpuWork, Op, Sleep, Syscall
from sim.task import RUNNABLE
from sim.units import MS, US

from .futex import FutexWait, FutexWake, FutexWord
from .membarrier import Membarrier

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

NOTES = "docs/kernel/membarrier-urcu-rcu-sync.md"
FITS = "calibration/fits/urcu-membarrier-2020.toml"

Flavor = Literal["memb", "mb", "signal", "bp"]
FLAVORS: tuple[str, ...] = ("memb", "mb", "signal", "bp")

# liburcu constants (src/urcu.c, src/urcu-bp.c, src/urcu-wait.h, v0.10)
RCU_QS_ACTIVE_ATTEMPTS = 100
URCU_WAIT_ATTEMPTS = 1000
RCU_SLEEP_DELAY = 10 * MS  # urcu-bp: poll(NULL, 0, RCU_SLEEP_DELAY_MS)
TIMER_SLACK = 50 * US  # the default timer slack of a SCHED_OTHER thread (include/linux/sched.h)
SIGNAL_RETRY = 1 * MS  # urcu-signal: poll(NULL, 0, 1) while a reader has not run its handler

# wait-node states (src/urcu-wait.h)
WAITING, WAKEUP, RUNNING, TEARDOWN = 0, 1, 2, 4
# reader states (include/urcu/static/urcu.h)
ACTIVE_CURRENT, ACTIVE_OLD, INACTIVE = range(3)


@dataclass(frozen=True)
class UrcuCosts:
    """Per-operation costs of the library and of test_urcu's loops. Read-side figures are in
    picoseconds: the benchmark's loop takes about 3 ns, below the engine's resolution."""

    read_loop_ps: int = knob(
        3_077,
        doc="one iteration of test_urcu's read loop with compiler barriers only (memb/signal flavors, or bp with "
        "membarrier): lock, rcu_dereference, the assert, unlock, nr_reads++, the stop test (picoseconds)",
        min=1,
        source=f"fit: unpatched test_urcu read count of the urcu-membarrier-2020 seed ({FITS})",
    )
    read_cs_share: float = knob(
        0.167,
        doc="share of that loop's time spent between the reader's two ctr stores (inside the read-side critical "
        "section): the chance that a preemption finds the reader inside one",
        min=0.0,
        max=1.0,
        source=f"measured: SIGPROF samples of a clean-room compiled reader loop on the development machine, "
        f"564 of 3379 between the two stores ({NOTES})",
    )
    fence_ps: int = knob(
        13_824,
        doc="a full memory barrier (cmm_smp_mb: mfence) or a lock-prefixed atomic (picoseconds)",
        min=0,
        source=f"fit: unpatched test_urcu_bp read count (two fences per read) of the urcu-membarrier-2020 seed ({FITS})",
    )
    relax_ps: int = knob(
        20_000,
        doc="caa_cpu_relax() (the pause instruction), per busy-wait loop (picoseconds)",
        min=0,
        source=f"estimate: pause latency, 10-140 cycles by microarchitecture ({NOTES})",
    )
    scan_per_reader: int = knob(
        20,
        doc="the writer reading one reader's ctr (a cache line the reader writes)",
        unit="ns",
        min=0,
        source=f"estimate: one remote cache-line read ({NOTES})",
    )
    write_work: int = knob(
        100,
        doc="test_urcu's writer work outside synchronize_rcu: malloc, rcu_xchg_pointer, free",
        unit="ns",
        min=0,
        source=f"estimate: two glibc fast-path calls and an atomic exchange ({NOTES})",
    )
    signal_handler: int = knob(
        2_000,
        doc="urcu-signal: delivering SIGRCU to a reader and running its handler (frame setup, two smp_mb, sigreturn)",
        unit="ns",
        min=0,
        source=f"estimate: two kernel entries and a signal frame ({NOTES})",
    )

    def check(self, path: str) -> None:
        if self.read_loop_ps < 1:
            raise ConfigError(f"{path}.read_loop_ps", "must be at least 1 ps")


class ReaderState:
    """One registered reader thread (struct rcu_reader)."""

    __slots__ = (
        "task", "lib", "explicit", "in_cs", "parity", "cs_since", "in_loop", "run0", "loop_ns", "reads",
        "need_mb", "sig_pending",
    )  # fmt: skip

    def __init__(self, task: Task, lib: Urcu, explicit: bool) -> None:
        self.task = task
        self.lib = lib
        self.explicit = explicit
        self.in_cs = False
        self.parity = 0
        self.cs_since = 0
        self.in_loop = False
        self.run0 = 0
        self.loop_ns = 0
        self.reads = 0
        self.need_mb = False
        self.sig_pending = False


class WaitNode:
    """A thread waiting in liburcu's grace-period wait stack (struct urcu_wait_node)."""

    __slots__ = ("task", "word", "spinner")

    def __init__(self, m: Machine, task: Task) -> None:
        self.task = task
        self.word = FutexWord(m, "urcu_wait", WAITING)
        self.spinner: Task | None = None


class UMutex:
    """A glibc ``pthread_mutex_t`` (lowlevellock): 0 free, 1 locked, 2 locked with waiters;
    contended lockers sleep in FUTEX_WAIT, the unlocker of a state-2 lock wakes one."""

    def __init__(self, lib: Urcu, name: str) -> None:
        self.word = FutexWord(lib.m, name, 0)
        self.atomic = lib.atomic_ns
        self.op_trylock = Call(self._trylock)
        self.op_xchg2 = Call(self._xchg2)
        self.op_unlock = Call(self._unlock)
        self.op_wait = FutexWait(self.word, 2)
        self.op_wake = FutexWake(self.word, 1)
        self.owner: Task | None = None

    def _trylock(self, cpu: CPU, t: Task) -> int:
        ok = self.word.value == 0
        if ok:
            self.word.value = 1
            self.owner = t
        t.retval = ok
        return self.atomic

    def _xchg2(self, cpu: CPU, t: Task) -> int:
        old = self.word.value
        self.word.value = 2
        if old == 0:
            self.owner = t
        t.retval = old
        return self.atomic

    def _unlock(self, cpu: CPU, t: Task) -> int:
        t.retval = self.word.value
        self.word.value = 0
        self.owner = None
        return self.atomic

    def lock(self) -> Generator[Op, Any, None]:
        ok = yield self.op_trylock
        if ok:
            return
        while True:
            old = yield self.op_xchg2
            if old == 0:
                return
            yield self.op_wait

    def unlock(self) -> Generator[Op, Any, None]:
        old = yield self.op_unlock
        if old == 2:
            yield self.op_wake


class Urcu:
    """One process's liburcu: its flavor, registry, grace-period state and statistics."""

    def __init__(
        self,
        m: Machine,
        flavor: str,
        membarrier: str,
        costs: UrcuCosts,
        read_cs_loops: int = 0,
        reader_model: str = "aggregate",
        chunk: int = 1 * MS,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown flavor {flavor!r}")
        self.m = m
        self.flavor = flavor
        self.costs = costs
        self.explicit = reader_model == "explicit"
        self.chunk = chunk
        # which smp_mb_master() / smp_mb_slave() this flavor ends up with
        self.membarrier_cmd = membarrier if flavor in ("memb", "bp") and membarrier != "none" else None
        self.has_wake = flavor != "bp"
        if flavor == "mb" or (flavor == "memb" and self.membarrier_cmd is None):
            fences_in, fences_out = 2, 1  # lock: after the store; unlock: before and after the store
        elif flavor == "bp" and self.membarrier_cmd is None:
            fences_in, fences_out = 2, 0  # lock: after the store; unlock: before the store
        else:
            fences_in, fences_out = 0, 0
        relax = costs.relax_ps
        cs_ps = costs.read_cs_share * costs.read_loop_ps + fences_in * costs.fence_ps + read_cs_loops * relax
        self.iter_ps = costs.read_loop_ps + (fences_in + fences_out) * costs.fence_ps + read_cs_loops * relax
        self.f = cs_ps / self.iter_ps  # share of a reader's time inside its critical section
        self.cs_ns = max(1, round(cs_ps / 1000))
        self.out_ns = max(0, round(self.iter_ps / 1000) - self.cs_ns)
        self.atomic_ns = round(costs.fence_ps / 1000)
        self.relax_ns = costs.relax_ps / 1000
        # the library's shared state
        self.gp_ctr = 0  # the phase bit of rcu_gp.ctr
        self.futex = FutexWord(m, "rcu_gp.futex", 0)
        self.gp_waiters: list[WaitNode] = []
        self.gp_lock = UMutex(self, "rcu_gp_lock")
        self.registry: list[ReaderState] = []
        self.readers: list[ReaderState] = []
        self.stopped = False
        self.rng = m.streams.get("urcu.preempt")
        # prebuilt ops
        self.op_atomic = Call(self._atomic)
        self.op_fence = Call(self._atomic)
        self.op_flip = Call(self._flip)
        self.op_dec = Call(self._dec_futex)
        self.op_clear_futex = Call(self._clear_futex)
        self.op_wait_gp = FutexWait(self.futex, -1)
        self.op_wake_gp = FutexWake(self.futex, 1)
        self.op_sigmask = Syscall()
        self.op_poll = Sleep(RCU_SLEEP_DELAY + TIMER_SLACK)
        self.op_signal_retry = Sleep(SIGNAL_RETRY + TIMER_SLACK)
        self.op_membarrier = Membarrier(self.membarrier_cmd) if self.membarrier_cmd is not None else None
        self.op_signal_handler = CpuWork(costs.signal_handler, user=False)
        # statistics
        self.grace_periods = 0
        self.batched = 0
        self.mb_master_calls = 0
        self.membarrier_calls = 0
        self.futex_waits = 0
        self.polls = 0
        self.signals = 0
        self.preempted_in_cs = 0
        # logs for invariant checks (tests switch them on)
        self.record = False
        self.log_sync: list[tuple[int, int]] = []
        self.log_cs: list[tuple[int, int, Task]] = []
        m.switch_hooks.append(self._switch)

    # ------------------------------------------------------------------ small ops
    def _atomic(self, cpu: CPU, t: Task) -> int:
        return self.atomic_ns

    def _flip(self, cpu: CPU, t: Task) -> int:
        self.gp_ctr ^= 1
        return self.atomic_ns

    def _dec_futex(self, cpu: CPU, t: Task) -> int:
        self.futex.value -= 1
        if self.futex.value == -1:
            self._poke_running_reader()
        return self.atomic_ns

    def _clear_futex(self, cpu: CPU, t: Task) -> int:
        self.futex.value = 0
        return self.atomic_ns

    def _poke_running_reader(self) -> None:
        """A reader running its loop sees ``rcu_gp.futex == -1`` at its next unlock."""
        if self.explicit:
            return  # explicit readers check it in their unlock op
        for c in self.m.cpus:
            t = c.curr
            if t is None or not t.on_cpu:
                continue
            r = t.data.get("urcu")
            if r is not None and r.lib is self and r.in_loop:
                self.m.end_segment(t)
                return

    def _spin(self, loops: int) -> CpuWork:
        return CpuWork(max(0, round(loops * self.relax_ns)))

    # ------------------------------------------------------------------ readers
    def register(self, task: Task) -> ReaderState:
        """rcu_register_thread()."""
        r = ReaderState(task, self, self.explicit)
        task.data["urcu"] = r
        self.registry.append(r)
        self.readers.append(r)
        return r

    def reader(self, task: Task) -> Generator[Op, Any, None]:
        """test_urcu's thr_reader loop (after registration) until the test stops."""
        r = self.register(task)
        if self.explicit:
            yield from self._explicit_reader(r)
        else:
            yield from self._aggregate_reader(r)

    def _aggregate_reader(self, r: ReaderState) -> Generator[Op, Any, None]:
        task = r.task
        chunk = CpuWork(self.chunk)
        while not self.stopped:
            r.run0 = task.run_ns
            r.in_loop = True
            yield chunk
            r.in_loop = False
            r.loop_ns += task.run_ns - r.run0
            if self.has_wake and self.futex.value == -1:
                # wake_up_gp(): the unlock saw the writer parked
                self.futex.value = 0
                yield self.op_wake_gp
            if r.sig_pending:
                yield from self._signal_handler(r)

    def _explicit_reader(self, r: ReaderState) -> Generator[Op, Any, None]:
        lock = Call(lambda c, t: self._read_lock(r))
        unlock = Call(lambda c, t: self._read_unlock(r))
        cs = CpuWork(self.cs_ns)
        out = CpuWork(self.out_ns) if self.out_ns else None
        while not self.stopped:
            yield lock
            yield cs
            wake = yield unlock
            if wake:
                yield self.op_wake_gp
            if r.sig_pending:
                yield from self._signal_handler(r)
            if out is not None:
                yield out

    def _read_lock(self, r: ReaderState) -> int:
        r.in_cs = True
        r.parity = self.gp_ctr
        r.cs_since = self.m.now
        return 0

    def _read_unlock(self, r: ReaderState) -> int:
        r.in_cs = False
        r.reads += 1
        if self.record:
            self.log_cs.append((r.cs_since, self.m.now, r.task))
        wake = self.has_wake and self.futex.value == -1
        if wake:
            self.futex.value = 0
        r.task.retval = wake
        return 0

    def _signal_handler(self, r: ReaderState) -> Generator[Op, Any, None]:
        r.sig_pending = False
        yield self.op_signal_handler
        r.need_mb = False

    def _switch(self, cpu: CPU, prev: Task | None, nxt: Task | None) -> None:
        if prev is not None and prev.state == RUNNABLE:
            r = prev.data.get("urcu")
            if r is not None and r.lib is self and r.in_loop and not r.explicit:
                # preempted inside the loop: inside a critical section with probability f
                if self.rng.random() < self.f:
                    r.in_cs = True
                    r.parity = self.gp_ctr
                    r.cs_since = self.m.now
                    self.preempted_in_cs += 1
        if nxt is not None:
            r = nxt.data.get("urcu")
            if r is None or r.lib is not self or r.explicit:
                return
            if r.in_cs:
                r.in_cs = False  # it finishes the section within nanoseconds of running again
                if self.record:
                    self.log_cs.append((r.cs_since, self.m.now, nxt))
            if r.in_loop and ((self.has_wake and self.futex.value == -1) or r.sig_pending):
                self.m.end_segment(nxt)

    def reads(self) -> float:
        """Read-side critical sections completed so far (the in-flight part of each chunk included)."""
        total = 0.0
        per_ns = 1000.0 / self.iter_ps
        for r in self.readers:
            if r.explicit:
                total += r.reads
                continue
            ns = r.loop_ns
            if r.in_loop:
                t = r.task
                ns += t.run_ns - r.run0
                if t.on_cpu:
                    c = self.m.cpus[t.cpu]
                    if c.curr is t and c.seg_active:
                        ns += self.m.now - c.seg_start
            total += ns * per_ns
        return total

    # ------------------------------------------------------------------ writer side
    def _state(self, r: ReaderState) -> int:
        """rcu_reader_state(): a running (aggregate) reader is never seen in an old section."""
        if not r.in_cs or (not r.explicit and r.task.on_cpu):
            return INACTIVE
        return ACTIVE_CURRENT if r.parity == self.gp_ctr else ACTIVE_OLD

    def _scan(self, inp: list[ReaderState], cur_snap: list[ReaderState] | None) -> Call:
        def scan(cpu: CPU, t: Task) -> int:
            n = len(inp)
            keep = []
            for r in inp:
                st = self._state(r)
                if st == ACTIVE_OLD:
                    keep.append(r)
                elif st == ACTIVE_CURRENT and cur_snap is not None:
                    cur_snap.append(r)
            inp[:] = keep
            return n * self.costs.scan_per_reader

        return Call(scan)

    def smp_mb_master(self) -> Generator[Op, Any, None]:
        self.mb_master_calls += 1
        if self.flavor == "signal":
            yield from self._force_mb_all_readers()
        elif self.op_membarrier is not None:
            self.membarrier_calls += 1
            yield self.op_membarrier
        else:
            yield self.op_fence

    def _force_mb_all_readers(self) -> Generator[Op, Any, None]:
        if not self.registry:
            return
        for r in self.registry:
            r.need_mb = True
            yield self._kill_op(r)
        for r in self.registry:
            while r.need_mb:
                yield self._kill_op(r)
                yield self.op_signal_retry
        yield self.op_fence

    def _kill_op(self, r: ReaderState) -> Call:
        def kill(cpu: CPU, t: Task) -> int:
            return self._kill(cpu, r)

        return Call(kill)

    def _kill(self, cpu: CPU, r: ReaderState) -> int:
        """pthread_kill(tid, SIGRCU): queue the signal; kick the thread if it runs elsewhere."""
        self.signals += 1
        if not r.need_mb:
            return self.m.costs.syscall
        r.sig_pending = True
        t = r.task
        if t.on_cpu and t.cpu != cpu.index:
            target = self.m.cpus[t.cpu]

            def kick(c: CPU) -> int:
                return self._kicked(c, r)

            self.m.send_ipi(cpu, target, kick, name="signal kick")
        return self.m.costs.syscall + self.m.costs.wakeup

    def _kicked(self, cpu: CPU, r: ReaderState) -> int:
        t = r.task
        if r.sig_pending and cpu.curr is t and r.in_loop and not r.explicit:
            self.m.end_segment(t)  # the handler runs on the way back to user mode
        return 0

    def _wait_for_readers(self, inp: list[ReaderState], cur_snap: list[ReaderState] | None) -> Generator[Op, Any, None]:
        """wait_for_readers() of urcu.c (memb, mb, signal) and urcu-bp.c."""
        yield self._scan(inp, cur_snap)  # attempt 1
        if not inp:
            return
        attempt = self.relax_ns + 2 * self.atomic_ns + len(inp) * self.costs.scan_per_reader
        yield CpuWork(max(0, round((RCU_QS_ACTIVE_ATTEMPTS - 2) * attempt)))  # attempts 2..98
        yield self._scan(inp, cur_snap)  # attempt 99
        if not inp:
            return
        if self.flavor == "bp":
            while True:
                yield self.op_atomic  # registry unlock
                self.polls += 1
                yield self.op_poll
                yield self.op_atomic  # registry lock
                yield self._scan(inp, cur_snap)
                if not inp:
                    return
        while True:  # attempts >= RCU_QS_ACTIVE_ATTEMPTS: futex mode
            yield self.op_dec
            yield from self.smp_mb_master()
            yield self._scan(inp, cur_snap)
            if not inp:
                yield from self.smp_mb_master()
                yield self.op_clear_futex
                return
            # wait_gp()
            yield from self.smp_mb_master()
            yield self.op_atomic  # registry unlock
            if self.futex.value == -1:
                self.futex_waits += 1
                yield self.op_wait_gp
            yield self.op_atomic  # registry lock

    def synchronize_rcu(self, task: Task) -> Generator[Op, Any, None]:
        """The library's synchronize_rcu() as the calling thread runs it."""
        start = self.m.now
        if self.flavor == "bp":
            yield from self._synchronize_bp()
        else:
            yield from self._synchronize(task)
        if self.record:
            self.log_sync.append((start, self.m.now))

    def _grace_period(self) -> Generator[Op, Any, None]:
        yield self.op_atomic  # rcu_registry_lock
        if self.registry:
            self.grace_periods += 1
            yield from self.smp_mb_master()
            cur_snap: list[ReaderState] = []
            yield from self._wait_for_readers(list(self.registry), cur_snap)
            yield self.op_fence
            yield self.op_flip
            yield self.op_fence
            yield from self._wait_for_readers(cur_snap, None)
            yield from self.smp_mb_master()
        yield self.op_atomic  # rcu_registry_lock released

    def _synchronize(self, task: Task) -> Generator[Op, Any, None]:
        node = WaitNode(self.m, task)
        leader = not self.gp_waiters  # cds_wfs_push(): was the stack empty?
        self.gp_waiters.append(node)
        yield self.op_atomic
        if not leader:
            self.batched += 1
            yield from self._adaptive_busy_wait(node)
            yield self.op_fence
            return
        node.word.value = RUNNING
        yield from self.gp_lock.lock()
        waiters, self.gp_waiters = self.gp_waiters, []  # urcu_move_waiters()
        yield from self._grace_period()
        yield from self.gp_lock.unlock()
        for w in waiters:  # urcu_wake_all_waiters()
            if w is node or w.word.value & RUNNING:
                continue
            yield from self._adaptive_wake_up(w)

    def _adaptive_busy_wait(self, node: WaitNode) -> Generator[Op, Any, None]:
        if node.word.value == WAITING:
            node.spinner = node.task
            yield self._spin(URCU_WAIT_ATTEMPTS)
            node.spinner = None
        while node.word.value == WAITING:
            yield FutexWait(node.word, WAITING)
        node.word.value |= RUNNING

    def _adaptive_wake_up(self, w: WaitNode) -> Generator[Op, Any, None]:
        yield self.op_fence
        w.word.value = WAKEUP
        if w.spinner is not None:
            self.m.end_segment(w.spinner)
            w.spinner = None
        if not w.word.value & RUNNING:
            yield FutexWake(w.word, 1)
        w.word.value |= TEARDOWN

    def _synchronize_bp(self) -> Generator[Op, Any, None]:
        yield self.op_sigmask  # pthread_sigmask(SIG_BLOCK, all)
        yield from self.gp_lock.lock()
        yield from self._grace_period()
        yield from self.gp_lock.unlock()
        yield self.op_sigmask  # pthread_sigmask(SIG_SETMASK, old)

    # ------------------------------------------------------------------ results
    def metrics(self) -> dict[str, float]:
        return {
            "grace_periods": float(self.grace_periods),
            "batched_writes": float(self.batched),
            "mb_master_calls": float(self.mb_master_calls),
            "membarrier_calls": float(self.membarrier_calls),
            "futex_waits": float(self.futex_waits),
            "polls": float(self.polls),
            "signals": float(self.signals),
            "preempted_in_cs": float(self.preempted_in_cs),
            "cs_share": self.f,
            "read_iter_ns": self.iter_ps / 1000,
        }
