"""Kernel locks as mechanisms: raw spinlocks, mutexes with optimistic spinning, rt-mutexes with
priority inheritance and the three handoff policies of the 2.6.24-rt sleeping spinlocks.

A workload script takes a lock with ``yield Lock(L, hold)`` and drops it with
``yield Unlock(L, after)``. ``hold`` is the kernel work done under the lock (ns, or a callable
``(cpu, task) -> ns`` run at the moment the lock is taken: the critical section's effect),
``after`` the work that follows the release. The CPU time an op returns is the lock's own cost
(an atomic, a slow path, a wakeup paid by the releaser) plus that work.

Waiting is of two kinds, as in the kernel:

* **spinning** is CPU time: the waiter's segment lasts until the lock changes, then
  :meth:`sim.machine.Machine.end_segment` ends it after ``cacheline`` (the lock word's cache line
  moving to the spinner) and the waiter's continuation retries. Long spins are cut into
  ``SPIN_QUANTUM`` pieces that re-check (an engine granularity, not a model constant);
* **sleeping** blocks the task; only the lock's release (a grant) wakes it.

Which implementation a lock gets depends on the kernel (:class:`~models.locks.config.LocksConfig`):
``raw_spinlock`` always spins with preemption disabled; ``spinlock`` spins the same way without
``preempt_rt`` and becomes an :class:`RtMutex` (spin type, policy applies) with it; ``rwlock``
(read side) never waits without ``preempt_rt`` and is an exclusive or shared rt-mutex with it;
``mutex`` is a :class:`Mutex` without ``preempt_rt`` and an rt_mutex (strict) with it;
``rt_mutex`` is always an rt-mutex with strict stealing rules.

Priorities are the substrate's: 0 for SCHED_OTHER, 1..99 for SCHED_FIFO, higher wins.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.ops import BLOCKED, BoundOp, run_bound
from sim.task import BLOCKED as T_BLOCKED
from sim.trace import MODEL_PID
from sim.units import US

from .config import LocksConfig

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

SPIN_QUANTUM = 100 * US
LOCK_TRACK_SORT = 2000  # lock tracks sort after the CPUs' and the grace periods' in a trace

HoldFn = Callable[["CPU", "Task"], int]

# counters kept per lock class (index into LockClassStats.c)
ACQUIRED, CONTENDED, HANDOFFS, STEALS, LATERAL_STEALS, SPINS, SLEEPS, WASTED_WAKEUPS, PI_BOOSTS, SPIN_NS, PENDING_NS = range(11)
COUNTER_NAMES = (
    "acquisitions",
    "contended",
    "handoffs",
    "steals",
    "lateral_steals",
    "spins",
    "sleeps",
    "wasted_wakeups",
    "pi_boosts",
    "spin_ns",
    "pending_ns",
)


class Lock(BoundOp):
    """``spin_lock`` / ``mutex_lock`` / ``rt_mutex_lock`` / ``read_lock`` of ``lock``, then
    ``hold`` of work under it (ns, or ``fn(cpu, task) -> ns`` run when the lock is taken).
    The engine calls ``lock.acquire`` directly (``run``, see :class:`sim.ops.BoundOp`)."""

    __slots__ = ("lock", "hold_ns", "hold_fn")

    def __init__(self, lock: KernelLock | PerCpuLock, hold: int | HoldFn = 0) -> None:
        self.lock = lock
        self.run = lock.acquire
        self.hold_fn: HoldFn | None = None
        self.hold_ns = 0
        if callable(hold):
            self.hold_fn = hold
        else:
            if hold < 0:
                raise ValueError(f"hold must be >= 0 ns, got {hold}")
            self.hold_ns = int(hold)


class Unlock(BoundOp):
    """Release ``lock``, then ``after`` of work (ns, or ``fn(cpu, task) -> ns`` run at release).
    The engine calls ``lock.release`` directly (``run``)."""

    __slots__ = ("lock", "after_ns", "after_fn")

    def __init__(self, lock: KernelLock | PerCpuLock, after: int | HoldFn = 0) -> None:
        self.lock = lock
        self.run = lock.release
        self.after_fn: HoldFn | None = None
        self.after_ns = 0
        if callable(after):
            self.after_fn = after
        else:
            if after < 0:
                raise ValueError(f"after must be >= 0 ns, got {after}")
            self.after_ns = int(after)


class LockClassStats:
    """Counters of every lock of one class (e.g. all ``unix_state`` locks), in the manner of
    CONFIG_LOCK_STAT's per-class /proc/lock_stat (kernel/locking/lockdep_proc.c)."""

    __slots__ = ("name", "c")

    def __init__(self, name: str) -> None:
        self.name = name
        self.c = [0] * len(COUNTER_NAMES)


class LockWait:
    """A task's state while it waits for or spins on a lock: the kernel's rt_mutex_waiter
    (``wkey``, ``blocked_on``), the -rt pending-owner marks (``granted``, ``grant_t``), the
    pending operation and the spin bookkeeping. One per task (``Task.lockw``), made when it
    first contends (:func:`_lw`); slots rather than ``task.data`` (read at every contended
    operation)."""

    __slots__ = (
        "op", "ul_op", "wkey", "blocked_on", "granted", "grant_t", "spinning", "spin_tok", "spin_t0",
        "spin_owner", "woken",
    )  # fmt: skip

    def __init__(self) -> None:
        self.op: Any = None  # the Lock whose acquisition is in progress
        self.ul_op: Any = None  # the Unlock whose slow release is in progress
        self.wkey: Any = None  # its (-prio, seq, task) entry in an rt-mutex's waiters
        self.blocked_on: RtMutex | None = None  # the rt-mutex it is queued on
        self.granted = False  # made pending owner, has not run since
        self.grant_t = 0
        self.spinning = False
        self.spin_tok = 0
        self.spin_t0 = 0
        self.spin_owner: Task | None = None
        self.woken = False  # woken by a mutex release


def _lw(t: Task) -> LockWait:
    w = t.lockw
    if w is None:
        w = t.lockw = LockWait()
    return w


def _hold(cpu: CPU, t: Task, op: Lock) -> int:
    fn = op.hold_fn
    return op.hold_ns if fn is None else fn(cpu, t)


def _after(cpu: CPU, t: Task, op: Unlock) -> int:
    fn = op.after_fn
    return op.after_ns if fn is None else fn(cpu, t)


class KernelLock:
    """Base of the lock implementations: an owner, counters, and the model's services."""

    __slots__ = ("model", "name", "stats", "owner", "since", "track", "trace_args", "idx")
    kind = "lock"

    def __init__(self, model: LockModel, name: str, stats: LockClassStats, spins: bool = True) -> None:
        self.model = model
        self.name = name
        self.stats = stats
        self.owner: Task | None = None
        self.since = 0  # when the current owner (or pending owner) got the lock, if tracing
        self.track = 0  # its trace track, made on first use
        self.trace_args: dict[str, str] = {}  # its spans' args, one dict shared by all of them
        self.idx = len(model.locks)  # creation order: the tracks' order
        # the context-switch hook notices the spinners of a switched-out owner's locks: only a
        # lock that can have spinners (``spins``) needs it
        if spins and not model.switch_hooked:
            model.hook_switch()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _took(self, t: Task, how: str) -> None:
        self.owner = t
        self.stats.c[ACQUIRED] += 1
        t.held.append(self)
        m = self.model
        log = m._log
        if log is not None:
            log.append(("acquire", m.env._now, self.name, t.tid, how))
        if m.tracer is not None:
            self.since = m.env._now

    def _dropped(self, t: Task) -> None:
        t.held.remove(self)
        m = self.model
        log = m._log
        if log is not None:
            log.append(("release", m.env._now, self.name, t.tid, ""))
        if m.tracer is not None:
            self._trace_span(t.name, "lock")

    def _trace_span(self, name: str, cat: str) -> None:
        """The ownership span that ends now on this lock's track: ``cat`` "lock" from the
        acquisition (or the pending owner taking it) to the release, "lock_pending" from a
        handoff to the pending owner running (or being robbed). Only called when tracing."""
        tracer = self.model.m.tracer
        assert tracer is not None
        if not self.track:
            self.track = tracer.track(f"lock {self.name}", sort=LOCK_TRACK_SORT + self.idx)
            self.trace_args = {"class": self.stats.name}
        now = self.model.env._now
        tracer.span(self.track, name, self.since, now, pid=MODEL_PID, cat=cat, args=self.trace_args)
        self.since = now

    def _start_spin(self, t: Task, spinners: list[Task], delay: int) -> None:
        w = t.lockw  # made by the contended acquire that led here
        w.spinning = True
        w.spin_tok += 1
        w.spin_t0 = self.model.env._now + delay
        spinners.append(t)
        self.stats.c[SPINS] += 1

    def _stop_spin(self, t: Task, spinners: list[Task]) -> None:
        w = t.lockw
        if w is not None and w.spinning:
            w.spinning = False
            if t in spinners:
                spinners.remove(t)
            self.stats.c[SPIN_NS] += max(0, self.model.env._now - w.spin_t0)


class RawSpinLock(KernelLock):
    """A spinning lock (raw_spinlock_t; spinlock_t without PREEMPT_RT): the holder and the
    spinners have preemption disabled; on release the next spinner (arrival order for ticket
    locks, a random one for test-and-set) owns it and notices after a cache-line transfer
    (include/linux/spinlock.h, arch/x86 spinlocks)."""

    __slots__ = ("spinners",)
    kind = "raw_spinlock"

    def __init__(self, model: LockModel, name: str, stats: LockClassStats) -> None:
        super().__init__(model, name, stats)
        self.spinners: list[Task] = []

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:
        t.preempt_count += 1
        if self.owner is None:
            # _took(t, "fast"), inlined
            self.owner = t
            self.stats.c[ACQUIRED] += 1
            t.held.append(self)
            m = self.model
            if not m.quiet:
                if m._log is not None:
                    m._log.append(("acquire", m.env._now, self.name, t.tid, "fast"))
                if m.tracer is not None:
                    self.since = m.env._now
            fn = op.hold_fn
            return m.atomic + (op.hold_ns if fn is None else fn(cpu, t))
        self.stats.c[CONTENDED] += 1
        _lw(t).op = op
        self._start_spin(t, self.spinners, 0)
        t.post = self._spin_post
        return SPIN_QUANTUM

    def _spin_post(self, cpu: CPU, t: Task) -> int:
        if self.owner is not t:
            t.post = self._spin_post
            return SPIN_QUANTUM
        self._stop_spin(t, self.spinners)
        w = t.lockw
        op: Lock = w.op
        w.op = None
        return self.model.cfg.atomic + _hold(cpu, t, op)

    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:
        t.held.remove(self)  # _dropped, inlined
        m = self.model
        if not m.quiet:
            if m._log is not None:
                m._log.append(("release", m.env._now, self.name, t.tid, ""))
            if m.tracer is not None:
                self._trace_span(t.name, "lock")
        spinners = self.spinners
        if spinners:
            if self.model.cfg.spinlock == "ticket" or len(spinners) == 1:
                nxt = spinners[0]
            else:
                nxt = spinners[int(self.model.rng.integers(len(spinners)))]
            spinners.remove(nxt)  # it stops spinning when it notices (its _spin_post)
            self.stats.c[HANDOFFS] += 1
            self._took(nxt, "handoff")
            self.model.notice(nxt)
        else:
            self.owner = None
        t.preempt_count -= 1
        fn = op.after_fn
        return m.atomic + (op.after_ns if fn is None else fn(cpu, t))


class SharedReadLock(KernelLock):
    """The read side of a reader-writer lock whose readers share it (rwlock_t without
    PREEMPT_RT, or multi-reader -rt rwlocks): readers never wait for each other. The write side
    is not modelled (no modelled workload takes these locks for writing)."""

    __slots__ = ("readers", "sleeping")
    kind = "rwlock_shared"

    def __init__(self, model: LockModel, name: str, stats: LockClassStats, sleeping: bool) -> None:
        super().__init__(model, name, stats, spins=False)
        self.readers = 0
        self.sleeping = sleeping

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:
        cfg = self.model.cfg
        # -rt multi-reader locks take the slow path when another reader holds the lock
        cost = cfg.rt_slowpath if (self.sleeping and self.readers) else cfg.atomic
        self.readers += 1
        if not self.sleeping:
            t.preempt_count += 1
        self.stats.c[ACQUIRED] += 1
        fn = op.hold_fn
        return cost + (op.hold_ns if fn is None else fn(cpu, t))

    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:
        self.readers -= 1
        if not self.sleeping:
            t.preempt_count -= 1
        fn = op.after_fn
        return self.model.atomic + (op.after_ns if fn is None else fn(cpu, t))


class RtMutex(KernelLock):
    """An rt-mutex as in the 2.6.24-rt kernel/rtmutex.c: waiters in priority order (FIFO among
    equals, as a plist); on release the top waiter becomes the *pending owner* and is woken
    (wakeup_next_waiter); until it runs and takes the lock, only a strictly higher-priority task
    may steal it (STEAL_NORMAL), or with lateral stealing also an equal-priority non-RT task
    (STEAL_LATERAL, lock_is_stealable). A robbed pending owner re-queues at the tail of its
    priority and sleeps again. With adaptive spinning a waiter spins while the owner it saw is
    still the owner and is running on a CPU, and sleeps when the owner is not running
    (adaptive_wait). Priority inheritance: the owner (pending or not) runs at least at its top
    waiter's priority; blocked owners pass the boost along the chain (rt_mutex_adjust_prio_chain,
    at most max_lock_depth steps).

    The slow unlock follows the order of the 2.6.24-rt rt_spin_lock_slowunlock and
    rt_mutex_slowunlock (the -rt patch's kernel/rtmutex.c): take ``lock->wait_lock`` (a raw
    spinlock, interrupts off), and only at the end of the pass does wakeup_next_waiter dequeue
    the top waiter, store it as pending owner in ``lock->owner`` and wake it
    (wake_up_process_mutex), all still under ``wait_lock``; then ``wait_lock`` is dropped and the
    releaser de-boosts itself. So the releaser cannot be preempted from the start of the pass to
    the end of the wakeup, and a task entering the slow path meanwhile spins on ``wait_lock``
    (spin_lock_irqsave) before it can look at the lock: it then sees the pending owner, and
    takes it only if it may steal. (``wait_lock`` is otherwise a cost, not a lock: a releaser
    arriving during a waiter's pass is not held up.)

    ``top_spin`` selects today's spinning rules instead (kernel/locking/rtmutex.c,
    rt_mutex_slowlock_block and rtmutex_spin_on_owner, 5.15+): only the top waiter spins, only
    on an owner that has taken the lock (a woken top waiter that has not yet run leaves the
    lock ownerless, so nobody spins on it), and a spinner whose CPU must reschedule stops and
    sleeps until the lock is handed to it. Mainline has no pending owner, but a released lock
    with waiters can only be taken by its top waiter or a strictly higher priority
    (rt_mutex_steal), which is the strict rule here. The slow unlock's pass comes before the
    handoff (mark_wakeup_next_waiter ends it under wait_lock), so a spinning top waiter sees the
    lock change hands only after it; a waiter that queued while the handed-over top waiter had
    not yet taken the lock sleeps, and nothing wakes it when it becomes the top waiter."""

    __slots__ = ("pending", "waiters", "spinners", "lateral", "adaptive", "top_spin", "unlocking", "wl_spinners")
    kind = "rt_mutex"

    def __init__(
        self, model: LockModel, name: str, stats: LockClassStats, lateral: bool, adaptive: bool, top_spin: bool = False
    ) -> None:
        super().__init__(model, name, stats, spins=adaptive)  # only adaptive waiters spin (_wait)
        self.pending = False
        # (-prio, seq, task): plist order. A deque: the top waiter leaves from the front and a
        # newcomer of the lowest priority joins at the back, both O(1) with hundreds queued.
        self.waiters: deque[tuple[int, int, Task]] = deque()
        self.spinners: list[Task] = []
        self.lateral = lateral
        self.adaptive = adaptive
        self.top_spin = top_spin
        self.unlocking: Task | None = None  # a releaser in its slow pass, holding wait_lock
        self.wl_spinners: list[Task] = []  # tasks spinning on wait_lock meanwhile

    # -- the waiter list
    def top_waiter(self) -> Task | None:
        return self.waiters[0][2] if self.waiters else None

    def _enqueue(self, t: Task) -> None:
        m = self.model
        m.seq += 1
        key = (-t.prio, m.seq, t)
        if key[0]:
            m.pi_waiters = True
        lw = t.lockw  # made by the contended acquire (_slow is its only way here)
        lw.wkey = key
        lw.blocked_on = self
        w = self.waiters
        if not w or w[-1][0] <= key[0]:
            w.append(key)  # where insort puts it: its seq is the newest
        else:
            bisect.insort(w, key)
        log = m._log
        if log is not None:
            log.append(("enqueue", m.env._now, self.name, t.tid, t.prio))
        o = self.owner
        if o is not None and self.waiters[0][2] is t and t.prio > o.prio:
            m.adjust_prio(o, 0)

    def _dequeue(self, t: Task) -> None:
        lw = t.lockw
        self.waiters.remove(lw.wkey)
        lw.wkey = None
        lw.blocked_on = None

    def requeue(self, t: Task) -> None:
        """``t``'s priority changed while it waits here: move it (plist re-add)."""
        lw = t.lockw
        self.waiters.remove(lw.wkey)
        self.model.seq += 1
        key = (-t.prio, self.model.seq, t)
        if key[0]:
            self.model.pi_waiters = True
        lw.wkey = key
        bisect.insort(self.waiters, key)

    def queued(self, t: Task) -> bool:
        lw = t.lockw
        return lw is not None and lw.blocked_on is self

    # -- taking
    def _try_take(self, t: Task) -> bool:
        """do_try_to_take_rt_mutex under wait_lock."""
        o = self.owner
        m = self.model
        if o is None:
            lw = t.lockw  # made by the contended acquire (_slow is its only way here)
            if lw.blocked_on is self:  # queued(t): _dequeue(t), inlined
                self.waiters.remove(lw.wkey)
                lw.wkey = None
                lw.blocked_on = None
            self.pending = False
            lw.granted = False
            self._took(t, "slow")
            if m.pi_waiters or t.prio != t.base_prio:  # else adjust_prio(t) changes nothing
                m.adjust_prio(t, 0)
            return True
        if not self.pending:
            return False
        if o is t:
            self.pending = False
            lw = t.lockw
            lw.granted = False
            self.stats.c[PENDING_NS] += m.env._now - lw.grant_t
            log = m._log
            if log is not None:
                log.append(("acquire", m.env._now, self.name, t.tid, "pending"))
            if m.tracer is not None:
                self._trace_span(f"pending {t.name}", "lock_pending")
            self.stats.c[ACQUIRED] += 1
            return True
        # may t steal? a higher priority, or with lateral stealing an equal non-RT one (lock_is_stealable)
        if t.prio <= o.prio and not (self.lateral and t.prio == o.prio and not t.prio):
            return False
        # steal from the pending owner, which has not run yet (try_to_steal_lock)
        c = self.stats.c
        c[STEALS] += 1
        if t.prio == o.prio:
            c[LATERAL_STEALS] += 1
        log = m._log
        if log is not None:
            log.append(("steal", m.env._now, self.name, t.tid, o.tid, t.prio, o.prio))
        tracer = m.tracer
        if tracer is not None:
            tracer.instant(m.m.cpus[t.cpu].tid, f"steal {self.name}", m.env._now)
            self._trace_span(f"pending {o.name} (robbed by {t.name})", "lock_pending")
        o.held.remove(self)
        self.pending = False
        if self.queued(t):
            self._dequeue(t)
        t.lockw.granted = False
        self._took(t, "steal")
        m.adjust_prio(o, 0)
        m.adjust_prio(t, 0)
        return True

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:
        m = self.model
        if self.owner is None and not self.waiters:
            # _took(t, "fast"), inlined (the uncontended lock: most operations)
            self.owner = t
            self.stats.c[ACQUIRED] += 1
            t.held.append(self)
            if not m.quiet:
                if m._log is not None:
                    m._log.append(("acquire", m.env._now, self.name, t.tid, "fast"))
                if m.tracer is not None:
                    self.since = m.env._now
            fn = op.hold_fn
            return m.atomic + (op.hold_ns if fn is None else fn(cpu, t))
        self.stats.c[CONTENDED] += 1
        _lw(t).op = op
        return self._slow(cpu, t, m.rt_slowpath)

    def _slow(self, cpu: CPU, t: Task, cost: int = -1) -> int:
        """One pass of rt_spin_lock_slowlock / rt_mutex_slowlock under wait_lock: take or
        steal, else queue; then (after ``cost``, by default ``rt_slowpath``) :meth:`_wait`.
        Also the continuation of a woken waiter (``post``: its pass after the wakeup)."""
        if cost < 0:
            cost = self.model.rt_slowpath
        if self.unlocking is not None and self.unlocking is not t:
            # spin_lock_irqsave(&lock->wait_lock): a releaser's slow pass holds it
            t.preempt_count += 1
            lw = t.lockw
            lw.spinning = True
            lw.spin_tok += 1
            self.wl_spinners.append(t)
            t.post = self._wl_spin_post
            return SPIN_QUANTUM
        lw = t.lockw
        # _try_take(t); an owned lock without a pending owner is not taken (tested here first)
        if (self.pending or self.owner is None) and self._try_take(t):
            op: Lock = lw.op
            lw.op = None
            fn = op.hold_fn
            return cost + (op.hold_ns if fn is None else fn(cpu, t))
        if lw.granted:  # woken as pending owner, robbed before it ran
            lw.granted = False
            self.stats.c[WASTED_WAKEUPS] += 1
        if lw.blocked_on is not self:  # not queued(t)
            self._enqueue(t)
        t.post = self._wait
        return cost

    def _wait(self, cpu: CPU, t: Task) -> int:
        """wait_lock dropped: spin while the owner runs (adaptive_wait) or sleep."""
        o = self.owner
        if o is t or o is None or t.lockw.blocked_on is not self:  # ... or not queued(t)
            # granted (or robbed, or released) meanwhile: go round the loop again, no sleep
            return self._slow(cpu, t, self.model.rt_slowpath)
        if self.adaptive and o.on_cpu and (not self.top_spin or self._may_spin(cpu, t)):
            t.lockw.spin_owner = o
            self._start_spin(t, self.spinners, 0)
            t.post = self._spin_post
            return SPIN_QUANTUM
        return self._sleep(t, o)

    def _sleep(self, t: Task, o: Task) -> int:
        m = self.model
        self.stats.c[SLEEPS] += 1
        log = m._log
        if log is not None:
            log.append(("sleep", m.env._now, self.name, t.tid, o.on_cpu, self.adaptive))
        t.post = self._slow  # the wakeup's pass (rt_slowpath)
        return BLOCKED

    def _may_spin(self, cpu: CPU, t: Task) -> bool:
        """top_spin: t is the top waiter, the owner has taken the lock, no reschedule pending."""
        return not self.pending and bool(self.waiters) and self.waiters[0][2] is t and not cpu.need_resched

    def _spin_post(self, cpu: CPU, t: Task) -> int:
        """adaptive_wait's loop: granted, owner changed, or owner off its CPU."""
        o = self.owner
        so = t.lockw.spin_owner
        if self.top_spin and o is so and o is not t and cpu.need_resched:
            self._stop_spin(t, self.spinners)
            return self._sleep(t, o)  # rtmutex_spin_on_owner: need_resched() ends the spin, schedule()
        if o is so and o is not t and o is not None and o.on_cpu:
            t.post = self._spin_post
            return SPIN_QUANTUM
        self._stop_spin(t, self.spinners)
        if o is t or o is not so:
            return self._slow(cpu, t, self.model.rt_slowpath)
        return self._wait(cpu, t)  # "owner went to bed, so should we"

    def _wl_spin_post(self, cpu: CPU, t: Task) -> int:
        """Spinning on wait_lock: go on until the releaser drops it, then do the pass."""
        if self.unlocking is not None:
            t.post = self._wl_spin_post
            return SPIN_QUANTUM
        t.lockw.spinning = False
        t.preempt_count -= 1
        return self._slow(cpu, t, self.model.rt_slowpath)

    # -- releasing
    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:
        m = self.model
        if self.waiters:
            # the slow unlock: its pass runs under lock->wait_lock and ends in the handoff.
            # Today's (top_spin; rt_mutex_slowunlock, __rt_mutex_futex_unlock in
            # kernel/locking/rtmutex.c): mark_wakeup_next_waiter's store to lock->owner is the
            # first thing a spinning top waiter can see, and the wakeup (rt_mutex_postunlock,
            # wake_up_q) comes after wait_lock is dropped. 2.6.24-rt (rt_spin_lock_slowunlock,
            # rt_mutex_slowunlock): wakeup_next_waiter sets the pending owner and wakes it at
            # the end of the pass, wait_lock held (with interrupts off) until the wakeup is done.
            lw = t.lockw
            if lw is None:
                lw = t.lockw = LockWait()
            lw.ul_op = op
            t.post = self._unlock_post
            if not self.top_spin:
                t.preempt_count += 1
                self.unlocking = t
            return m.cfg.rt_slowpath
        t.held.remove(self)  # _dropped, inlined (the uncontended unlock)
        if not m.quiet:
            if m._log is not None:
                m._log.append(("release", m.env._now, self.name, t.tid, ""))
            if m.tracer is not None:
                self._trace_span(t.name, "lock")
        self.owner = None
        self.pending = False
        if t.prio != t.base_prio:
            m.adjust_prio(t, 0)
        fn = op.after_fn
        return m.atomic + (op.after_ns if fn is None else fn(cpu, t))

    def _unlock_post(self, cpu: CPU, t: Task) -> int:
        """The slow unlock's pass is done; hand the lock to the top waiter now."""
        lw = t.lockw
        op: Unlock = lw.ul_op
        lw.ul_op = None
        # _dropped(t), inlined
        t.held.remove(self)
        m = self.model
        if m._log is not None:
            m._log.append(("release", m.env._now, self.name, t.tid, ""))
        if m.tracer is not None:
            self._trace_span(t.name, "lock")
        if not self.waiters:  # pragma: no cover - waiters only leave with the lock
            self.owner = None
            self.pending = False
            self._wl_drop(t)
            return _after(cpu, t, op)
        if self.top_spin:
            return self._handoff(cpu, t, op)
        cost = self._handoff(cpu, t, None)
        lw.ul_op = op
        t.post = self._unlock_done
        return cost

    def _unlock_done(self, cpu: CPU, t: Task) -> int:
        """2.6.24-rt: the wakeup under wait_lock is done; drop wait_lock, then ``after``."""
        lw = t.lockw
        op: Unlock = lw.ul_op
        lw.ul_op = None
        if self.unlocking is t:  # _wl_drop(t), inlined
            self.unlocking = None
            t.preempt_count -= 1
            spinners = self.wl_spinners
            if spinners:
                for s in spinners:
                    self.model.notice(s)
                spinners.clear()
        fn = op.after_fn
        return op.after_ns if fn is None else fn(cpu, t)

    def _wl_drop(self, t: Task) -> None:
        if self.unlocking is t:
            self.unlocking = None
            t.preempt_count -= 1
            for s in self.wl_spinners:
                self.model.notice(s)
            self.wl_spinners.clear()

    def _handoff(self, cpu: CPU, t: Task, op: Unlock | None) -> int:
        """wakeup_next_waiter / mark_wakeup_next_waiter: the top waiter becomes the pending
        owner and is woken unless it spins; returns the releaser's cost after the pass (with
        ``op``'s ``after`` unless ``op`` is None)."""
        m = self.model
        cost = 0
        # the top waiter leaves the queue (_dequeue(w), inlined: its key is the first)
        w = self.waiters.popleft()[2]
        lw = w.lockw
        lw.wkey = None
        lw.blocked_on = None
        self.owner = w
        self.pending = True
        lw.granted = True
        lw.grant_t = m.env._now
        w.held.append(self)
        if m.tracer is not None:
            self.since = m.env._now  # the pending-owner interval starts
        self.stats.c[HANDOFFS] += 1
        log = m._log
        if log is not None:
            log.append(("grant", m.env._now, self.name, w.tid, t.tid))
        if m.pi_waiters or t.prio != t.base_prio or w.prio != w.base_prio:  # else no-ops
            m.adjust_prio(t, 0)
            m.adjust_prio(w, 0)
        if lw.spinning:
            m.notice(w)  # a spinning waiter is running: no wakeup needed
        elif w.state == T_BLOCKED:
            if log is not None:
                log.append(("wake", m.env._now, self.name, w.tid, ""))
            cost += m.m.wake(w, cpu)
        for s in self.spinners:
            if s is not w:
                m.notice(s)  # the owner changed: spinners retry (and may steal)
        return cost if op is None else cost + _after(cpu, t, op)

    def owner_off_cpu(self) -> None:
        """The owner stopped running: adaptive spinners go to sleep."""
        for s in self.spinners:
            self.model.notice(s)


class Mutex(KernelLock):
    """struct mutex without PREEMPT_RT (kernel/mutex.c, kernel/locking/mutex.c): FIFO sleepers;
    unlock releases the lock and wakes the first waiter, which may lose it to a newcomer. The
    'mainline' flavour spins while the owner runs (mutex_optimistic_spin) and, once the first
    waiter has lost after a wakeup, hands the next unlock directly to it (HANDOFF)."""

    __slots__ = ("waiters", "spinners", "handoff", "mainline")
    kind = "mutex"

    def __init__(self, model: LockModel, name: str, stats: LockClassStats, mainline: bool) -> None:
        super().__init__(model, name, stats, spins=mainline)  # only mainline mutexes spin (acquire)
        self.waiters: list[Task] = []
        self.spinners: list[Task] = []
        self.handoff = False
        self.mainline = mainline

    def _take(self, t: Task, how: str) -> None:
        if t in self.waiters:
            if self.waiters[0] is t:
                self.handoff = False
            self.waiters.remove(t)
        self._took(t, how)

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:
        if self.owner is None and not self.handoff:
            self._take(t, "fast")
            return self.model.cfg.atomic + _hold(cpu, t, op)
        self.stats.c[CONTENDED] += 1
        lw = _lw(t)
        lw.op = op
        o = self.owner
        if self.mainline and o is not None and o.on_cpu:
            lw.spin_owner = o
            self._start_spin(t, self.spinners, 0)
            t.post = self._spin_post
            return SPIN_QUANTUM
        return self._queue_and_sleep(cpu, t)

    def _queue_and_sleep(self, cpu: CPU, t: Task) -> int:
        if t not in self.waiters:
            self.waiters.append(t)
            log = self.model._log
            if log is not None:
                log.append(("enqueue", self.model.env._now, self.name, t.tid, t.prio))
        t.post = self._block_post
        return self.model.cfg.mutex_slowpath

    def _spin_post(self, cpu: CPU, t: Task) -> int:
        o = self.owner
        lw = t.lockw
        if o is lw.spin_owner and o is not None and o.on_cpu:
            t.post = self._spin_post
            return SPIN_QUANTUM
        self._stop_spin(t, self.spinners)
        if o is t or (o is None and not self.handoff):
            if o is None:
                self._take(t, "spin")
            op: Lock = lw.op
            lw.op = None
            return self.model.cfg.atomic + _hold(cpu, t, op)
        if o is not None and o.on_cpu and t not in self.waiters:
            lw.spin_owner = o
            self._start_spin(t, self.spinners, 0)
            t.post = self._spin_post
            return SPIN_QUANTUM
        return self._queue_and_sleep(cpu, t)

    def _block_post(self, cpu: CPU, t: Task) -> int:
        if self.owner is t or (self.owner is None and (not self.handoff or self.waiters[0] is t)):
            return self._wake_post(cpu, t)
        m = self.model
        self.stats.c[SLEEPS] += 1
        log = m._log
        if log is not None:
            o = self.owner
            log.append(("sleep", m.env._now, self.name, t.tid, bool(o is not None and o.on_cpu), False))
        t.post = self._wake_post
        return BLOCKED

    def _wake_post(self, cpu: CPU, t: Task) -> int:
        o = self.owner
        if o is t or (o is None and (not self.handoff or self.waiters[0] is t)):
            if o is None:
                self._take(t, "slow")
            elif t in self.waiters:
                self.waiters.remove(t)
            lw = t.lockw
            op: Lock = lw.op
            lw.op = None
            return self.model.cfg.mutex_slowpath + _hold(cpu, t, op)
        lw = t.lockw
        woken = lw.woken
        lw.woken = False
        if woken:
            self.stats.c[WASTED_WAKEUPS] += 1
            if self.mainline and self.waiters and self.waiters[0] is t:
                self.handoff = True  # __mutex_lock_common: the first waiter asks for a handoff
        return self._queue_and_sleep(cpu, t)

    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:
        self._dropped(t)
        m = self.model
        cost = m.cfg.atomic
        for s in self.spinners:
            m.notice(s)
        if not self.waiters:
            self.owner = None
            return cost + _after(cpu, t, op)
        cost = m.cfg.mutex_slowpath
        w = self.waiters[0]
        if self.handoff:
            self.handoff = False
            self.waiters.pop(0)
            self.stats.c[HANDOFFS] += 1
            self._took(w, "handoff")
        else:
            self.owner = None
        if w.state == T_BLOCKED:
            w.lockw.woken = True
            log = m._log
            if log is not None:
                log.append(("wake", m.env._now, self.name, w.tid, ""))
            cost += m.m.wake(w, cpu)
        return cost + _after(cpu, t, op)


class PerCpuLock:
    """One lock per CPU; a task takes the one of the CPU it runs on when it asks (the -rt
    per-CPU locked slab arrays, DEFINE_PER_CPU_LOCKED / get_cpu_var_locked), and releases that
    same one wherever it runs by then."""

    __slots__ = ("name", "locks", "held")

    def __init__(self, name: str, locks: list[KernelLock]) -> None:
        self.name = name
        self.locks = locks
        # task id -> the CPU's lock it took last: valid while it holds it (an entry is
        # overwritten, never removed: no dict churn on every operation; a release without the
        # lock still fails in an exclusive lock's release, which removes it from ``Task.held``)
        self.held: dict[int, KernelLock] = {}

    def acquire(self, cpu: CPU, t: Task, op: Lock) -> int:
        real = self.locks[cpu.index]
        self.held[t.tid] = real
        return real.acquire(cpu, t, op)

    def release(self, cpu: CPU, t: Task, op: Unlock) -> int:
        return self.held[t.tid].release(cpu, t, op)


class LockModel:
    """The installed ``[kernel.locks]`` mechanism (kernel/locking/, the -rt patch's
    include/linux/spinlock.h mapping of lock types): makes locks of the kernel's flavour, handles
    :class:`Lock` / :class:`Unlock`, wakes adaptive spinners when an owner stops running, runs
    the -rt timer softirq threads, and counts what happened (:meth:`metrics`)."""

    def __init__(self, m: Machine, cfg: LocksConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.seq = 0
        # an rt-mutex waiter of RT priority was queued at some time: until then every waiter's
        # priority is 0, so adjust_prio of a task at its base priority changes nothing (the
        # hot paths skip the call then)
        self.pi_waiters = False
        self.rng = m.streams.get("locks")
        # read per lock operation: cached (the machine's tracer and the config never change)
        self.env = m.env
        self.tracer = m.tracer
        self.atomic = cfg.atomic
        self.rt_slowpath = cfg.rt_slowpath
        self.classes: dict[str, LockClassStats] = {}
        self.locks: list[KernelLock] = []
        self._log: list[tuple[Any, ...]] | None = None
        # neither a log nor a tracer: the uncontended paths test this once instead of both
        self.quiet = self.tracer is None
        self.softirq_runs = 0
        # the engine calls the op's lock directly (BoundOp): no handler of our own per lock op
        m.handle(Lock, run_bound)
        m.handle(Unlock, run_bound)
        # The switch hook has work only once a lock exists (a switched-out owner's spinners);
        # the first lock puts it in this place among the machine's hooks (hook_switch), so a
        # machine without locks does not call it at every context switch.
        self.switch_hooked = False
        self._switch_slot = len(m.switch_hooks)
        if cfg.preempt_rt and cfg.rt_softirq_thread:
            self._threads = [self._spawn_softirq_thread(c.index) for c in m.cpus]
            m.tick_hooks.append(self._on_tick)

    @property
    def log(self) -> list[tuple[Any, ...]] | None:
        """Every lock event, when set to a list (tests: ``model.log = []``); None records nothing."""
        return self._log

    @log.setter
    def log(self, log: list[tuple[Any, ...]] | None) -> None:
        self._log = log
        self.quiet = log is None and self.tracer is None

    # -- making locks
    def _stats(self, cls: str) -> LockClassStats:
        s = self.classes.get(cls)
        if s is None:
            s = self.classes[cls] = LockClassStats(cls)
        return s

    def new_lock(self, decl: str, name: str, cls: str | None = None) -> KernelLock:
        """A lock declared in kernel code as ``decl`` (raw_spinlock, spinlock, rwlock, mutex,
        rt_mutex), implemented as this kernel does. ``cls`` groups locks in the metrics."""
        cfg = self.cfg
        stats = self._stats(cls or name)
        rt = cfg.preempt_rt
        lock: KernelLock
        if decl == "raw_spinlock" or (decl == "spinlock" and not rt):
            lock = RawSpinLock(self, name, stats)
        elif decl == "spinlock" or (decl == "rwlock" and rt and cfg.rwlock == "exclusive"):
            lateral = cfg.policy in ("lateral", "adaptive")
            lock = RtMutex(self, name, stats, lateral=lateral, adaptive=cfg.policy == "adaptive")
        elif decl == "rwlock":
            lock = SharedReadLock(self, name, stats, sleeping=rt)
        elif decl == "mutex" and not rt:
            lock = Mutex(self, name, stats, mainline=cfg.mutex == "mainline")
        elif decl in ("mutex", "rt_mutex"):
            lock = RtMutex(self, name, stats, lateral=False, adaptive=False)
        else:
            raise ValueError(f"unknown lock type {decl!r} (raw_spinlock, spinlock, rwlock, mutex, rt_mutex)")
        self.locks.append(lock)
        return lock

    def new_percpu_lock(self, decl: str, name: str, cls: str | None = None) -> PerCpuLock:
        return PerCpuLock(name, [self.new_lock(decl, f"{name}/{c.index}", cls or name) for c in self.m.cpus])

    # -- services for the lock classes
    def notice(self, t: Task) -> None:
        """A spinner sees the lock word change after a cache-line transfer."""
        self.m.call_at(self.cfg.cacheline, self._end_spin, t, t.lockw.spin_tok)

    def _end_spin(self, t: Task, tok: int) -> None:
        w = t.lockw
        if w.spinning and w.spin_tok == tok:
            self.m.end_segment(t)

    def hook_switch(self) -> None:
        """Install the context-switch hook where it was due (hooks are only ever appended)."""
        self.switch_hooked = True
        self.m.switch_hooks.insert(self._switch_slot, self._on_switch)

    def _on_switch(self, cpu: CPU, prev: Task | None, nxt: Task | None) -> None:
        if prev is None:
            return
        held = prev.held
        if held:
            for lk in held:
                spinners = getattr(lk, "spinners", None)
                if spinners:
                    for s in spinners:
                        self.notice(s)

    def adjust_prio(self, t: Task, depth: int) -> None:
        """__rt_mutex_adjust_prio and the chain walk: ``t`` runs at the highest of its own
        priority and its rt-mutexes' top waiters'; if it is blocked on an rt-mutex, the new
        priority requeues it there and propagates to that lock's owner."""
        prio = t.base_prio
        held = t.held
        if held:
            for lk in held:
                if type(lk) is RtMutex and lk.waiters:
                    p = -lk.waiters[0][0]
                    if p > prio:
                        prio = p
        if prio == t.prio:
            return
        if prio > t.prio:
            for lk in held:
                lk.stats.c[PI_BOOSTS] += 1
                break
        log = self.log
        if log is not None:
            log.append(("prio", self.m.now, "", t.tid, prio))
        self.m.set_prio(t, prio)
        lw = t.lockw
        blocked = lw.blocked_on if lw is not None else None
        if blocked is not None and depth < self.cfg.max_lock_depth:
            blocked.requeue(t)
            o = blocked.owner
            if o is not None and o is not t:
                self.adjust_prio(o, depth + 1)

    # -- PREEMPT_RT threaded timer softirq
    def _spawn_softirq_thread(self, cpu: int) -> Task:
        cost = self.cfg.timer_softirq

        def run(c: CPU, task: Task) -> int:
            self.softirq_runs += 1
            return cost

        def park(c: CPU, task: Task) -> int:
            if task.data.get("raised"):
                task.data["raised"] = False
                return 0
            return BLOCKED

        from sim.ops import Call

        op_run, op_park = Call(run), Call(park)

        def script(task: Task):  # type: ignore[no-untyped-def]
            while True:
                yield op_park
                yield op_run

        return self.m.spawn(
            script, f"softirq-timer/{cpu}", policy="fifo", prio=self.cfg.rt_softirq_prio, affinity=(cpu,), kthread=True
        )

    def _on_tick(self, cpu: CPU) -> None:
        k = self._threads[cpu.index]
        if k.state == T_BLOCKED:
            self.m.wake(k, cpu)
        else:
            k.data["raised"] = True

    # -- results
    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        totals = [0] * len(COUNTER_NAMES)
        for cls in sorted(self.classes):
            c = self.classes[cls].c
            for i, v in enumerate(c):
                totals[i] += v
            for i in (ACQUIRED, CONTENDED, HANDOFFS, STEALS, SPINS, SLEEPS, WASTED_WAKEUPS):
                out[f"{cls}.{COUNTER_NAMES[i]}"] = float(c[i])
        for i, name in enumerate(COUNTER_NAMES):
            out[name] = float(totals[i])
        out["spin_ms"] = out.pop("spin_ns") / 1e6
        # how long a lock stayed reserved for a woken pending owner before it ran and took it
        out["pending_owner_wait_us"] = out.pop("pending_ns") / 1e3 / max(1.0, out["handoffs"] - out["steals"])
        out["softirq_thread_runs"] = float(self.softirq_runs)
        return out


def install(m: Machine, cfg: LocksConfig) -> LockModel:
    cfg.check_kernel(m.kernel, "kernel.locks")
    return LockModel(m, cfg)
