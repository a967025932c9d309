"""The simulated machine: CPUs, run queues, the scheduler, interrupts, softirqs and the tick.

Design (why it looks like this):

* Every CPU is a small state machine driven by entries in the event heap (see :class:`Env`)
  rather than a SimPy process per task. A CPU has at most one pending timed *action* (end of a
  run segment, of an interrupt, of a context switch, of the idle exit); interrupting it
  supersedes that entry, which is ignored when it comes up. This keeps the per-event work small
  (see ``benchmarks/engine.py``) and gives exact control over preemption.
* A task's script yields ops (:mod:`sim.ops`); a handler turns an op into kernel CPU time, an
  immediate result, or a block on a wait queue. ``task.post`` is a continuation run when the
  op's CPU time has elapsed, so an op can have effects at its end (a pipe write wakes the reader
  after the copy, not before).
* Interrupts (tick, IPIs, timers) pause the running segment, run their handler's effects at
  once and occupy the CPU for their cost; softirqs raised meanwhile run at interrupt exit, and
  after ``MAX_SOFTIRQ_RESTART`` rounds in a row they are handed to the per-CPU ksoftirqd kthread
  (kernel/softirq.c), where they compete with tasks like any thread.
* Scheduling follows kernel/sched: SCHED_FIFO above SCHED_OTHER; SCHED_OTHER is CFS (virtual
  runtime, sched_latency / min_granularity slices checked at the tick, wakeup preemption with
  wakeup_granularity, sleeper placement at min_vruntime - latency/2); wakeup placement prefers
  the previous CPU if idle, then any idle CPU, then the less loaded of previous and waker CPU
  (select_task_rq_fair / select_idle_sibling); an idle CPU pulls a waiting task
  (newidle balance) and busy CPUs kick idle ones (nohz balance kick) or pull from a busier one
  every few ticks. ``kernel.sched = "eevdf"`` replaces CFS's pick, preemption and placement by
  6.18's EEVDF (the ``CPU._eevdf_*`` and ``eevdf_*`` methods); ``kernel.wake_affine = "weight"``
  selects the wakeup CPU as 4.14+ does for WF_SYNC wakeups (:meth:`Machine._select_cpu_weight`).
* The tick runs at HZ on CPUs that are not idle; with NO_HZ idle it stops while a CPU idles and
  restarts, aligned to the jiffy grid, when the CPU wakes.

Time is integer nanoseconds. Nothing here is global: a Machine owns everything it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from heapq import heapify, heappop, heappush, heapreplace
from typing import TYPE_CHECKING, Any

import simpy
from simpy.core import EmptySchedule, StopSimulation

from .errors import ScenarioError
from .ops import BLOCKED, BoundOp, Call, CpuWork, Op, Script, ScriptFactory, Sleep, Spawn, Syscall, WaitChild, Yield, run_bound
from .params import Costs, KernelConfig, MachineConfig
from .rng import Jitter, Streams
from .stats import FLUSH, LogHistogram
from .task import BLOCKED as T_BLOCKED
from .task import DONE, NICE_0_WEIGHT, RUNNABLE, Task
from .timerwheel import calc_wheel_index, lvl_depth

if TYPE_CHECKING:
    import numpy as np

    from .trace import Tracer

# CPU states; accounting keeps one counter per state, so busy + idle == elapsed by construction.
IDLE, WAKING, USER, KERNEL, IRQ, SOFTIRQ, SWITCH = range(7)
STATE_NAMES = ("idle", "idle_exit", "user", "kernel", "irq", "softirq", "switch")


class Env(simpy.Environment):
    """A SimPy environment whose clock is integer nanoseconds (rcusim never schedules a
    non-integer delay, so ``now`` stays an int).

    The machine's own timed actions (a CPU's end of segment, switch or irq; the tick; a
    delivered interrupt; a :meth:`Machine.call_at` callback) are not :class:`simpy.Event`
    objects: the heap entry carries the object that acts (a :class:`CPU`, an :class:`_Irq`, a
    :class:`_Tick`, a :class:`_Call`) and :meth:`run` dispatches on its class, so such an event costs one tuple
    instead of an event, a callback list and a bound method. The end of a run segment, the
    most frequent event, is handled in the loop itself, up to the start of the task's next
    segment in the usual cases. Entries take their event id from SimPy's counter exactly as
    ``env.schedule`` does, so the order of all events, SimPy's and the machine's, is SimPy's
    ``(time, priority, event id)`` rule unchanged. Everything else (timeouts, processes,
    conditions, ``until``) is SimPy's own behaviour.
    """

    _now: int  # type: ignore[assignment]

    @property
    def now(self) -> int:  # type: ignore[override]
        # simpy.Environment.now, typed int; compiled (sim/compiled.py), a class attribute
        # annotation would become a slot shadowing SimPy's property
        return self._now

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)
        # SimPy events scheduled so far (see schedule): every other event id is a machine's
        # heap entry, so Machine.events needs no counter on the hot paths
        self.simpy_scheduled = 0
        # the op handlers of the machine built on this environment (Machine.handlers)
        self.handlers: dict[type, Any] = {}

    def schedule(self, event: simpy.Event, priority: Any = simpy.core.NORMAL, delay: Any = 0) -> None:
        # simpy.Environment.schedule, counted
        self.simpy_scheduled += 1
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))  # type: ignore[arg-type]

    def next_eid(self) -> int:
        """The event id the next heap entry will take (SimPy's counter, not advanced)."""
        r = repr(self._eid)  # "count(N)"
        return int(r[6:-1])

    def run(self, until: Any = None) -> Any:
        # simpy.Environment.run, with the step loop inlined (see _loop)
        if until is not None:
            if not isinstance(until, simpy.Event):
                at = until if isinstance(until, int) else float(until)
                if at <= self._now:
                    raise ValueError(f"until ({at}) must be greater than the current simulation time")
                until = simpy.Event(self)
                until._ok = True
                until._value = None
                self.schedule(until, simpy.core.URGENT, at - self._now)
            elif until.callbacks is None:
                return until.value
            until.callbacks.append(StopSimulation.callback)
        try:
            self._loop()
        except StopSimulation as exc:
            return exc.args[0]
        except EmptySchedule:
            if until is not None:
                assert not until.triggered
                raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}') from None
        return None

    def step(self) -> None:
        """Process the next event (SimPy's API; :meth:`run` does not go through it). The same
        work as one event of :meth:`_loop`, through the CPU's methods instead of inlined (a
        segment's end that is the next event is pushed and popped like any other)."""
        queue: list[Any] = self._queue  # type: ignore[assignment]
        if not queue:
            raise EmptySchedule
        now, _, eid, ev = heappop(queue)
        self._now = now
        cls = type(ev)
        if cls is CPU:
            if eid != ev.act_eid:  # superseded
                return
            ev.act_eid = -1
            action = ev.action
            if action is None:  # the end of a run segment
                t = ev.curr
                ev._charge(t, t.remaining)
                t.remaining = 0
                ev._dispatch()
            else:
                action()
        else:
            self._other(ev, cls)

    def _other(self, ev: Any, cls: type) -> None:
        """An event that is not a CPU's action (see _loop, which inlines this)."""
        if cls is _Irq:
            ev.cpu.raise_irq(ev.cost, ev.fn)
        elif cls is _Call:
            ev.fn(*ev.args)
        elif cls is _Tick:
            ev.cpu._tick_event(ev.gen)
        else:
            self._simpy_step(ev)

    def _simpy_step(self, ev: Any) -> None:
        # simpy.Environment.step
        callbacks, ev.callbacks = ev.callbacks, None
        try:
            for callback in callbacks:
                callback(ev)
        except StopSimulation:
            ev.callbacks = callbacks[callbacks.index(callback) + 1 :]
            self.schedule(ev, simpy.events.EventPriority(-1))
            raise
        if not ev._ok and not hasattr(ev, "_defused"):
            exc = type(ev._value)(*ev._value.args)
            exc.__cause__ = ev._value
            raise exc

    def _loop(self) -> None:
        queue: list[Any] = self._queue  # type: ignore[assignment]
        t: Task  # the current task of the CPU whose action this is
        no_post = NO_POST
        pop, replace, eids, handlers = heappop, heapreplace, self._eid, self.handlers
        cpu_cls, irq_cls, call_cls, tick_cls, cpuwork = CPU, _Irq, _Call, _Tick, run_cpuwork
        normal, blocked, user_st, kernel_st, bound = NORMAL, BLOCKED, USER, KERNEL, run_bound
        while True:
            if not queue:
                raise EmptySchedule
            now, _, eid, ev = pop(queue)
            # An entry, then the entries that a segment's end hands on (see the end of this loop)
            while True:
                self._now = now
                # A CPU's pending action has its event id in act_eid; an irq, a call or a tick
                # has act_eid -2 (a class attribute) and a SimPy event none: one test tells a
                # CPU's action from everything else, a superseded action included.
                try:
                    act = ev.act_eid
                except AttributeError:
                    act = -3
                if eid != act:
                    cls = type(ev)
                    if cls is cpu_cls:
                        pass  # superseded (the CPU was interrupted): ignore
                    elif cls is irq_cls:
                        ev.cpu.raise_irq(ev.cost, ev.fn)
                    elif cls is call_cls:
                        ev.fn(*ev.args)
                    elif cls is tick_cls:
                        ev.cpu._tick_event(ev.gen)
                    else:
                        self._simpy_step(ev)
                    break
                # ev is this CPU: a typed name for it (compiled, its fields are read natively)
                c: CPU = ev
                c.act_eid = -1
                action = c.action
                while True:
                    if action is None:
                        # the end of a run segment (inlined here: the hottest event); a segment
                        # runs its CPU's current task, so curr is not None
                        t = c.curr  # type: ignore[assignment]
                        ns = t.remaining
                        t.run_ns += ns
                        if t.vplain:  # CPU._charge's usual case in one test
                            t.vruntime += ns
                        elif not t.prio:
                            if t.vcredit:
                                ns = t.eevdf_uncredited(ns)
                            t.vruntime += ns if t.weight == 1024 else ns * 1024 // t.weight
                        # t.remaining still holds the ended segment's length: the next segment's
                        # start overwrites it, every other way on sets it to 0 first (nothing
                        # reads it for the running task in between)
                        if c.attn:  # maybe an irq, a softirq or a reschedule is pending
                            if c.irqs or c.softirq_pending or c.resched:
                                t.remaining = 0
                                c._dispatch()
                                r = 0
                                break
                            c.attn = False
                    elif action is c._dispatch_b:
                        # _dispatch after a switch or an irq, inlined for its usual outcome: the
                        # current task goes on at an op boundary (or with its retry, ``post``)
                        tc = c.curr
                        if tc is None or c.attn or tc.remaining > 0:
                            action()
                            r = 0
                            break
                        t = tc
                    else:
                        action()
                        r = 0
                        break
                    # The next step of the task, inlined for its usual outcomes (CPU time, or a
                    # block); anything else goes on in _run_ops, which starts at an op boundary.
                    post = t.post
                    if post is not None:
                        t.post = no_post
                        r = post(c, t)
                        st = kernel_st
                        if r == 0 and t.post is None and not c.attn:
                            # an op boundary with nothing pending (attn: not even maybe): the
                            # next op, _run_ops's first step, inlined
                            post = None
                    if post is None:
                        try:
                            op = t.script.send(t.retval)
                        except StopIteration:
                            end = t.on_end
                            if end is None:
                                t.remaining = 0
                                c._exit(t)
                                r = 0
                                break
                            t.on_end = None
                            op = end()
                        t.retval = None
                        # one lookup for every op: a lock's op carries its handler (BoundOp),
                        # CpuWork is the engine's own (its registry entry is run_cpuwork)
                        try:
                            h = handlers[type(op)]
                        except KeyError:
                            raise _no_handler(t, type(op)) from None
                        if h is bound:
                            bop: BoundOp = op  # type: ignore[assignment]  # its handler says it is one (typed like c)
                            r = bop.run(c, t, bop)
                            st = kernel_st
                        elif h is cpuwork:
                            work: CpuWork = op  # type: ignore[assignment]
                            r = work.ns
                            st = user_st if work.user else kernel_st
                        else:
                            r = h(c, t, op)
                            st = kernel_st
                    if r > 0:
                        # CPU._start_segment(t, r, st == USER), inlined
                        t.remaining = r
                        old = c.state
                        if old != st:
                            c.softirq_rounds = 0  # see _start_segment
                            if c.m.tracer is None:
                                c.acc[old] += now - c.since
                                c.state = st
                                c.since = now
                            else:
                                c._set_state(st)
                        c.seg_start = now
                        c.action = None
                        eid = next(eids)
                        at = now + r
                        try:
                            if queue[0][0] <= at:
                                # The heap's first entry comes before this segment's end (at
                                # the same time it has a lower priority or an older id): below.
                                break
                        except IndexError:  # nothing else is pending
                            pass
                        # This segment's end is the next event (nothing in the heap comes
                        # before it): go on to it at once instead of through the heap. Its
                        # event id is spent as a push would, so the order and the result are
                        # the heap's.
                        now = self._now = at
                        action = None
                        continue
                    elif r == blocked:
                        t.remaining = 0
                        t.state = T_BLOCKED
                        c._schedule()
                    else:
                        t.remaining = 0
                        c._run_ops(t)  # a zero-time step: the op loop goes on
                    break
                if r <= 0:
                    break  # the CPU's step is done: the next event comes from the heap
                # A segment started whose end is not the next event: push its end and pop the
                # heap's first entry in one heap operation (heapreplace is heappushpop when the
                # first entry is the smaller) and go on with that entry.
                c.act_eid = eid
                now, _, eid, ev = replace(queue, (at, normal, eid, ev))


# None, typed as Task.post: _loop clears a task's post with it, not with a literal None, after
# which mypy (and so mypyc, which then checks the type at run time) would take the field to stay
# None across the post() call that may set it again.
NO_POST: Callable[[CPU, Task], int] | None = None


def run_cpuwork(cpu: CPU, t: Task, op: CpuWork) -> int:
    """The handler registry's entry for :class:`CpuWork` (``Machine.handlers``): the engine
    runs CpuWork itself, in user or kernel mode, when it finds this entry; called, it gives
    the op's time."""
    return op.ns


def _no_work(cpu: CPU) -> None:
    """A timer callback whose work the model does not price (Machine._own_timer)."""
    return None


def _no_handler(t: Task, op_type: type) -> ScenarioError:
    return ScenarioError(
        f"task {t.name!r} used op {op_type.__name__}, which no installed mechanism handles; "
        "enable the model that provides it in the scenario's [kernel] section"
    )


class _Irq:
    """The heap entry of an interrupt on its way to a CPU (:meth:`Machine.interrupt`)."""

    __slots__ = ("cpu", "cost", "fn")
    act_eid = -2  # not a CPU's action (see Env._loop)

    def __init__(self, cpu: CPU, cost: int, fn: IrqFn | None) -> None:
        self.cpu = cpu
        self.cost = cost
        self.fn = fn


class _Call:
    """The heap entry of a bare timed callback (:meth:`Machine.call_at`)."""

    __slots__ = ("fn", "args")
    act_eid = -2  # not a CPU's action (see Env._loop)

    def __init__(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


class _Tick:
    """The heap entry of a CPU's next tick; superseded when the CPU's ``tick_gen`` moved on."""

    __slots__ = ("cpu", "gen")
    act_eid = -2  # not a CPU's action (see Env._loop)

    def __init__(self, cpu: CPU, gen: int) -> None:
        self.cpu = cpu
        self.gen = gen


NORMAL = simpy.core.NORMAL
TLB_NR_DYN_ASIDS = 6
"""Per-CPU PCID slots of x86 (arch/x86/include/asm/tlbflush.h): the mms whose TLB entries a CPU
keeps across switches (see ``Costs.asid_miss``)."""
# kernel/sched/pelt.c: a task's load halves every LOAD_AVG_PERIOD (32) periods of 1024 us
PELT_HALF_LIFE_NS = 32 * 1024 * 1000
# sysctl_sched_nr_migrate: at most this many tasks per load-balance pass (kernel/sched/core.c
# default 32, SCHED_NR_MIGRATE_BREAK; the loop_max of detach_tasks in kernel/sched/fair.c)
NR_MIGRATE = 32
RT_LOAD_WEIGHT = 2 * 88761  # 2.6.24 kernel/sched.c set_load_weight: a real-time task weighs prio_to_weight[0] * 2
# 2.6.24 include/linux/topology.h SD_MC_INIT (one domain spanning the cores of a package, each
# CPU a group of its own; the CPU-level domain above it spans the same CPUs and is degenerate):
IMBALANCE_PCT_2624 = 125
WAKE_IMBALANCE_2624 = 100 + (IMBALANCE_PCT_2624 - 100) // 2  # try_to_wake_up: 100 + (imbalance_pct - 100) / 2
BUSY_IDX_2624, IDLE_IDX_2624, NEWIDLE_IDX_2624 = 2, 0, 0  # busy_idx, idle_idx, newidle_idx
MIN_INTERVAL_2624, MAX_INTERVAL_2624, BUSY_FACTOR_2624 = 1, 4, 64  # ms; balance_interval starts at 1
CACHE_NICE_TRIES_2624 = 1
MAX_PINNED_INTERVAL_2624 = 512  # 2.6.24 kernel/sched.c
CPU_LOAD_IDX_MAX = 5  # 2.6.24 kernel/sched.c: rq->cpu_load[]
SCHED_LOAD_SCALE = 1024  # 2.6.24 include/linux/sched.h (SCHED_LOAD_SCALE_FUZZ is the same)
NR_MIGRATE_2624 = 32  # 2.6.24 kernel/sched.c sysctl_sched_nr_migrate
CPU_NOT_IDLE, CPU_IDLE, CPU_NEWLY_IDLE = 0, 1, 2  # enum cpu_idle_type

MAX_SOFTIRQ_RESTART = 10  # kernel/softirq.c
NO_PROGRESS_LIMIT = 1_000_000  # zero-time ops in a row before a task is declared stuck

Handler = Callable[["CPU", Task, Any], int]
IrqFn = Callable[["CPU"], int | None]
SoftirqHandler = Callable[["CPU"], "tuple[int, Callable[[CPU], None] | None]"]


class CPU:
    """One CPU: its run queue, its state and its accounting."""

    __slots__ = (
        "m", "env", "index", "curr", "rq", "nr_queued", "state", "since", "acc", "action",
        "seg_start", "resched", "attn", "irqs", "irq_from", "softirq_pending",
        "softirq_rounds", "softirq_done", "tick_on", "tick_count", "min_vruntime", "switches",
        "kick_pending", "resched_pending", "ksoftirqd", "ticks", "ipis", "idle_exits", "tid",
        "nohz_balance", "tick_gen", "tick_at", "jiffy_timers", "jiffy_global",
        "data", "act_eid", "_queue", "_eid", "_handlers", "_dispatch_b", "delayed", "load_avg",
        "active_mm", "asids", "next_asid", "cpu_load",
        "lb_next", "lb_last", "lb_interval", "lb_failed", "idle_at_tick", "nohz_recent", "active_balance",
        "push_cpu", "migration", "blocked_since", "tmigr_wakeup",
    )  # fmt: skip

    def __init__(self, machine: Machine, index: int) -> None:
        self.m = machine
        self.env = machine.env
        self.index = index
        self.curr: Task | None = None
        self.rq: list[tuple[int, int, int, Task]] = []
        self.nr_queued = 0
        self.state = IDLE
        self.since = 0
        self.acc = [0] * len(STATE_NAMES)
        self.action: Callable[[], None] | None = None
        self.seg_start = 0
        # need_resched (TIF_NEED_RESCHED; the property sets attn), and attn: set whenever an irq,
        # a softirq or a reschedule becomes pending, cleared by the loop when none is, so a
        # segment's end tests one flag (Env._loop)
        self.resched = False
        self.attn = False
        self.irqs: list[tuple[int, IrqFn | None]] = []
        self.irq_from = IDLE
        self.softirq_pending = 0
        self.softirq_rounds = 0
        self.softirq_done: Callable[[CPU], None] | None = None
        self.tick_on = False
        self.tick_gen = 0
        self.tick_at: int | None = None
        self.jiffy_timers: dict[int, list[Callable[[CPU], int | None]]] = {}
        # kernel.timer_wheel = "v6.9": the non-pinned ones, which an active CPU expires while this
        # one idles (the timer-migration hierarchy's pull); empty otherwise
        self.jiffy_global: dict[int, list[Callable[[CPU], int | None]]] = {}
        self.tick_count = 0
        self.min_vruntime = 0
        self.switches = 0
        self.kick_pending = False
        self.nohz_balance = False  # kicked by a busy CPU's tick: its next pull is an idle balance
        self.blocked_since = -1  # when it last went idle after running a task (-1: never): its PELT blocked load
        self.tmigr_wakeup = False  # it went idle last (no other CPU running a task): Machine.tmigr_last
        self.resched_pending = False
        self.ksoftirqd: Task | None = None
        self.ticks = 0
        self.ipis = 0
        self.idle_exits = 0
        self.tid = 0
        self.data: dict[str, Any] = {}  # per-CPU state of models (RCU's rcu_data, timer bases...)
        self.act_eid = -1  # event id of the pending timed action (see Env)
        self._queue: list[Any] = self.env._queue  # type: ignore[assignment]
        self._eid = self.env._eid
        self._handlers = machine.handlers  # the same dict: Machine.handle adds to it
        self._dispatch_b = self._dispatch  # bound once (the action after a switch or an irq)
        self.delayed: list[Task] = []  # eevdf: sleepers kept on the queue by DELAY_DEQUEUE
        # the mm the CPU runs on (rq->prev_mm / active_mm): the last user task's; kernel threads and
        # idle borrow it (lazy TLB), so it only changes when a task with another mm is switched in
        self.active_mm = 0
        # x86 PCIDs: the mms that own one of the CPU's TLB_NR_DYN_ASIDS slots, given out round robin
        # (arch/x86/mm/tlb.c choose_new_asid); a switch to an mm without one flushes its TLB
        self.asids = [0] * TLB_NR_DYN_ASIDS
        self.next_asid = 0
        self.load_avg = 0  # wake_affine = "weight": runnable weight averaged at the tick (PELT-like)
        # kernel.wake_affine / load_balance = "2.6.24": rq->cpu_load[0..4], the run queue's weight
        # sampled at the tick and decayed (update_cpu_load); cpu_load[0] is the last sample
        self.cpu_load = [0] * CPU_LOAD_IDX_MAX
        # kernel.load_balance = "2.6.24": this CPU's sched_domain (last_balance, balance_interval in
        # ms, nr_balance_failed), rq->next_balance (jiffies), rq->idle_at_tick,
        # rq->in_nohz_recently, rq->active_balance and push_cpu, its migration thread
        self.lb_next = 0
        self.lb_last = 0
        self.lb_interval = MIN_INTERVAL_2624
        self.lb_failed = 0
        self.idle_at_tick = False
        self.nohz_recent = False
        self.active_balance = False
        self.push_cpu = -1
        self.migration: Task | None = None

    # ------------------------------------------------------------------ timed actions
    def _after(self, delay: int, action: Callable[[], None]) -> None:
        # The CPU's one pending action: a heap entry naming this CPU (see Env); its event id
        # ``act_eid`` also tells cut_segment whether the segment it saw is still the one running.
        self.action = action
        eid = next(self._eid)
        self.act_eid = eid
        heappush(self._queue, (self.env._now + delay, NORMAL, eid, self))

    def _set_state(self, new: int) -> None:
        now = self.env._now
        old = self.state
        self.acc[old] += now - self.since
        tracer = self.m.tracer
        if tracer is not None and now > self.since and old != IDLE:
            if old in (USER, KERNEL) and self.curr is not None:
                name = self.curr.name
            else:
                name = STATE_NAMES[old]
            tracer.span(self.tid, name, self.since, now, cat=STATE_NAMES[old])
        self.state = new
        self.since = now

    # ------------------------------------------------------------------ queries
    @property
    def seg_active(self) -> bool:
        """Is the current task's run segment in progress (its end is the pending action)?
        The pending action is a segment's end when it is None (see Env), and there is one
        while ``act_eid`` is set; neither is stored twice, as they change at every event."""
        return self.act_eid >= 0 and self.action is None

    @property
    def need_resched(self) -> bool:
        """TIF_NEED_RESCHED: reschedule at the next preemption point."""
        return self.resched

    @need_resched.setter
    def need_resched(self, v: bool) -> None:
        self.resched = v
        if v:
            self.attn = True

    @property
    def idle(self) -> bool:
        """Nothing running and nothing queued (a wakeup may still be on its way)."""
        return self.curr is None and self.nr_queued == 0

    @property
    def nr_running(self) -> int:
        return self.nr_queued + (self.curr is not None)

    def in_user(self) -> bool:
        """Was the CPU in user mode when the interrupt being handled arrived?"""
        return self.irq_from == USER

    def was_idle(self) -> bool:
        """Was the CPU idle when the interrupt being handled arrived?"""
        return self.irq_from in (IDLE, WAKING)

    def curr_vruntime(self) -> int:
        t = self.curr
        if t is None:
            return 0
        v = t.vruntime
        if self.act_eid >= 0 and self.action is None:  # seg_active
            e = self.env._now - self.seg_start
            if t.vcredit:
                e = max(0, e - t.vcredit)
            v += e * 1024 // t.weight
        return v

    # ------------------------------------------------------------------ run queue
    def _enqueue(self, t: Task) -> None:
        m = self.m
        m.seq += 1
        seq = m.seq
        t._rq_seq = seq
        t.cpu = self.index
        t.wait_since = self.env._now
        if t.prio:
            heappush(self.rq, (0, -t.prio, seq, t))
        else:
            heappush(self.rq, (1, t.vruntime, seq, t))
        self.nr_queued += 1

    def _pop(self) -> Task | None:
        rq = self.rq
        while rq:
            _, _, seq, t = heappop(rq)
            if seq == t._rq_seq and t.state == RUNNABLE and not t.on_cpu:
                self.nr_queued -= 1
                t._rq_seq = 0
                return t
        return None

    def _peek(self) -> Task | None:
        rq = self.rq
        while rq:
            _, _, seq, t = rq[0]
            if seq == t._rq_seq and t.state == RUNNABLE and not t.on_cpu:
                return t
            heappop(rq)
        return None

    def _steal_candidate(self, dst: int, now: int, respect_hot: bool) -> Task | None:
        """A queued task that may move to CPU ``dst``. Under EEVDF (6.x) the one queued or picked
        longest ago: detach_tasks() (kernel/sched/fair.c) takes the tail of ``rq->cfs_tasks``,
        where account_entity_enqueue() adds a task and set_next_task_fair() moves a picked one to
        the head. Otherwise the first by queue order (the smallest vruntime: 2.6.24's balance
        iterator walked the cfs rbtree from its leftmost entity)."""
        hot = self.m.kernel.sched_migration_cost if respect_hot else -1
        if self.m.eevdf:
            best = None
            best_key = (0, 0)
            for _, _, seq, t in self.rq:
                if seq != t._rq_seq or t.state != RUNNABLE or t.on_cpu or not t.allowed(dst):
                    continue
                if hot >= 0 and t.run_ns and now - t.last_ran < hot:
                    continue
                key = (max(t.last_ran, t.wait_since), seq)
                if best is None or key < best_key:
                    best, best_key = t, key
            return best
        for _, _, seq, t in sorted(self.rq):
            if seq != t._rq_seq or t.state != RUNNABLE or t.on_cpu:
                continue
            if not t.allowed(dst):
                continue
            if hot >= 0 and t.run_ns and now - t.last_ran < hot:
                continue
            return t
        return None

    def _detach(self, t: Task) -> None:
        t._rq_seq = 0  # the heap entry is now stale
        self.nr_queued -= 1

    # ------------------------------------------------------------------ interrupts
    def raise_irq(self, cost: int, fn: IrqFn | None) -> None:
        """An interrupt arrives *now*. Call only from an event callback (use
        :meth:`Machine.interrupt` from anywhere else)."""
        self.irqs.append((cost, fn))
        self.attn = True
        st = self.state
        if st == IDLE:
            self.irq_from = IDLE
            self._exit_idle()
        elif st == USER or st == KERNEL:
            if self.act_eid >= 0 and self.action is None:  # seg_active
                self.irq_from = st
                self._pause()
                self._dispatch()
        # WAKING / IRQ / SOFTIRQ / SWITCH: taken when the current action ends.

    def _exit_idle(self) -> None:
        m = self.m
        self.idle_exits += 1
        self._set_state(WAKING)
        for h in m.idle_exit_hooks:
            h(self)
        self._after(m.idle_exit_latency(self), self._dispatch_b)

    def _run_irqs(self) -> None:
        irqs = self.irqs
        self.irqs = []
        self._set_state(IRQ)
        total = 0
        for cost, fn in irqs:
            total += cost
            if fn is not None:
                extra = fn(self)
                if extra:
                    total += extra
        self._after(total, self._dispatch_b)

    def raise_softirq(self, vec: int) -> None:
        """Mark softirq ``vec`` pending on this CPU; it runs at the next interrupt exit or op
        boundary (or in ksoftirqd under softirq overload)."""
        self.softirq_pending |= 1 << vec
        self.attn = True

    def _run_softirq(self) -> None:
        pending = self.softirq_pending
        vec = (pending & -pending).bit_length() - 1
        self.softirq_pending = pending & ~(1 << vec)
        self.softirq_rounds += 1
        self._set_state(SOFTIRQ)
        cost, done = self.m.softirq_handlers[vec](self)
        self.softirq_done = done
        self._after(cost + self.m.costs.softirq_entry, self._softirq_end)

    def _softirq_end(self) -> None:
        done = self.softirq_done
        if done is not None:
            self.softirq_done = None
            done(self)
        self._dispatch()

    def _softirq_overloaded(self) -> bool:
        if self.softirq_rounds < MAX_SOFTIRQ_RESTART:
            return False
        self.m._wake_ksoftirqd(self)
        return True

    # ------------------------------------------------------------------ the core loop
    def _dispatch(self) -> None:
        """Decide what this CPU does now that no timed action is pending."""
        if self.irqs:
            self._run_irqs()
            return
        if self.softirq_pending and not self._softirq_overloaded():
            self._run_softirq()
            return
        t = self.curr
        if t is None:
            self._schedule()
            return
        if self.resched and self._preemptible(t):
            self._schedule()
            return
        # _advance(t), inlined
        if t.remaining > 0:
            self._start_segment(t, t.remaining, t.seg_user)
        else:
            self._run_ops(t)

    def _preemptible(self, t: Task) -> bool:
        if t.preempt_count:
            return False
        if t.remaining > 0:
            return t.seg_user or self.m.preempt_full
        if t.post is not None:
            return self.m.preempt_full
        return True

    def _advance(self, t: Task) -> None:
        """Run ``t``'s script until it needs CPU time, blocks or ends."""
        if t.remaining > 0:
            self._start_segment(t, t.remaining, t.seg_user)
            return
        self._run_ops(t)

    def _run_ops(self, t: Task) -> None:
        # The hottest path of the engine, with _start_segment inlined at the end.
        handlers = self._handlers
        spins = 0
        limit = NO_PROGRESS_LIMIT
        while True:
            post = t.post
            if post is not None:
                t.post = None
                r = post(self, t)
            else:
                # An op boundary: a preemption point (return to user / cond_resched) and the
                # place where softirqs raised by the previous op run. (The usual case, neither
                # pending, is tested first.)
                if (self.resched or self.softirq_pending) and t.preempt_count == 0:
                    if self.resched:
                        self._schedule()
                        return
                    if self.softirq_pending and not self._softirq_overloaded():
                        self._run_softirq()
                        return
                try:
                    op = t.script.send(t.retval)
                except StopIteration:
                    end = t.on_end
                    if end is None:
                        self._exit(t)
                        return
                    t.on_end = None
                    op = end()
                t.retval = None
                op_type = type(op)
                if op_type is CpuWork:
                    r = op.ns  # type: ignore[attr-defined]
                    if r > 0:
                        user = op.user  # type: ignore[attr-defined]
                        break
                    continue
                try:
                    h = handlers[op_type]
                except KeyError:
                    raise _no_handler(t, op_type) from None
                r = op.run(self, t, op) if h is run_bound else h(self, t, op)  # type: ignore[attr-defined]
            if r > 0:
                user = False
                break
            if r == BLOCKED:
                t.state = T_BLOCKED
                self._schedule()
                return
            spins += 1
            if spins > limit:
                raise ScenarioError(f"task {t.name!r} makes no progress: {NO_PROGRESS_LIMIT} zero-time ops in a row")
        # _start_segment(t, r, user)
        t.remaining = r
        st = USER if user else KERNEL
        now = self.env._now
        old = self.state
        if old != st:
            self.softirq_rounds = 0  # see _start_segment
            if self.m.tracer is None:  # _set_state(st) without a trace, inlined
                self.acc[old] += now - self.since
                self.state = st
                self.since = now
            else:
                self._set_state(st)
        self.seg_start = now
        self.action = None  # None: the pending action is this segment's end (see Env._loop)
        eid = next(self._eid)
        self.act_eid = eid
        heappush(self._queue, (now + r, NORMAL, eid, self))

    def _start_segment(self, t: Task, ns: int, user: bool) -> None:
        t.remaining = ns
        st = USER if user else KERNEL
        if self.state != st:  # back-to-back segments of one task in one mode form one span
            # Softirq rounds in a row end when a task segment starts. Only a segment start sets
            # USER or KERNEL and only _run_softirq (which sets SOFTIRQ) counts a round, so a
            # segment that follows one in the same mode finds the count at 0 already: it is
            # reset on a change of state only (here and in the two inlined copies, _run_ops
            # and Env._loop).
            self.softirq_rounds = 0
            self._set_state(st)
        now = self.env._now
        self.seg_start = now
        self.action = None
        eid = next(self._eid)
        self.act_eid = eid
        heappush(self._queue, (now + ns, NORMAL, eid, self))

    def _pause(self) -> None:
        t = self.curr
        assert t is not None
        # the mode the rest of the segment resumes in: only read for a paused segment, so it is
        # stored here rather than at every segment's start (a segment runs in USER or KERNEL)
        t.seg_user = self.state == USER
        self.act_eid = -1
        self.action = None
        elapsed = self.env._now - self.seg_start
        t.remaining -= elapsed
        self._charge(t, elapsed)

    def _charge(self, t: Task, ns: int) -> None:
        t.run_ns += ns
        if not t.prio:
            if t.vcredit:
                ns = t.eevdf_uncredited(ns)
            t.vruntime += ns if t.weight == 1024 else ns * 1024 // t.weight

    def update_min_vruntime(self) -> int:
        """min_vruntime only moves forward (update_min_vruntime in kernel/sched/fair.c); it is
        brought up to date where it is read (placement, migration), not on every charge."""
        # _peek and curr_vruntime inlined (this runs on every wakeup)
        rq = self.rq
        head = None
        while rq:
            _, _, seq, h = rq[0]
            if seq == h._rq_seq and h.state == RUNNABLE and not h.on_cpu:
                head = h
                break
            heappop(rq)
        t = self.curr
        if t is not None and not t.prio:
            v = t.vruntime
            if self.act_eid >= 0 and self.action is None:  # seg_active
                v += (self.env._now - self.seg_start) * 1024 // t.weight
            if head is not None and not head.prio and head.vruntime < v:
                v = head.vruntime
        elif head is not None and not head.prio:
            v = head.vruntime
        else:
            return self.min_vruntime
        if v > self.min_vruntime:
            self.min_vruntime = v
        return self.min_vruntime

    # ------------------------------------------------------------------ EEVDF (kernel.sched = "eevdf")
    def _eevdf_entities(self) -> list[Task]:
        """The fair tasks in this CPU's tree (kernel/sched/fair.c ``tasks_timeline``): queued
        ones and sleepers whose dequeue is delayed; the running task is not among them."""
        rq = self.rq
        ents = [q for _, _, seq, q in rq if seq == q._rq_seq and q.state == RUNNABLE and not q.on_cpu and not q.prio]
        if len(rq) > 2 * len(ents) + 32:  # drop stale heap entries (EEVDF takes tasks from inside the heap)
            self.rq = rq = [e for e in rq if e[2] == e[3]._rq_seq and e[3].state == RUNNABLE and not e[3].on_cpu]
            heapify(rq)
        if self.delayed:
            ents.extend(self.delayed)
        return ents

    def _eevdf_lag_limit(self, t: Task) -> int:
        # update_entity_lag: lag is clamped to max(2 slices, one tick) of virtual time
        m = self.m
        return max(2 * m.sched_slice, m.tick_ns) * 1024 // t.weight

    def _eevdf_dequeue_sleeper(self, t: Task) -> None:
        """dequeue_entity for a task going to sleep: with DELAY_DEQUEUE a task that is not
        eligible (it received more than its share) stays in the tree, still counted in the
        average, until it is picked or woken; otherwise it leaves with its lag
        (update_entity_lag: average vruntime minus its own, clamped)."""
        ents = self._eevdf_entities()
        v = t.vruntime
        w = t.weight
        swv = v * w
        load = w
        for q in ents:
            swv += q.vruntime * q.weight
            load += q.weight
        if ents and v * load > swv:
            t.delayed = True
            self.m.seq += 1
            t._rq_seq = self.m.seq  # its place among equal deadlines
            self.delayed.append(t)
            return
        lim = self._eevdf_lag_limit(t)
        t.vlag = max(-lim, min(lim, swv // load - v))

    def eevdf_set_lag(self, t: Task) -> None:
        """update_entity_lag for ``t`` leaving this queue (it is counted in the average even
        if already taken off the heap): the average vruntime minus its own, clamped."""
        ents = [q for q in self._eevdf_entities() if q is not t]
        swv = t.vruntime * t.weight
        load = t.weight
        for q in ents:
            swv += q.vruntime * q.weight
            load += q.weight
        c = self.curr
        if c is not None and c is not t and not c.prio and c.state == RUNNABLE and c.on_cpu:
            swv += self.curr_vruntime() * c.weight
            load += c.weight
        lim = self._eevdf_lag_limit(t)
        t.vlag = max(-lim, min(lim, swv // load - t.vruntime))

    def _eevdf_finish_delayed(self, t: Task, v_avg: int) -> int:
        """The delayed sleeper leaves the tree; returns its lag. DELAY_ZERO clips positive lag
        to zero (finish_delayed_dequeue_entity, requeue_delayed_entity)."""
        self.delayed.remove(t)
        t.delayed = False
        lim = self._eevdf_lag_limit(t)
        t.vlag = min(0, max(-lim, min(lim, v_avg - t.vruntime)))
        return v_avg - t.vruntime

    def _eevdf_pick(self, prev: Task | None) -> Task | None:
        """pick_next_entity / __pick_eevdf (kernel/sched/fair.c, 6.18): the running task keeps
        the CPU while it is eligible and inside its protected slice (RUN_TO_PARITY); otherwise
        the eligible entity (vruntime not above the load-weighted average) with the earliest
        virtual deadline runs. A delayed sleeper that would be picked leaves the tree instead
        and the pick is repeated. ``prev`` is the task that ran, back in the queue if runnable."""
        while True:
            ents = self._eevdf_entities()
            if not ents:
                return None
            if len(ents) == 1:
                best = ents[0]
            else:
                swv = load = 0
                for q in ents:
                    swv += q.vruntime * q.weight
                    load += q.weight
                best = None
                if (
                    prev is not None
                    and prev.state == RUNNABLE
                    and not prev.prio
                    and not prev.delayed
                    and prev.vruntime < prev.vprot
                    and prev.vruntime * load <= swv
                ):
                    best = prev
                else:
                    for q in ents:
                        if q.vruntime * load <= swv and (
                            best is None
                            or q.deadline < best.deadline
                            or (q.deadline == best.deadline and q._rq_seq < best._rq_seq)
                        ):
                            best = q
                if best is None:  # cannot happen with positive weights; the smallest vruntime is eligible
                    best = min(ents, key=lambda q: q.vruntime)
                if best.delayed:
                    self._eevdf_finish_delayed(best, swv // load)
                    continue
            assert best is not None
            if best.delayed:
                self._eevdf_finish_delayed(best, best.vruntime)
                continue
            best._rq_seq = 0
            self.nr_queued -= 1
            return best

    def eevdf_place(self, t: Task, fork: bool) -> None:
        """place_entity: a woken task keeps its lag (PLACE_LAG, scaled so that adding it to
        the average does not shrink it) and gets a deadline one slice on (half a slice for a
        new task, PLACE_DEADLINE_INITIAL); sleepers get no other credit."""
        ents = self._eevdf_entities()
        swv = load = 0
        for q in ents:
            swv += q.vruntime * q.weight
            load += q.weight
        c = self.curr
        if c is not None and not c.prio and c.state == RUNNABLE and c.on_cpu:
            swv += self.curr_vruntime() * c.weight
            load += c.weight
        lag = 0
        if load:
            avg = swv // load
            if t.vlag:
                lag = t.vlag * (load + t.weight) // load
        else:
            avg = self.update_min_vruntime()
        t.vruntime = avg - lag
        vslice = self.m.sched_slice * 1024 // t.weight
        t.deadline = t.vruntime + (vslice // 2 if fork else vslice)

    def eevdf_requeue_delayed(self, t: Task) -> None:
        """A delayed sleeper woken before it left the tree (ttwu_runnable, ENQUEUE_DELAYED):
        it keeps its place unless its lag has turned positive meanwhile, in which case
        DELAY_ZERO places it afresh with no lag (requeue_delayed_entity)."""
        self.delayed.remove(t)
        t.delayed = False
        ents = self._eevdf_entities()
        swv = t.vruntime * t.weight
        load = t.weight
        for q in ents:
            swv += q.vruntime * q.weight
            load += q.weight
        c = self.curr
        if c is not None and not c.prio and c.state == RUNNABLE and c.on_cpu:
            swv += self.curr_vruntime() * c.weight
            load += c.weight
        if swv // load - t.vruntime > 0:
            t.vlag = 0
            self.eevdf_place(t, False)

    def eevdf_wakeup_preempt(self, curr: Task, t: Task) -> bool:
        """check_preempt_wakeup_fair (kernel/sched/fair.c, 6.18) with ``t`` already queued:
        update_curr first (a used-up slice gets a new deadline; past its protected slice the
        task is rescheduled), then preempt only if __pick_eevdf would now pick ``t``: the
        running task is kept while it is eligible and protected, else the eligible entity with
        the earliest deadline wins (the running task on a strictly earlier deadline)."""
        v = self.curr_vruntime()
        if v >= curr.deadline:
            curr.deadline = v + self.m.sched_slice * 1024 // curr.weight
        if v >= curr.vprot:
            return True
        ents = self._eevdf_entities()
        swv = v * curr.weight
        load = curr.weight
        for q in ents:
            swv += q.vruntime * q.weight
            load += q.weight
        curr_ok = v * load <= swv
        if curr_ok:
            return False  # eligible and protected (RUN_TO_PARITY)
        best = None
        for q in ents:
            if q.vruntime * load <= swv and (
                best is None or q.deadline < best.deadline or (q.deadline == best.deadline and q._rq_seq < best._rq_seq)
            ):
                best = q
        return best is t

    def _schedule(self) -> None:
        """Pick the next task (__schedule): the previous one goes back to the queue if it is
        still runnable; an empty queue tries to pull work before going idle."""
        m = self.m
        now = self.env._now
        self.resched = False
        prev = self.curr
        eevdf = m.eevdf
        if eevdf and prev is not None and prev.state == T_BLOCKED and not prev.prio:
            self._eevdf_dequeue_sleeper(prev)
        if prev is not None and prev.state == RUNNABLE:
            if eevdf and not prev.prio and prev.vruntime >= prev.deadline:
                prev.deadline = prev.vruntime + m.sched_slice * 1024 // prev.weight  # update_deadline
            prev.on_cpu = False
            self._enqueue(prev)
        nxt = None
        rq = self.rq
        head = self._peek() if eevdf else None
        if eevdf and (head is None or not head.prio):
            nxt = self._eevdf_pick(prev)
        else:
            # _pop, inlined
            while rq:
                _, _, seq, q = heappop(rq)
                if seq == q._rq_seq and q.state == RUNNABLE and not q.on_cpu:
                    self.nr_queued -= 1
                    q._rq_seq = 0
                    nxt = q
                    break
        extra = 0
        if nxt is None:
            nxt = m._newidle_pull(self)
            if nxt is not None:
                extra = m.costs.balance
        if nxt is prev and prev is not None:
            prev.on_cpu = True
            self._dispatch_same(prev)
            return
        if prev is not None:
            prev.on_cpu = False
            prev.last_ran = now
            if prev.state == RUNNABLE:
                prev.nivcsw += 1
            elif prev.state == T_BLOCKED:
                prev.nvcsw += 1
        elif not self.tick_on:
            # Coming from idle, its interrupts handled. With a task to run the idle loop ends:
            # tick_nohz_idle_exit (kernel/time/tick-sched.c, tick_nohz_restart) restarts a stopped
            # tick forwarded to the first jiffy edge after now, so an edge that passed while the
            # CPU left the idle state and handled its wakeup brought no tick. Without one the
            # idle loop goes round and tick_nohz_idle_stop_tick asks again whether the tick may
            # stay stopped; the model asks at the next edge (_tick_event, nohz_veto_hooks).
            self._start_tick()
        for h in m.switch_hooks:
            h(self, prev, nxt)
        if nxt is None:
            self._set_state(IDLE)
            self.curr = None
            if prev is not None:
                self.blocked_since = now
                if m.wheel_pull:
                    m._tmigr_deactivate(self)
            if m.wheel_pull and self.jiffy_global:
                self._keep_next_jiffy_timers(now)
            for hook in m.idle_enter_hooks:
                hook(self)
            if self.irqs or self.softirq_pending or self.nr_queued:
                # an idle-entry hook found work (rcu_prepare_for_idle raising the softirq,
                # waking a kthread here): the CPU handles it before it really idles
                self._dispatch()
            return
        if m.tracer is None:  # _set_state(SWITCH) without a trace, inlined
            self.acc[self.state] += now - self.since
            self.state = SWITCH
            self.since = now
        else:
            self._set_state(SWITCH)
        self.curr = nxt
        nxt.on_cpu = True
        waited = now - nxt.wait_since
        nxt.wait_ns += waited
        # m.wake_latency.add(waited), inlined (see LogHistogram.pending; waited is an int)
        lat = m.wake_latency
        pending = lat.pending
        pending.append(waited)
        if len(pending) >= FLUSH:
            lat.flush()
        nxt.slice_exec = nxt.run_ns
        if eevdf:
            nxt.vprot = nxt.deadline  # set_protect_slice (RUN_TO_PARITY; every slice is the base slice)
        jit = m.jit_sched
        costs = m.costs
        # cost = jit.apply(costs.context_switch), inlined (see Jitter: the same draw)
        cost = costs.context_switch
        if cost > 0:
            try:
                cost = (cost * jit.pop()).__trunc__()
            except IndexError:
                jit.refill()
                cost = (costs.context_switch * jit.pop()).__trunc__()
            if cost <= 0:
                cost = 1
        cost += extra
        mm = nxt.mm
        if mm and mm != self.active_mm:
            # kernel/sched/core.c context_switch(): switch_mm_irqs_off only when next has an mm
            # and it is not the one the CPU is on (a kernel thread keeps the borrowed one)
            self.active_mm = mm
            ns = costs.mm_switch
            if ns > 0:  # cost += jit.apply(ns), inlined (apply draws nothing for 0)
                try:
                    v = (ns * jit.pop()).__trunc__()
                except IndexError:
                    jit.refill()
                    v = (ns * jit.pop()).__trunc__()
                cost += v if v > 0 else 1
            else:
                cost += ns  # apply(ns) is ns for ns <= 0
            asids = self.asids
            if mm not in asids:  # choose_new_asid: a new slot, need_flush
                asids[self.next_asid] = mm
                self.next_asid = (self.next_asid + 1) % TLB_NR_DYN_ASIDS
                ns = costs.asid_miss
                if ns > 0:  # cost += jit.apply(ns), inlined
                    try:
                        v = (ns * jit.pop()).__trunc__()
                    except IndexError:
                        jit.refill()
                        v = (ns * jit.pop()).__trunc__()
                    cost += v if v > 0 else 1
                else:
                    cost += ns
        index = self.index
        if nxt.ran_cpu != index:
            if nxt.ran_cpu >= 0:
                nxt.migrations += 1
                cost += jit.apply(costs.migration)
            nxt.ran_cpu = index
        nxt.cpu = index
        if eevdf and not nxt.prio:
            # exec_start is set when the task is picked (set_next_entity), so the switch itself
            # (switch_mm, switch_to, finish_task_switch) is charged to the next task's vruntime
            nxt.vruntime += cost * 1024 // nxt.weight
        self.switches += 1
        # self._after(cost, self._dispatch_b), inlined
        self.action = self._dispatch_b
        eid = next(self._eid)
        self.act_eid = eid
        heappush(self._queue, (now + cost, NORMAL, eid, self))

    def _dispatch_same(self, t: Task) -> None:
        # The previous task keeps the CPU (it was the best choice after all).
        self.curr = t
        self._dispatch_continue(t)

    def _dispatch_continue(self, t: Task) -> None:
        if self.irqs or self.softirq_pending:
            self._dispatch()
        else:
            self._advance(t)

    def _exit(self, t: Task) -> None:
        m = self.m
        t.state = DONE
        t.ended = self.env.now
        m.live -= 1
        del m.tasks[t.tid]
        for h in m.exit_hooks:
            h(self, t)
        waiters = t.exit_waiters
        t.exit_waiters = []
        for w in waiters:
            w.retval = t
            m.wake(w, self)
        self._schedule()

    # ------------------------------------------------------------------ the tick
    def _start_tick(self) -> None:
        if not self.tick_on:
            self.tick_on = True
            period = self.m.tick_ns
            self._arm_tick_at((self.env.now // period + 1) * period)

    def _arm_tick_at(self, at: int) -> None:
        """(Re)arm this CPU's next tick event; an earlier armed one wins, a superseded one is
        recognised by its generation when it fires."""
        if self.tick_at is not None and self.env.now < self.tick_at <= at:
            return
        self.tick_gen += 1
        self.tick_at = at
        heappush(self._queue, (at, NORMAL, next(self._eid), _Tick(self, self.tick_gen)))

    def _tick_event(self, gen: int) -> None:
        if gen != self.tick_gen:  # superseded
            return
        m = self.m
        now = self.env.now
        self.tick_at = None
        period = m.tick_ns
        due = self.jiffy_timers.pop(now // period, None) if self.jiffy_timers else None
        gdue = self.jiffy_global.pop(now // period, None) if self.jiffy_global else None
        if self.curr is None and m.kernel.nohz_idle and not any(h(self) for h in m.nohz_veto_hooks):
            # NO_HZ idle: no periodic tick; wake only for the next jiffy timer, if any. The tick
            # stays stopped while the idle task runs: also while the CPU leaves the idle state
            # and handles the interrupts that woke it; it restarts when a task is picked (_schedule)
            self.tick_on = False
            if gdue is not None:
                # a CPU that wakes for a pinned timer expires its global ones itself
                other = self._active_migrator() if due is None else None
                holder = m.tmigr_last if other is None and due is None else None
                if other is not None:
                    # tmigr_handle_remote(): the active CPU expires them in its timer softirq, at
                    # its own tick of this jiffy; the remote expiry adds no cost of its own here
                    # (the timers model prices the hierarchy walk, kernel.timers.tmigr_level)
                    pulled = gdue

                    def remote(c: CPU) -> int:
                        return CPU._run_jiffy_timers(c, pulled)

                    m.interrupt(other, 0, remote)
                elif holder is not None and holder is not self and holder.curr is None:
                    # every CPU idle, and another went idle last: it holds the hierarchy's first
                    # event and ticks for it; this CPU ticks too only if it was last itself when
                    # it went idle (its own tick was programmed then). The first to run its timer
                    # softirq expires them (Machine._tmigr_remote)
                    runner = m._tmigr_remote(holder, gdue, now // period)
                    if self.tmigr_wakeup:
                        due = [runner]
                else:
                    due = gdue if due is None else due + gdue
            if self.jiffy_timers or self.jiffy_global:
                self._arm_tick_at(min((*self.jiffy_timers, *self.jiffy_global)) * period)
            if due is None:
                return
        else:
            if gdue is not None:
                due = gdue if due is None else due + gdue
            self.tick_on = True
            self._arm_tick_at(now + period)
        self.raise_irq(m.tick_cost(self.index, now // period), self._tick_fn if due is None else lambda c: self._tick_due(c, due))

    def _tick_due(self, cpu: CPU, due: list[Callable[[CPU], int | None]]) -> int:
        return self._tick_fn(cpu) + CPU._run_jiffy_timers(cpu, due)

    @staticmethod
    def _run_jiffy_timers(cpu: CPU, due: list[Callable[[CPU], int | None]]) -> int:
        extra = 0
        for fn in due:
            r = fn(cpu)
            if r:
                extra += r
        return extra

    def _keep_next_jiffy_timers(self, now: int) -> None:
        """On the way into idle a CPU asks for its next timer event; when the first is due by the next
        jiffy the timer base does not go idle and the timer-migration hierarchy is not asked
        (kernel/time/timer.c __get_next_timer_interrupt: idle_is_possible = time_after(nextevt,
        basej + 1)), so the CPU programs its tick for that jiffy and expires those timers itself:
        they are pulled no more. So an idle CPU that wakes for anything in the jiffy before its
        global timer is due wakes again for it, with a tick."""
        j1 = now // self.m.tick_ns + 1
        for j in [j for j in self.jiffy_global if j <= j1]:
            self.jiffy_timers.setdefault(j, []).extend(self.jiffy_global.pop(j))

    def _active_migrator(self) -> CPU | None:
        """The CPU that expires this idle CPU's non-pinned timers under the pull model: an
        active one, i.e. running a task, the lowest-numbered; the hierarchy's groups are not
        modelled (kernel/time/timer_migration.c). An idle CPU is inactive in the hierarchy from
        its way into idle (tmigr_cpu_deactivate), also while it handles an interrupt and while
        the model has not yet stopped its tick (it stops it at the next edge, the kernel on the
        way into idle); it becomes active again when it leaves the idle loop for a task."""
        for c in self.m.cpus:
            if c is not self and c.curr is not None:
                return c
        return None

    def cancel_jiffy_timer(self, expires: int, fn: Callable[[CPU], int | None]) -> None:
        """Delete the timer ``fn`` armed for jiffy ``expires`` (del_timer); with no other work an
        idle CPU then sleeps through that tick."""
        if self.m.wheel_round:  # stored under its bucket's expiry: look it up by identity
            for timers in (self.jiffy_timers, self.jiffy_global):
                for j, armed in timers.items():
                    if fn in armed:
                        armed.remove(fn)
                        if not armed:
                            del timers[j]
                        return
            return
        fns = self.jiffy_timers.get(expires)
        if fns and fn in fns:
            fns.remove(fn)
            if not fns:
                del self.jiffy_timers[expires]

    def add_jiffy_timer(self, expires: int, fn: Callable[[CPU], int | None], pinned: bool = False) -> None:
        """A timer-wheel timer on this CPU armed for jiffy ``expires`` (schedule_timeout and
        friends): ``fn(cpu)`` runs in a tick's interrupt. With ``kernel.timer_wheel = "classic"``
        that is the tick of jiffy ``expires``; from "v4.8" the tick of its bucket's expiry
        (calc_index: one granularity unit later, never early). An idle CPU with its tick stopped
        is woken for it, as NO_HZ programs the next timer event, except under "v6.9" for a timer
        that is not ``pinned`` while another CPU is active: that CPU runs it (the pull model)."""
        m = self.m
        period = m.tick_ns
        now_j = self.env.now // period
        if m.wheel_round:
            expires = calc_wheel_index(expires, now_j, m.wheel_depth)[1]
        if expires <= now_j:
            expires = now_j + 1
        if m.wheel_pull and not pinned:
            self.jiffy_global.setdefault(expires, []).append(fn)
        else:
            self.jiffy_timers.setdefault(expires, []).append(fn)
        self._arm_tick_at(expires * period)

    def _tick_fn(self, cpu: CPU) -> int:
        m = self.m
        self.ticks += 1
        self.tick_count += 1
        tracer = m.tracer
        if tracer is not None:
            tracer.instant(self.tid, "tick", self.env.now)
        for h in m.tick_hooks:
            h(self)
        t = self.curr
        if t is not None and not t.prio and self.nr_queued:
            # check_preempt_tick: the task used up its ideal slice of the period
            nr = self.nr_queued + 1
            period = max(m.sched_latency, nr * m.sched_min_granularity)
            ran = t.run_ns - t.slice_exec
            head = self._peek()
            if m.eevdf:
                # update_curr: update_deadline gives a used-up slice a new deadline, and the task
                # is rescheduled once it has run past its protected slice (!protect_slice)
                v = self.curr_vruntime()
                if v >= t.deadline:
                    t.deadline = v + m.sched_slice * 1024 // t.weight
                if head is not None and (head.prio or v >= t.vprot):
                    self.need_resched = True
            elif head is not None and (head.prio or ran > period // nr):
                self.need_resched = True
            elif head is not None and ran > m.sched_min_granularity and t.vruntime - head.vruntime > period // nr:
                self.need_resched = True
        if m.wake_affine_weight:
            # PELT (kernel/sched/pelt.c) halves a load's weight every 32 ms; sampled at the tick here
            self.load_avg = (self.load_avg * m.pelt_y + m._cpu_load(self) * (1024 - m.pelt_y)) >> 10
        elif m.cpu_load_2624:
            # scheduler_tick -> update_cpu_load (2.6.24 kernel/sched.c): the run queue's weight
            # now, after the tick hooks (run_local_timers, which under -rt has already woken the
            # softirq thread: update_process_times calls it first), decayed into cpu_load[i]
            # with a factor (2^i - 1) / 2^i, rounded up while the load grows
            w = m._rq_weight_2624(self)[0]
            loads = self.cpu_load
            scale = 1
            for i in range(CPU_LOAD_IDX_MAX):
                old = loads[i]
                new = w + scale - 1 if w > old else w
                loads[i] = (old * (scale - 1) + new) >> i
                scale += scale
        if m.nohz_stats and t is not None and self.env.now // m.tick_ns > m.nohz_next_blocked:
            m._nohz_stats_kick(self)
        if m.lb_2624:
            # scheduler_tick: rq->idle_at_tick, then trigger_load_balance
            self.idle_at_tick = self.curr is None
            return m._trigger_load_balance_2624(self)
        extra = 0
        if self.curr is not None and self.nr_queued:
            extra = m._busy_balance(self)
        if self.tick_count % m.balance_ticks == 0:
            extra += m._periodic_pull(self)
        return extra


class Machine:
    """A machine of ``config.cpus`` CPUs running one kernel configuration.

    Models extend it through explicit registration, never by patching: op handlers
    (:meth:`handle`), softirq vectors (:meth:`register_softirq`) and hook lists called on the
    tick, on every context switch, on idle entry/exit and on task exit.
    """

    # set by sim.scenario.build: the validated scenario and the installed models, by name
    scenario: Any
    models: dict[str, Any]

    def __init__(
        self,
        env: Env,
        config: MachineConfig,
        kernel: KernelConfig,
        costs: Costs,
        streams: Streams,
        tracer: Tracer | None = None,
    ) -> None:
        if not isinstance(env, Env):
            raise TypeError(
                "a Machine needs a sim.machine.Env (its timed actions are Env heap entries), not a plain simpy.Environment"
            )
        self.env = env
        self.config = config
        self.kernel = kernel
        self.costs = costs
        self.streams = streams
        self.tracer = tracer
        # Machine.events: the event ids taken from here on that were not SimPy events
        self._eid0 = env.next_eid()
        self._simpy0 = env.simpy_scheduled
        self.seq = 0
        self.next_tid = 1
        self.next_mm = 0  # the last address-space id handed out (Task.mm)
        self.live = 0
        # the live tasks by tid, in spawn order; an exited task leaves (a fork-heavy run such as
        # netns-2014 spawns thousands of processes, whose tasks and finished scripts it would
        # otherwise keep to the end: benchmarks/memory.py)
        self.tasks: dict[int, Task] = {}
        self.preempt_full = kernel.preempt == "full"
        self.wake_affine_waker = kernel.wake_affine == "waker"
        self.wake_affine_weight = kernel.wake_affine in ("weight", "pack")
        self.wake_affine_pack = kernel.wake_affine == "pack"
        self.wake_affine_2624 = kernel.wake_affine == "2.6.24"
        self.lb_2624 = kernel.load_balance == "2.6.24"
        self.cpu_load_2624 = self.wake_affine_2624 or self.lb_2624
        self.fork_2624 = kernel.fork_balance == "2.6.24"
        # 2.6.24 NO_HZ idle load balancing (kernel/sched.c select_nohz_load_balancer): the CPUs
        # in nohz.cpu_mask (index -> their switch count when they entered it: a CPU that has run
        # a task since has left it) and the idle load balancer, or -1
        self.nohz_mask: dict[int, int] = {}
        self.nohz_ilb = -1
        self.fork_pack = kernel.fork_balance == "pack"
        # PELT decay per tick, 1024ths: y^32 = 1/2 with a 1 ms period (LOAD_AVG_PERIOD)
        self.pelt_y = round(1024 * 0.5 ** (1 / (kernel.hz * 0.032)))
        self.tick_ns = max(1, 1_000_000_000 // kernel.hz)
        # kernel.timer_wheel: jiffy timers rounded up to their bucket (4.8+) and pulled (6.9+)
        self.wheel_round = kernel.timer_wheel != "classic"
        self.wheel_pull = kernel.timer_wheel == "v6.9"
        self.tmigr_last: CPU | None = None  # the CPU that went idle last while no other ran a task
        self.wheel_depth = lvl_depth(kernel.hz)
        # kernel.nohz_stats_kick: the blocked-load update kick, every LOAD_AVG_PERIOD (32 ms) in jiffies,
        # while an idle CPU's PELT load has not decayed (LOAD_AVG_MAX_N = 345 periods of 1024 us)
        self.nohz_stats = kernel.nohz_stats_kick and kernel.nohz_idle
        self.nohz_next_blocked = 0
        self.stats_period_j = max(1, -(-32 * kernel.hz // 1000))  # msecs_to_jiffies(LOAD_AVG_PERIOD)
        self.blocked_ns = 345 * 1024 * 1000
        # periodic load_balance of a CPU-level domain: every sd_weight ms (balance_interval)
        self.balance_ticks = max(1, config.cpus * kernel.hz // 1000)
        factor = 1 + (min(config.cpus, 8).bit_length() - 1)  # 1 + ilog2(min(ncpus, 8))
        self.sched_latency = kernel.sched_latency * factor
        self.sched_min_granularity = kernel.sched_min_granularity * factor
        self.sched_wakeup_granularity = kernel.sched_wakeup_granularity * factor
        self.sleeper_credit = self.sched_latency // 2 if kernel.gentle_fair_sleepers else self.sched_latency
        # kernel.sched = "eevdf" (6.6+): wakeup preemption and slices of EEVDF (_eevdf_wakeup_preempt)
        self.eevdf = kernel.sched == "eevdf"
        self.sched_slice = kernel.sched_base_slice * factor
        if self.eevdf:
            self.sleeper_credit = 0  # place_entity gives no sleeper credit (its lag is not modelled)
        self.jit_sched = streams.jitter("sched", costs.jitter_cv)
        # wakeup-to-run latency of every task switch-in (the "scheduling latency")
        self.wake_latency = LogHistogram()
        # the op handlers; CpuWork's entry marks the engine's own op (Env._loop runs it inline)
        self.handlers: dict[type, Handler] = {CpuWork: run_cpuwork}
        env.handlers = self.handlers
        self.softirq_handlers: dict[int, SoftirqHandler] = {}
        self.softirq_names: dict[int, str] = {}
        self.tick_hooks: list[Callable[[CPU], None]] = []
        self.switch_hooks: list[Callable[[CPU, Task | None, Task | None], None]] = []
        self.idle_enter_hooks: list[Callable[[CPU], None]] = []
        self.idle_exit_hooks: list[Callable[[CPU], None]] = []
        # any hook returning True keeps the tick of an idle CPU running (rcu_needs_cpu & co.)
        self.nohz_veto_hooks: list[Callable[[CPU], bool]] = []
        self.exit_hooks: list[Callable[[CPU, Task], None]] = []
        self.idle_exit_latency: Callable[[CPU], int] = self._default_idle_exit
        self._jit_idle = streams.jitter("idle", costs.jitter_cv)
        # Costs.tick_busy: one measured jiffy of tick durations (a value per CPU) per simulated
        # jiffy, drawn from its own stream so a run without the table draws exactly as before
        self.tick_busy: tuple[tuple[int, ...], ...] | None = costs.tick_busy or None
        self._tick_gen = streams.get("tick") if costs.tick_busy else None
        self._tick_jiffy = -1
        self._tick_row: tuple[int, ...] = ()
        if self.lb_2624 and kernel.nohz_idle:
            self.nohz_veto_hooks.append(self._nohz_stop_2624)
        self.cpus = [CPU(self, i) for i in range(config.cpus)]
        # Costs.other_gaps: unmodelled interruptions, Poisson per CPU, from their own stream
        if costs.other_gaps_per_s and costs.other_gaps:
            self._gap_gen = streams.get("other_gaps")
            self._gap_mean = 1e9 / costs.other_gaps_per_s
            for c in self.cpus:
                self.call_at(self.poisson_delay(self._gap_gen, self._gap_mean), self._other_gap, c)
        # Costs.idle_timers_per_s: an idle CPU's own timers, Poisson per CPU, from their own stream
        if costs.idle_timers_per_s:
            self._own_timer_gen = streams.get("idle_timers")
            self._own_timer_mean = 1e9 / costs.idle_timers_per_s
            for c in self.cpus:
                self.call_at(self.poisson_delay(self._own_timer_gen, self._own_timer_mean), self._own_timer, c)
        if costs.idle_hrtimers_per_s:
            self._own_hr_gen = streams.get("idle_hrtimers")
            self._own_hr_mean = 1e9 / costs.idle_hrtimers_per_s
            for c in self.cpus:
                self.call_at(self.poisson_delay(self._own_hr_gen, self._own_hr_mean), self._own_hrtimer, c)
        if self.lb_2624 and kernel.nohz_idle:
            # every CPU starts idle with its tick stopped (the machine has just booted): all in
            # nohz.cpu_mask, so nobody is the idle load balancer until a CPU gets busy
            for c in self.cpus:
                self.nohz_mask[c.index] = 0
                c.nohz_recent = True
        n = config.cpus
        # for each CPU, the others in the order a search starting after it visits them
        self._others = [tuple(self.cpus[(i + k) % n] for k in range(1, n)) for i in range(n)]
        if tracer is not None:
            for c in self.cpus:
                c.tid = tracer.track(f"CPU {c.index}", pid=1, sort=c.index)
        self.done = env.event()
        from .channel import install_channel_ops

        # a Channel's commit of a send: (unpaged, paged), set by install_channel_ops
        self.channel_commit: tuple[Callable[[CPU, Task], int], Callable[[CPU, Task], int]]

        self.handle(Syscall, self._h_syscall)
        self.handle(Sleep, self._h_sleep)
        self.handle(Spawn, self._h_spawn)
        self.handle(WaitChild, self._h_waitchild)
        self.handle(Yield, self._h_yield)
        self.handle(Call, self._h_call)
        install_channel_ops(self)
        if costs.idle_task_wakeups_per_s:
            self.call_at(0, self._spawn_idle_task)
        if not kernel.nohz_idle:
            for c in self.cpus:
                c._start_tick()

    # ------------------------------------------------------------------ registration
    def handle(self, op_type: type, handler: Handler) -> None:
        """Install the handler for an op class (a model's primitive)."""
        if not (isinstance(op_type, type) and issubclass(op_type, Op)):
            raise TypeError(f"{op_type!r} is not an Op class")
        if op_type is CpuWork:
            raise TypeError("CpuWork is the engine's own op; it takes no handler")
        self.handlers[op_type] = handler

    def register_softirq(self, vec: int, name: str, handler: SoftirqHandler) -> None:
        """Register softirq vector ``vec`` (lower runs first, as in kernel/softirq.c).
        ``handler(cpu)`` returns ``(cost_ns, done)``; ``done(cpu)`` runs when the cost has
        elapsed and may raise the softirq again if work remains."""
        if vec in self.softirq_handlers:
            raise ValueError(f"softirq {vec} already registered as {self.softirq_names[vec]}")
        self.softirq_handlers[vec] = handler
        self.softirq_names[vec] = name

    def jitter(self, name: str) -> Jitter:
        """A cost-jitter source on its own random stream."""
        return self.streams.jitter(name, self.costs.jitter_cv)

    @property
    def events(self) -> int:
        """Timed events the machine scheduled: its CPUs' actions and ticks, interrupts on their
        way and :meth:`call_at` callbacks. Each took one event id from the environment's
        counter, as every SimPy event does (:meth:`Env.schedule` counts those), so this is the
        ids taken since the machine was built less the SimPy events among them (one machine per
        environment, as everywhere in rcusim)."""
        env = self.env
        return (env.next_eid() - self._eid0) - (env.simpy_scheduled - self._simpy0)

    # ------------------------------------------------------------------ time
    @property
    def now(self) -> int:
        return self.env.now

    def call_at(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn(*args)`` after ``delay`` ns (a bare timed callback: one heap entry, ordered
        among all events as a SimPy timeout made now would be)."""
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        env = self.env
        queue: list[Any] = env._queue  # type: ignore[assignment]
        heappush(queue, (env._now + delay, NORMAL, next(env._eid), _Call(fn, args)))

    def interrupt(self, cpu: CPU, cost: int, fn: IrqFn | None = None, delay: int = 0) -> None:
        """Deliver an interrupt to ``cpu`` after ``delay``: ``fn(cpu)`` runs at its arrival and
        the CPU spends ``cost`` (+ what fn returns) in hard-irq context."""
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        heappush(cpu._queue, (self.env._now + delay, NORMAL, next(cpu._eid), _Irq(cpu, cost, fn)))

    def send_ipi(self, src: CPU | None, dst: CPU, fn: IrqFn | None = None, name: str = "ipi") -> None:
        """An inter-processor interrupt from ``src`` to ``dst`` (arrives after ipi_latency)."""
        dst.ipis += 1
        tracer = self.tracer
        if tracer is not None:
            tracer.instant(dst.tid, name, self.env.now, args={"from": src.index if src else -1})
        self.interrupt(dst, self.jit_sched.apply(self.costs.ipi_handler), fn, self.jit_sched.apply(self.costs.ipi_latency))

    def _spawn_idle_task(self) -> None:
        """:attr:`Costs.idle_task_wakeups_per_s`: the machine's other processes as one task that
        sleeps for Poisson gaps (an hrtimer on the CPU it sleeps on) and runs
        :attr:`Costs.idle_task_work` when it wakes. It starts on a CPU drawn from its own
        stream (made there, then free to run anywhere, as after a sched_setaffinity); after that
        the model's wakeup placement moves it."""
        gen = self.streams.get("idle_task")
        mean = 1e9 / self.costs.idle_task_wakeups_per_s
        work = CpuWork(self.costs.idle_task_work) if self.costs.idle_task_work else None
        start = int(gen.integers(len(self.cpus)))

        def script(task: Task) -> Script:
            task.affinity = None
            while True:
                yield Sleep(self.poisson_delay(gen, mean))
                if work is not None:
                    yield work

        self.spawn(script, "other-processes", affinity=[start])

    def _tmigr_deactivate(self, cpu: CPU) -> None:
        """``cpu`` goes idle after running a task (tmigr_cpu_deactivate, kernel/time/timer_migration.c).
        If no other CPU runs a task it is the last one to go idle: the hierarchy hands it the first
        global timer event of every idle CPU (``tmc->wakeup``), its own tick is programmed for it,
        and it will expire the others' timers remotely (tmigr_handle_remote: an idle CPU with a
        wakeup handles a group that has no migrator). Otherwise an active CPU is the migrator and
        this one programs no tick for its global timers. The hierarchy's levels are not modelled."""
        last = not any(c.curr is not None for c in self.cpus if c is not cpu)
        cpu.tmigr_wakeup = last
        if last:
            self.tmigr_last = cpu

    def _tmigr_remote(self, holder: CPU, batch: list[Callable[[CPU], int | None]], jiffy: int) -> Callable[[CPU], int]:
        """The global timers ``batch`` of an idle CPU come due while every CPU is idle and
        ``holder`` went idle last: ``holder`` wakes with a tick for them (its tick from idle, in
        this jiffy's tick if it has one anyway) and expires them in its timer softirq
        (tmigr_handle_remote); the owner, if its own tick was programmed for them, runs its global
        base in its softirq too. Whichever gets there first expires them: the returned runner,
        shared by both, runs them once."""
        pending: list[list[Callable[[CPU], int | None]]] = [batch]

        def runner(c: CPU) -> int:
            if not pending:
                return 0  # the other CPU got there first
            return CPU._run_jiffy_timers(c, pending.pop())

        own = holder.jiffy_timers.get(jiffy)
        if own is not None and holder.tick_at == jiffy * self.tick_ns:
            own.append(runner)  # its tick of this jiffy has yet to fire
        else:
            self.interrupt(holder, self.tick_cost(holder.index, jiffy), lambda c: c._tick_fn(c) + runner(c))
        return runner

    @staticmethod
    def poisson_delay(gen: np.random.Generator, mean: float) -> int:
        """The delay to the next of Poisson arrivals with ``mean`` ns between them, at least 1 ns."""
        return max(1, int(gen.exponential(mean)))

    def _other_gap(self, cpu: CPU) -> None:
        """One of :attr:`Costs.other_gaps` arrives at ``cpu``: a busy CPU is away for a measured gap
        (in the model an interrupt with no handler); an idle one, halted, does not notice."""
        gaps = self.costs.other_gaps
        gap = gaps[int(self._gap_gen.integers(len(gaps)))]
        if cpu.state != IDLE and gap > 0:
            cpu.raise_irq(gap, None)
        self.call_at(self.poisson_delay(self._gap_gen, self._gap_mean), self._other_gap, cpu)

    def _own_timer(self, cpu: CPU) -> None:
        """One of :attr:`Costs.idle_timers_per_s` comes due on ``cpu``: a pinned timer for the next
        jiffy, so an idle CPU with its tick stopped wakes for that tick (NO_HZ programs the next
        timer event) and a busy one runs it in the tick it has anyway. Its callback costs nothing
        here: the wakeup and the tick are what the model prices."""
        cpu.add_jiffy_timer(self.env.now // self.tick_ns + 1, _no_work, pinned=True)
        self.call_at(self.poisson_delay(self._own_timer_gen, self._own_timer_mean), self._own_timer, cpu)

    def _own_hrtimer(self, cpu: CPU) -> None:
        """One of :attr:`Costs.idle_hrtimers_per_s` on ``cpu``: an idle CPU leaves idle for an
        hrtimer interrupt and goes back (no tick); a busy one's are among its measured gaps."""
        if cpu.state == IDLE:
            cpu.raise_irq(self.jit_sched.apply(self.costs.timer_irq), None)
        self.call_at(self.poisson_delay(self._own_hr_gen, self._own_hr_mean), self._own_hrtimer, cpu)

    def tick_cost(self, cpu: int, jiffy: int) -> int:
        """One tick handler's duration on CPU ``cpu`` in ``jiffy``: :attr:`Costs.tick` with jitter,
        or the measured table's (:meth:`tick_busy_cost`)."""
        return self.jit_sched.apply(self.costs.tick) if self.tick_busy is None else self.tick_busy_cost(cpu, jiffy)

    def tick_busy_cost(self, cpu: int, jiffy: int) -> int:
        """The tick handler's duration on CPU ``cpu`` in ``jiffy`` from :attr:`Costs.tick_busy`:
        the first tick of a jiffy draws one measured jiffy (a duration per CPU), the jiffy's other
        ticks read the same one, so the CPUs' ticks keep the measured relation to each other
        (kernel/time/tick-sched.c starts every CPU's tick at the same jiffy edge unless
        skew_tick is set; how long each one runs differs by CPU and by jiffy)."""
        if jiffy != self._tick_jiffy:
            table = self.tick_busy
            assert table is not None and self._tick_gen is not None
            self._tick_jiffy = jiffy
            self._tick_row = table[int(self._tick_gen.integers(len(table)))]
        row = self._tick_row
        return max(1, row[cpu % len(row)])

    def _default_idle_exit(self, cpu: CPU) -> int:
        return self._jit_idle.apply(self.costs.idle_exit)

    # ------------------------------------------------------------------ tasks
    def spawn(
        self,
        script: ScriptFactory,
        name: str,
        policy: str = "other",
        prio: int = 0,
        affinity: Iterable[int] | None = None,
        kthread: bool = False,
        parent: Task | None = None,
        from_cpu: CPU | None = None,
        thread_of: Task | None = None,
    ) -> Task:
        """Create a task running ``script(task)`` and make it runnable now. Its address space:
        none for a kernel thread, ``thread_of``'s for a thread of that task's process
        (clone(CLONE_VM)), else a new one (a process)."""
        aff = None if affinity is None else tuple(sorted(set(affinity)))
        if aff is not None:
            bad = [c for c in aff if not 0 <= c < len(self.cpus)]
            if bad or not aff:
                raise ScenarioError(f"task {name!r}: affinity {list(aff)} names no CPU of this {len(self.cpus)}-CPU machine")
        if kthread:
            mm = 0
        elif thread_of is not None:
            mm = thread_of.mm
        else:
            self.next_mm += 1
            mm = self.next_mm
        t = Task(self.next_tid, name, None, policy, prio, aff, kthread, parent, mm)  # type: ignore[arg-type]
        self.next_tid += 1
        t.script = script(t)
        t.started = self.env.now
        t.load_avg = t.weight  # init_entity_runnable_average: a new task counts as fully loaded
        t.load_t = t.started
        t.state = T_BLOCKED
        self.tasks[t.tid] = t
        self.live += 1
        target = self._select_fork_cpu(t, from_cpu)
        t.cpu = target.index
        t.vruntime = target.update_min_vruntime()
        first = self.fork_2624 and target is from_cpu and not t.prio
        if first:
            par = target.curr
            if par is not None and par.state == RUNNABLE and not par.prio:
                # task_new_fair (2.6.24 kernel/sched_fair.c), sysctl_sched_child_runs_first: the
                # child takes the parent's vruntime if that is the smaller
                pv = target.curr_vruntime()
                if pv < t.vruntime:
                    par.vruntime, t.vruntime = par.vruntime + t.vruntime - pv, pv
        self.wake(t, from_cpu, fork=True)
        if first:
            target.need_resched = True  # task_new_fair: resched_task(rq->curr)
        return t

    def wake(self, t: Task, waker: CPU | None, fork: bool = False, sync: bool = False) -> int:
        """Make a blocked task runnable (try_to_wake_up); returns the cost to the waker.
        Waking a task that is not blocked does nothing and costs nothing. ``sync`` is WF_SYNC
        (a pipe's wake_up_interruptible_sync_poll): the waker is about to sleep or yield, which
        ``wake_affine = "weight"`` takes into account."""
        if t.state != T_BLOCKED:
            return 0
        t.state = RUNNABLE
        t.wakeups += 1
        if self.wake_affine_weight:
            self._pelt_wakeup(t)
        cpus = self.cpus
        eevdf_cost = -1
        requeued = t.delayed
        if requeued:  # eevdf: still in its CPU's tree (DELAY_DEQUEUE); ttwu_runnable keeps it there
            target = cpus[t.cpu]
            target.eevdf_requeue_delayed(t)
        else:
            target = cpus[t.cpu] if fork else self._select_cpu(t, waker, sync)
        if t.prio or requeued:
            pass
        elif self.eevdf:
            if waker is not None:
                wt = waker.curr
                if wt is not None and wt is not t and not wt.prio and wt.on_cpu:
                    # try_to_wake_up runs select_task_rq and takes the run queue's lock before
                    # it enqueues the wakee (update_curr, place_entity): the waker's wakeup work
                    # is in its vruntime when the wakee is placed, not after
                    pre = self.jit_sched.apply(self.costs.wakeup)
                    wt.vruntime += pre * 1024 // wt.weight
                    wt.vcredit += pre
                    wt.update_vplain()
                    eevdf_cost = pre
            if not (target.curr is t and t.on_cpu):
                target.eevdf_place(t, fork)
        else:
            old = cpus[t.cpu] if t.cpu >= 0 else target
            tmin = target.update_min_vruntime()
            if old is not target:
                t.vruntime += tmin - old.update_min_vruntime()
            floor = tmin - self.sleeper_credit  # place_entity (GENTLE_FAIR_SLEEPERS: half the latency)
            if t.vruntime < floor:
                t.vruntime = floor
        # target._enqueue(t), inlined
        self.seq += 1
        seq = self.seq
        t._rq_seq = seq
        t.cpu = target.index
        t.wait_since = self.env._now
        heappush(target.rq, (0, -t.prio, seq, t) if t.prio else (1, t.vruntime, seq, t))
        target.nr_queued += 1
        tracer = self.tracer
        if tracer is not None:
            tracer.instant(target.tid, f"wakeup {t.name}", self.env.now)
        sent = self._check_preempt(target, t, waker)
        if waker is None:
            return 0
        jit = self.jit_sched
        costs = self.costs
        if eevdf_cost >= 0:
            cost = eevdf_cost
        else:
            # cost = jit.apply(costs.wakeup), inlined (see Jitter: the same draw)
            cost = costs.wakeup
            if cost > 0:
                try:
                    cost = (cost * jit.pop()).__trunc__()
                except IndexError:
                    jit.refill()
                    cost = (costs.wakeup * jit.pop()).__trunc__()
                if cost <= 0:
                    cost = 1
        if sent:
            cost += jit.apply(costs.ipi_send)  # the waker sends the IPI
        return cost

    def _check_preempt(self, target: CPU, t: Task, waker: CPU | None) -> bool:
        """Wakeup preemption (check_preempt_curr); True when an IPI was sent to ``target``."""
        curr = target.curr
        if curr is None:
            if target is waker:
                return False  # the waker's own CPU picks it up when it next schedules
            if target.state == IDLE and not target.kick_pending:
                target.kick_pending = True
                self.send_ipi(waker, target, self._kick_done, name="wake ipi")
                return True
            return False
        if t.prio > curr.prio:
            preempt = True
        elif t.prio < curr.prio or t.prio:
            preempt = False
        elif self.eevdf:
            preempt = target.eevdf_wakeup_preempt(curr, t)
        else:
            # target.curr_vruntime() (curr is not None), inlined
            v = curr.vruntime
            if target.act_eid >= 0 and target.action is None:  # target.seg_active
                e = self.env._now - target.seg_start
                if curr.vcredit:
                    e = max(0, e - curr.vcredit)
                v += e * 1024 // curr.weight
            preempt = v - t.vruntime > self.sched_wakeup_granularity
        if preempt:
            target.resched = target.attn = True  # target.need_resched = True
            if target is not waker and not target.resched_pending:
                target.resched_pending = True
                self.send_ipi(waker, target, self._resched_done, name="resched ipi")
                return True
        return False

    def _nohz_stats_kick(self, cpu: CPU) -> None:
        """nohz_balancer_kick with NOHZ_STATS_KICK, at the tick of busy ``cpu`` once the last
        update is LOAD_AVG_PERIOD old: while an idle CPU in NO_HZ still has blocked load, the first
        idle one gets an IPI and updates every idle CPU's averages in its SCHED softirq
        (kernel/sched/fair.c kick_ilb, find_new_ilb, _nohz_idle_balance). Without blocked load
        left (nohz.has_blocked clear) nobody is kicked."""
        now = self.env.now
        # nohz.idle_cpus_mask: the idle CPUs (the model stops an idle CPU's tick at the next edge,
        # the kernel on the way into idle, where nohz_balance_enter_idle adds it to the mask)
        idle = [c for c in self.cpus if c.state == IDLE and c.curr is None]
        if not idle or not any(c.blocked_since >= 0 and now - c.blocked_since < self.blocked_ns for c in idle):
            return
        target = idle[0]
        self.nohz_next_blocked = now // self.tick_ns + self.stats_period_j
        if not target.kick_pending:
            target.kick_pending = True
            self.send_ipi(cpu, target, self._stats_kick_done, name="nohz stats kick")

    def _stats_kick_done(self, cpu: CPU) -> int:
        cpu.kick_pending = False
        return self.costs.softirq_entry  # the SCHED softirq's pass over the idle CPUs' averages

    @staticmethod
    def _kick_done(cpu: CPU) -> int:
        cpu.kick_pending = False
        return 0

    @staticmethod
    def _nohz_kick_done(cpu: CPU) -> int:
        cpu.kick_pending = False
        cpu.nohz_balance = True
        return 0

    @staticmethod
    def _resched_done(cpu: CPU) -> int:
        cpu.resched_pending = False
        return 0

    def _select_fork_cpu(self, t: Task, from_cpu: CPU | None) -> CPU:
        """sched_balance_find_dst_cpu for SD_BALANCE_FORK: the idlest allowed CPU, starting at the
        parent's. ``fork_balance = "pack"`` first keeps the child on its parent's CPU when the
        parent runs alone there (the collector's ``wake_placement`` series ``fork``; not mainline)."""
        if self.fork_2624 and from_cpu is not None and t.allowed(from_cpu.index):
            return from_cpu
        if (
            self.fork_pack
            and from_cpu is not None
            and from_cpu.curr is not None
            and from_cpu.nr_queued == 0
            and t.allowed(from_cpu.index)
        ):
            return from_cpu
        n = len(self.cpus)
        start = from_cpu.index if from_cpu is not None else 0
        best = None
        for k in range(n):
            c = self.cpus[(start + k) % n]
            if not t.allowed(c.index):
                continue
            if best is None or c.nr_running < best.nr_running:
                best = c
                if c.nr_running == 0:
                    break
        assert best is not None
        return best

    def _select_cpu(self, t: Task, waker: CPU | None, sync: bool = False) -> CPU:
        cpus = self.cpus
        n = len(cpus)
        prev = cpus[t.cpu] if t.cpu >= 0 else (waker or cpus[0])
        aff = t.affinity
        if aff is not None:
            if len(aff) == 1:
                return cpus[aff[0]]
            if prev.index not in aff:  # not t.allowed(prev.index)
                prev = cpus[aff[0]]
        if t.prio:
            # select_task_rq_rt: stay if the previous CPU runs something of lower priority
            pc = prev.curr
            if prev.idle or (pc is not None and pc.prio < t.prio and prev.nr_queued == 0):
                return prev
            best, best_prio = prev, 1000
            for k in range(n):
                c = cpus[(prev.index + k) % n]
                if not t.allowed(c.index):
                    continue
                if c.idle:
                    return c
                cp = c.curr.prio if c.curr is not None else -1
                if cp < t.prio and cp < best_prio:
                    best, best_prio = c, cp
            return best
        if self.wake_affine_weight:
            return self._select_cpu_weight(t, prev, waker, sync)
        if self.wake_affine_2624:
            return self._select_cpu_2624(t, prev, waker, sync)
        if (
            self.wake_affine_waker
            and waker is not None
            and (aff is None or waker.index in aff)
            and waker.nr_queued + (waker.curr is not None) <= prev.nr_queued + (prev.curr is not None)
        ):
            prev = waker  # 3.x wake_affine: pull the wakee to the (no busier) waking CPU
        if prev.curr is None and prev.nr_queued == 0:  # prev.idle
            return prev
        for c in self._others[prev.index]:
            if c.curr is None and c.nr_queued == 0 and (aff is None or c.index in aff):
                return c
        if waker is not None and waker is not prev and (aff is None or waker.index in aff):
            if waker.nr_queued + (waker.curr is not None) < prev.nr_queued + (prev.curr is not None):
                return waker
        return prev

    def _select_cpu_2624(self, t: Task, prev: CPU, waker: CPU | None, sync: bool) -> CPU:
        """try_to_wake_up of 2.6.24 for a fair task (kernel/sched.c; the sched-domain values of
        include/linux/topology.h SD_MC_INIT: wake_idx 1, imbalance_pct 125, SD_WAKE_AFFINE and
        SD_WAKE_IDLE, no SD_WAKE_BALANCE; one domain spanning the machine, a quad-core package).

        A wakee whose previous CPU is the waker's stays. Otherwise, with ``load`` =
        source_load(prev) = min(cpu_load[0], current weight) and ``this_load`` =
        target_load(waker's CPU) = max(cpu_load[0], current weight), it goes to the waker's CPU
        (wake affine) when the wakeup is sync and the wakee is cache-cold (it last ran more than
        sched_migration_cost ago: task_hot), or when ``tl`` = this_load, less the running
        waker's weight on a sync wakeup, satisfies ``tl <= load and tl + target_load(prev) <=
        tl_per_task`` (the waker CPU's load per running task) or ``100 (tl + weight of the
        wakee) <= 112 load``; else it stays on its previous CPU. So a non-sync wakeup moves the
        wakee only when its previous CPU carries about one task more than the waker's would
        with it. Then wake_idle: a chosen CPU that is neither idle nor running more than one
        task gives way to the first idle CPU.

        cpu_load[0] is sampled at the tick (:meth:`CPU._tick_fn`), and a run queue's weight
        counts a real-time task at twice a nice -20 task (set_load_weight): under PREEMPT_RT the
        tick has just woken the softirq-timer thread when update_cpu_load samples it, so every
        ticking CPU's cpu_load[0] carries that weight until its next tick, target_load of the
        waker's CPU is never below it, and a non-sync wakeup almost never moves (only a sync
        wakeup of a cache-cold task does)."""
        aff = t.affinity
        target = prev
        if waker is not None and waker is not prev and (aff is None or waker.index in aff):
            if sync and self.env._now - t.last_ran >= self.kernel.sched_migration_cost:
                target = waker  # attract cache-cold tasks on sync wakeups
            else:
                prev_now = self._rq_weight_2624(prev)[0]
                load = min(prev.cpu_load[0], prev_now)  # source_load(prev, wake_idx)
                this_now, this_nr = self._rq_weight_2624(waker)
                tl = max(waker.cpu_load[0], this_now)  # target_load(this_cpu, wake_idx)
                tl_per_task = this_now // this_nr if this_nr else NICE_0_WEIGHT  # cpu_avg_load_per_task
                cur = waker.curr
                if sync and cur is not None:
                    tl -= RT_LOAD_WEIGHT if cur.prio else cur.weight
                # tl is unsigned in the kernel: a negative value wraps to a huge one (no move)
                if tl >= 0 and (
                    (tl <= load and tl + max(prev.cpu_load[0], prev_now) <= tl_per_task)
                    or 100 * (tl + t.weight) <= WAKE_IMBALANCE_2624 * load
                ):
                    target = waker
        # wake_idle (SD_WAKE_IDLE)
        if target.curr is None or target.nr_running > 1:
            return target
        for c in self.cpus:
            if c.curr is None and (aff is None or c.index in aff):
                return c
        return target

    @staticmethod
    def _rq_weight_2624(c: CPU) -> tuple[int, int]:
        """rq->load.weight and rq->nr_running of 2.6.24 (kernel/sched.c inc_nr_running): every
        runnable task, the running one included, a real-time task at RT_LOAD_WEIGHT. The
        model's fair tasks all have NICE_0_WEIGHT (no nice levels), so only the real-time
        entries (the top of the heap) are looked at one by one."""
        cur = c.curr
        w = nr = 0
        if cur is not None and cur.state == RUNNABLE:
            w = RT_LOAD_WEIGHT if cur.prio else cur.weight
            nr = 1
        rq = c.rq
        n = len(rq)
        rt = 0
        stack = [0] if n and rq[0][0] == 0 else []
        while stack:  # the real-time entries (key 0) are a subtree at the top of the heap
            i = stack.pop()
            _, _, seq, q = rq[i]
            if seq == q._rq_seq and q.state == RUNNABLE and not q.on_cpu:
                rt += 1
            for j in (2 * i + 1, 2 * i + 2):
                if j < n and rq[j][0] == 0:
                    stack.append(j)
        return w + rt * RT_LOAD_WEIGHT + (c.nr_queued - rt) * NICE_0_WEIGHT, nr + c.nr_queued

    # ------------------------------------------------------------------ 2.6.24 load balancing
    # kernel.load_balance = "2.6.24": the balancer of 2.6.24 kernel/sched.c for one sched domain
    # with the values of SD_MC_INIT (include/linux/topology.h), each CPU a group of its own with
    # cpu_power SCHED_LOAD_SCALE, so a group's load is its CPU's load and the cpu_power scalings
    # of find_busiest_group cancel out. Loads are rq->load.weight (_rq_weight_2624) now or as
    # sampled at the tick into cpu_load[] (CPU._tick_fn). Only fair tasks are moved: the
    # real-time tasks of the model's stories are per-CPU threads (load_balance_rt finds them
    # pinned). SCHED_SOFTIRQ's work runs inside the tick interrupt here (its cost is
    # ``costs.balance`` per task moved), not in a softirq thread.

    @staticmethod
    def _cpu_load_2624(c: CPU, now: int, idx: int, local: bool) -> int:
        """source_load (another CPU: the lower) or target_load (this CPU: the higher) of
        cpu_load[idx - 1] and ``now``, the run queue's weight now (_rq_weight_2624); idx 0:
        the weight now (kernel/sched.c)."""
        if idx == 0:
            return now
        old = c.cpu_load[idx - 1]
        return max(old, now) if local else min(old, now)

    def _find_busiest_2624(self, this: CPU, idle: int, excluded: set[int]) -> tuple[CPU | None, int]:
        """find_busiest_group and find_busiest_queue (2.6.24 kernel/sched.c) for a domain of
        one-CPU groups: the busiest CPU to pull from and the weighted load to move, or None.

        Groups are visited from this CPU's on, in CPU order (the circular list of
        init_sched_build_groups); a group is a candidate when it runs more than one task
        (group_capacity 1). No pull when this CPU's load is at least the busiest's or the
        average, or the busiest is within imbalance_pct (125 %) of it, or the busiest carries no
        more than its own load per task. Else the imbalance is the smaller of what takes the
        busiest down to the average (but not below one task's load) and what takes this CPU up
        to it; if that is less than one of the busiest's tasks, one task's load is moved when
        the gap is at least one (or two) tasks (the fuzz of SCHED_LOAD_SCALE included) or when
        the move raises the summed min(load, load per task) of the two CPUs (the "cpu power"
        test), else the small imbalance stays (move_tasks may still move a task for it).
        find_busiest_queue then passes over a CPU running one task heavier than the imbalance."""
        load_idx = BUSY_IDX_2624 if idle == CPU_NOT_IDLE else NEWIDLE_IDX_2624 if idle == CPU_NEWLY_IDLE else IDLE_IDX_2624
        this_load = total = max_load = 0
        busiest: CPU | None = None
        busiest_wl = busiest_nr = 0
        this_wl, this_nr = self._rq_weight_2624(this)
        if this.index not in excluded:
            this_load = self._cpu_load_2624(this, this_wl, load_idx, True)
            total = this_load
        for c in self._others[this.index]:
            if c.index in excluded:
                continue
            wl, nr = self._rq_weight_2624(c)
            load = self._cpu_load_2624(c, wl, load_idx, False)
            total += load
            if load > max_load and nr > 1:
                max_load, busiest, busiest_wl, busiest_nr = load, c, wl, nr
        if busiest is None or this_load >= max_load or busiest_nr == 0:
            return None, 0
        avg = total // len(self.cpus)  # SCHED_LOAD_SCALE * total_load / total_pwr
        if this_load >= avg or 100 * max_load <= IMBALANCE_PCT_2624 * this_load:
            return None, 0
        blpt = busiest_wl // busiest_nr  # busiest_load_per_task
        if max_load <= blpt:
            return None, 0
        imbalance = 0
        if max_load >= avg:
            imbalance = min(max_load - avg, max_load - blpt, avg - this_load)
        if imbalance < blpt:  # small_imbalance
            imbn = 2
            if this_nr:
                tlpt = this_wl // this_nr
                if blpt > tlpt:
                    imbn = 1
            else:
                tlpt = SCHED_LOAD_SCALE
            if max_load - this_load + SCHED_LOAD_SCALE >= blpt * imbn:
                imbalance = blpt
            else:
                pwr_now = min(blpt, max_load) + min(tlpt, this_load)
                pwr_move = min(blpt, max_load - blpt) if max_load > blpt else 0
                pwr_move += min(tlpt, this_load + min(max_load, blpt))
                if pwr_move > pwr_now:
                    imbalance = blpt
        # find_busiest_queue over the group's one CPU
        if busiest_nr == 1 and busiest_wl > imbalance or busiest_wl == 0:
            return None, 0
        return busiest, imbalance

    def _ms_to_jiffies(self, ms: int) -> int:
        """msecs_to_jiffies (rounded up), at least one jiffy."""
        return max(1, -(-ms * self.kernel.hz // 1000))

    def _can_migrate_2624(self, t: Task, dst: CPU, failed: int, now: int) -> bool:
        """can_migrate_task after the affinity test: not running, and cache-cold (task_hot: it
        ran less than sched_migration_cost ago) unless the domain's balancing failed more than
        cache_nice_tries times in a row."""
        if t.on_cpu:
            return False
        if failed > CACHE_NICE_TRIES_2624:
            return True
        return not (t.run_ns and now - t.last_ran < self.kernel.sched_migration_cost)

    def _move_tasks_2624(self, this: CPU, busiest: CPU, imbalance: int, preempt: bool = True) -> tuple[int, bool]:
        """move_tasks -> load_balance_fair -> balance_tasks (2.6.24 kernel/sched.c,
        kernel/sched_fair.c): walk busiest's queued fair tasks from the leftmost (smallest
        vruntime; the running task is not in the tree) and pull each one allowed here and
        migratable until ``imbalance`` of weight has moved, looking at no more than
        sysctl_sched_nr_migrate + 1 tasks; each pulled task gets check_preempt_curr (not when
        ``this`` is in schedule() looking for its next task: ``preempt`` False). Returns (tasks
        moved, all_pinned: no task looked at may run here)."""
        limit = NR_MIGRATE_2624 + 1
        if imbalance <= 0:
            return 0, False
        now = self.env._now
        rem = imbalance
        moved = loops = 0
        pinned = True
        for _, _, seq, t in sorted(e for e in busiest.rq if e[0] == 1):
            if seq != t._rq_seq or t.state != RUNNABLE or t.on_cpu:
                continue
            if loops >= limit:
                break
            loops += 1
            if not t.allowed(this.index):
                continue
            pinned = False
            if not self._can_migrate_2624(t, this, this.lb_failed, now):
                continue
            self._pull_task_2624(busiest, t, this, preempt)
            moved += 1
            rem -= t.weight
            if rem <= 0:
                break
        return moved, pinned

    def _pull_task_2624(self, src: CPU, t: Task, dst: CPU, preempt: bool = True) -> None:
        """pull_task: dequeue from ``src``, set_task_cpu (vruntime rebased on the new queue's
        min_vruntime), enqueue on ``dst``, check_preempt_curr (a kick if ``dst`` idles)."""
        src._detach(t)
        self._migrate_vruntime(t, src, dst)
        dst._enqueue(t)
        if not preempt:
            return
        self._check_preempt(dst, t, dst)
        if dst.curr is None and dst.state == IDLE and not dst.kick_pending:
            # resched_cpu(this_cpu) for an idle CPU balanced by the idle load balancer
            dst.kick_pending = True
            self.send_ipi(None, dst, self._kick_done, name="resched ipi")

    def _load_balance_2624(self, this: CPU, idle: int) -> int:
        """load_balance (2.6.24 kernel/sched.c) of ``this`` CPU's domain: find the busiest CPU,
        move tasks if it runs more than one (again without a CPU whose tasks were all pinned),
        count a failure when nothing moved; after more than cache_nice_tries + 2 failures in a
        row wake the busiest CPU's migration thread to push one task here (active balance).
        balance_interval goes back to min_interval after an imbalance and doubles (up to
        max_interval) after a balanced pass. Returns the tasks moved."""
        excluded: set[int] = set()
        all_pinned = False
        while True:
            busiest, imbalance = self._find_busiest_2624(this, idle, excluded)
            if busiest is None:
                this.lb_failed = 0
                if (all_pinned and this.lb_interval < MAX_PINNED_INTERVAL_2624) or this.lb_interval < MAX_INTERVAL_2624:
                    this.lb_interval *= 2
                return 0
            moved = 0
            all_pinned = False
            if busiest.nr_running > 1:
                moved, all_pinned = self._move_tasks_2624(this, busiest, imbalance)
                if all_pinned:
                    excluded.add(busiest.index)
                    if len(excluded) < len(self.cpus):
                        continue
                    this.lb_failed = 0
                    if this.lb_interval < MAX_PINNED_INTERVAL_2624:
                        this.lb_interval *= 2
                    return 0
            break
        active = False
        if not moved:
            this.lb_failed += 1
            if this.lb_failed > CACHE_NICE_TRIES_2624 + 2:
                cur = busiest.curr
                if cur is not None and not cur.allowed(this.index):
                    # out_one_pinned
                    if this.lb_interval < MAX_PINNED_INTERVAL_2624:
                        this.lb_interval *= 2
                    return 0
                if not busiest.active_balance:
                    busiest.active_balance = True
                    busiest.push_cpu = this.index
                    active = True
                    self._wake_migration_2624(busiest)
                this.lb_failed = CACHE_NICE_TRIES_2624 + 1
        else:
            this.lb_failed = 0
        if not active:
            this.lb_interval = MIN_INTERVAL_2624
        elif this.lb_interval < MAX_INTERVAL_2624:
            this.lb_interval *= 2
        return moved

    def _rebalance_domains_2624(self, c: CPU, idle: int) -> int:
        """rebalance_domains: balance ``c``'s domain if balance_interval (ms, times busy_factor
        64 unless the CPU idled at its tick) has passed since the last time; set
        rq->next_balance. Returns the tasks moved."""
        interval = c.lb_interval if idle == CPU_IDLE else c.lb_interval * BUSY_FACTOR_2624
        interval = self._ms_to_jiffies(interval)
        jiffies = self.env._now // self.tick_ns
        moved = 0
        if jiffies >= c.lb_last + interval:
            moved = self._load_balance_2624(c, idle)
            c.lb_last = jiffies
        c.lb_next = c.lb_last + interval
        return moved

    def _ilb_owner_2624(self) -> int:
        """nohz.load_balancer, or -1; an owner that has run a task since it took the role has
        left nohz (select_nohz_load_balancer(0) from tick_nohz_restart_sched_tick)."""
        ilb = self.nohz_ilb
        if ilb >= 0 and not self._in_nohz_2624(self.cpus[ilb]):
            self.nohz_ilb = ilb = -1
        return ilb

    def _in_nohz_2624(self, c: CPU) -> bool:
        sw = self.nohz_mask.get(c.index)
        if sw is None:
            return False
        if sw != c.switches or c.curr is not None:
            del self.nohz_mask[c.index]
            return False
        return True

    def _nohz_stop_2624(self, c: CPU) -> bool:
        """A veto hook at an idle CPU's tick: select_nohz_load_balancer(1) (2.6.24
        kernel/sched.c), called by tick_nohz_stop_sched_tick. The CPU joins nohz.cpu_mask; the
        first to find no idle load balancer becomes it and keeps its tick, unless every CPU is
        in nohz mode (then nobody balances)."""
        self.nohz_mask[c.index] = c.switches
        c.nohz_recent = True
        ilb = self._ilb_owner_2624()
        if sum(1 for x in self.cpus if self._in_nohz_2624(x)) == len(self.cpus):
            if ilb == c.index:
                self.nohz_ilb = -1
            return False
        if ilb == -1:
            self.nohz_ilb = c.index
            return True
        return ilb == c.index

    def _trigger_load_balance_2624(self, c: CPU) -> int:
        """trigger_load_balance and run_rebalance_domains (2.6.24 kernel/sched.c) at ``c``'s
        tick; returns their cost. Under NO_HZ a CPU busy again after a nohz spell gives up the
        idle load balancer's role and, if nobody has it, kicks the first CPU in nohz mode to
        take it; an idle CPU balances only if it is that balancer, and then balances every CPU
        in nohz mode too (CPU_IDLE), stopping when it has work itself."""
        m_cost = self.costs.balance
        if self.kernel.nohz_idle:
            if c.nohz_recent and not c.idle_at_tick:
                c.nohz_recent = False
                ilb = self._ilb_owner_2624()
                if ilb == c.index:
                    self.nohz_mask.pop(c.index, None)
                    self.nohz_ilb = ilb = -1
                if ilb == -1:
                    idle = [x for x in self.cpus if self._in_nohz_2624(x)]
                    if idle and not idle[0].kick_pending and idle[0].state == IDLE:
                        idle[0].kick_pending = True
                        self.send_ipi(c, idle[0], self._kick_done, name="resched ipi")
            if c.idle_at_tick:
                ilb = self._ilb_owner_2624()
                if ilb != c.index and self._in_nohz_2624(c):
                    return 0
                if ilb == c.index and all(self._in_nohz_2624(x) for x in self.cpus):
                    return 0  # resched_cpu(cpu): the next stop attempt finds everyone in nohz mode
        jiffies = self.env._now // self.tick_ns
        if jiffies < c.lb_next:
            return 0
        moved = self._rebalance_domains_2624(c, CPU_IDLE if c.idle_at_tick else CPU_NOT_IDLE)
        if self.kernel.nohz_idle and c.idle_at_tick and self.nohz_ilb == c.index:
            for x in self.cpus:
                if x is c or not self._in_nohz_2624(x):
                    continue
                if c.nr_queued:  # need_resched(): this CPU has work now
                    break
                moved += self._rebalance_domains_2624(x, CPU_IDLE)
                c.lb_next = min(c.lb_next, x.lb_next)
        return moved * m_cost

    def _idle_balance_2624(self, c: CPU) -> Task | None:
        """idle_balance -> load_balance_newidle (2.6.24 kernel/sched.c), from schedule() on a
        CPU with nothing to run: find_busiest_group with newidle_idx, move tasks (several if
        the imbalance asks for it), no failure count; then rq->next_balance from the domain's
        balance_interval. Returns the task to run (the leftmost of those pulled) or None."""
        excluded: set[int] = set()
        moved = 0
        while True:
            busiest, imbalance = self._find_busiest_2624(c, CPU_NEWLY_IDLE, excluded)
            if busiest is None:
                c.lb_failed = 0  # out_balanced
                break
            if busiest.nr_running <= 1:
                break
            moved, all_pinned = self._move_tasks_2624(c, busiest, imbalance, preempt=False)
            if all_pinned:
                excluded.add(busiest.index)
                if len(excluded) < len(self.cpus):
                    continue
            break
        if moved:
            c.lb_failed = 0
        jiffies = self.env._now // self.tick_ns
        nxt = c.lb_last + self._ms_to_jiffies(c.lb_interval)
        if moved or jiffies > c.lb_next:
            c.lb_next = min(nxt, jiffies + self.kernel.hz)
        if not moved:
            return None
        return c._pop()

    def _wake_migration_2624(self, busiest: CPU) -> None:
        """Wake ``busiest``'s migration thread (a SCHED_FIFO 99 kernel thread bound to it, made
        on first use) for active_load_balance."""
        k = busiest.migration
        if k is None:
            busiest.migration = self.spawn(
                lambda task: self._migration_script_2624(busiest),
                f"migration/{busiest.index}",
                policy="fifo",
                prio=99,
                affinity=(busiest.index,),
                kthread=True,
            )
        else:
            self.wake(k, None)

    def _migration_script_2624(self, c: CPU) -> Script:
        """migration_thread -> active_load_balance (2.6.24 kernel/sched.c): push one queued
        task of this CPU to push_cpu (move_one_task with CPU_IDLE, the target's
        nr_balance_failed past cache_nice_tries so a cache-hot task goes too), then sleep."""

        def push(cpu: CPU, t: Task) -> int:
            cpu.active_balance = False
            target = self.cpus[cpu.push_cpu]
            if cpu.nr_running <= 1:
                return 0
            now = self.env._now
            for _, _, seq, q in sorted(e for e in cpu.rq if e[0] == 1):
                if seq != q._rq_seq or q.state != RUNNABLE or q.on_cpu or not q.allowed(target.index):
                    continue
                if self._can_migrate_2624(q, target, target.lb_failed, now):
                    self._pull_task_2624(cpu, q, target)
                    return self.costs.balance
            return 0

        def park(cpu: CPU, t: Task) -> int:
            return 0 if cpu.active_balance else BLOCKED

        op_push, op_park = Call(push), Call(park)
        while True:
            yield op_push
            yield op_park

    def _select_cpu_weight(self, t: Task, prev: CPU, waker: CPU | None, sync: bool) -> CPU:
        """select_task_rq_fair of 4.14+ for a fair task (kernel/sched/fair.c): wake_affine
        chooses between the waker's CPU and the previous one (wake_affine_idle: an idle waker
        CPU, or a sync waker alone on its CPU, or an idle previous CPU; else
        wake_affine_weight), then select_idle_sibling prefers the choice if idle, the previous
        CPU if idle, any idle CPU, and else keeps the choice. A CPU's load is the weight of its
        runnable tasks averaged at the tick with PELT's 32 ms half-life; the tasks' own loads
        are PELT's per-task averages (:meth:`_pelt_wakeup`): a sync wakeup takes the running
        waker's off its CPU (task_h_load(current)), and the wakee's is added to the waker's CPU
        and taken off its previous one (task_h_load(p)), so a wakee that was runnable most of
        the time keeps its CPU when the loads are level (no task groups: h_load is the load).

        ``wake_affine = "pack"`` first keeps the wakee on the waker's CPU whenever the waker runs
        alone there (``nr_running == 1``), sync or not, and skips the idle-CPU search. That is
        not mainline: wake_affine_idle keeps only a WF_SYNC wakee there, and select_idle_sibling
        then still prefers an idle CPU sharing the cache. It is what the collector's
        ``wake_placement`` item measures on the development machine (a 6.18 guest kernel):
        with the other CPU idle, 99 % of the wakeups of a thread free to run anywhere land on
        the waker's CPU; with a spinner sharing the waker's CPU, none do. Under ftrace the same
        machine runs the expedited-GP kthread_worker on the requester's CPU (kernel/rcu/tree_exp.h
        synchronize_rcu_expedited_queue_work, a plain wake_up_process), not on the idle CPU. A
        wakeup from a busy CPU's interrupt is not packed: in a `perf` trace of `membarrier(GLOBAL)`
        calls with a user-mode spinner on the other CPU, every wakeup of the GP kthread from the
        spinner's CPU's timer softirq (the pulled FQS timeout) went to the kthread's idle
        previous CPU, as mainline's wake_affine_idle sends it. A wakeup from an idle CPU's
        interrupt is: in traces of idle calls the GP kthread ran on the CPU whose timer softirq
        woke it, its previous CPU idle (9 of 9 visible cases; mainline would keep the previous
        CPU). README, rcu."""
        aff = t.affinity
        if (
            self.wake_affine_pack
            and waker is not None
            and waker.curr is not None
            and waker.nr_queued == 0
            and waker.state != IRQ
            and waker.state != SOFTIRQ
            and (aff is None or waker.index in aff)
        ):
            return waker
        target = prev
        if waker is not None and waker is not prev and (aff is None or waker.index in aff):
            if waker.curr is None and waker.nr_queued == 0:
                # a wakeup from an idle CPU's interrupt: mainline keeps an idle previous CPU
                # (wake_affine_idle); the packing guest runs the wakee where the interrupt came
                if self.wake_affine_pack:
                    target = waker
                else:
                    target = prev if prev.curr is None and prev.nr_queued == 0 else waker
            elif sync and waker.nr_running == 1:
                target = waker
            elif prev.curr is None and prev.nr_queued == 0:
                target = prev
            else:
                # wake_affine_weight: each side with the wakee's own load (task_h_load(p)) on it
                this_load = waker.load_avg
                cur = waker.curr
                if sync and cur is not None and not cur.prio:
                    cur_load = self._pelt_running(cur)  # task_h_load(current)
                    if cur_load > this_load:
                        return waker
                    this_load -= cur_load
                task_load = t.load_avg  # brought up to date by _pelt_wakeup
                this_eff = (this_load + task_load) * 100
                # WA_BIAS: the previous CPU's load counts imbalance_pct / 2 more (MC domain: 117)
                prev_eff = (prev.load_avg - task_load) * (100 + (117 - 100) // 2) + (1 if sync else 0)
                if this_eff < prev_eff:
                    target = waker
        if target.curr is None and target.nr_queued == 0:
            return target
        if prev is not target and prev.curr is None and prev.nr_queued == 0:
            return prev
        n = len(self.cpus)
        for k in range(1, n):
            c = self.cpus[(target.index + k) % n]
            if c.curr is None and c.nr_queued == 0 and (aff is None or c.index in aff):
                return c
        return target

    def _pelt_wakeup(self, t: Task) -> None:
        """Bring a waking task's PELT load (se->avg.load_avg, kernel/sched/pelt.c) up to now:
        runnable (full weight) from its last wakeup until it last left a CPU, blocked since (or
        runnable throughout if it never left the CPU), decaying by half every 32 ms."""
        now = self.env._now
        end = t.last_ran if t.last_ran >= t.load_t and not t.on_cpu else now
        d = 0.5 ** ((end - t.load_t) / PELT_HALF_LIFE_NS)
        load = t.load_avg * d + t.weight * (1.0 - d)
        t.load_avg = int(load * 0.5 ** ((now - end) / PELT_HALF_LIFE_NS))
        t.load_t = now

    def _pelt_running(self, t: Task) -> int:
        """A running task's PELT load now: runnable since its last wakeup."""
        d = 0.5 ** ((self.env._now - t.load_t) / PELT_HALF_LIFE_NS)
        return int(t.load_avg * d + t.weight * (1.0 - d))

    @staticmethod
    def _cpu_load(c: CPU) -> int:
        load = 0
        if c.curr is not None and not c.curr.prio:
            load += c.curr.weight
        for _, _, seq, q in c.rq:
            if seq == q._rq_seq and q.state == RUNNABLE and not q.on_cpu and not q.prio:
                load += q.weight
        return load

    def _newidle_pull(self, cpu: CPU) -> Task | None:
        """newidle balance: an idle CPU takes a waiting task from the busiest run queue,
        never the only task of a run queue (detach_tasks() in kernel/sched/fair.c stops at
        ``src_rq->nr_running <= 1`` when balancing from idle): a task woken onto an idle CPU
        that is still leaving its idle state stays there."""
        if self.lb_2624:
            return self._idle_balance_2624(cpu)
        kicked, cpu.nohz_balance = cpu.nohz_balance, False
        busiest = None
        for c in self.cpus:
            if c is cpu or c.nr_queued == 0 or c.nr_running <= 1:
                continue
            if busiest is None or c.nr_queued > busiest.nr_queued:
                busiest = c
        if busiest is None:
            return None
        t = busiest._steal_candidate(cpu.index, self.env.now, respect_hot=False)
        if t is None:
            return None
        busiest._detach(t)
        self._migrate_vruntime(t, busiest, cpu)
        t.cpu = busiest.index
        if kicked and self.eevdf:
            # the idle balance a nohz kick runs (CPU_IDLE) goes on detaching; a newly idle one
            # stops after one task (detach_tasks under CONFIG_PREEMPTION)
            self._pull_imbalance(cpu, 1, respect_hot=False)
        return t

    def _busy_balance(self, cpu: CPU) -> int:
        """At the tick of a CPU with waiting tasks: kick an idle CPU to pull (nohz balance
        kick), or, every few ticks, pull from a busier CPU (periodic load_balance)."""
        for c in self.cpus:
            if c.state == IDLE and not c.kick_pending and c is not cpu:
                if cpu._steal_candidate(c.index, self.env.now, respect_hot=False) is not None:
                    c.kick_pending = True
                    self.send_ipi(cpu, c, self._nohz_kick_done, name="nohz balance kick")
                    return 0
        return 0

    def _periodic_pull(self, cpu: CPU) -> int:
        """Periodic load_balance into ``cpu``: under EEVDF (6.x) detach_tasks() moves tasks
        until the imbalance is gone, at most sysctl_sched_nr_migrate (32) per pass; the older
        eras' path moves one task per balance (a simplification kept for their stories)."""
        limit = NR_MIGRATE if self.eevdf else 1
        return self._pull_imbalance(cpu, 0, respect_hot=True, limit=limit) * self.costs.balance

    def _pull_imbalance(self, cpu: CPU, incoming: int, respect_hot: bool, limit: int = NR_MIGRATE) -> int:
        """Move queued tasks from the busiest CPU to ``cpu`` while they differ by two or more
        runnable tasks (``incoming``: tasks already on their way to ``cpu``), at most ``limit``
        (sysctl_sched_nr_migrate, the loop_max of sched_balance_rq/detach_tasks in
        kernel/sched/fair.c); the count moved. Counting tasks stands for calculate_imbalance()'s
        load (equal weights)."""
        moved = 0
        now = self.env.now
        while moved < limit:
            busiest = max(self.cpus, key=lambda c: (c.nr_running, -c.index))
            if busiest is cpu or busiest.nr_running - (cpu.nr_running + incoming) < 2:
                break
            t = busiest._steal_candidate(cpu.index, now, respect_hot)
            if t is None:
                break
            busiest._detach(t)
            self._migrate_vruntime(t, busiest, cpu)
            cpu._enqueue(t)
            moved += 1
        return moved

    @staticmethod
    def _migrate_vruntime(t: Task, src: CPU, dst: CPU) -> None:
        if t.prio:
            return
        if src.m.eevdf:
            # a queued task moving CPUs is dequeued with its lag (update_entity_lag, clamped) and
            # placed on the new queue with it; PLACE_REL_DEADLINE keeps its deadline's distance
            src.eevdf_set_lag(t)
            rel = t.deadline - t.vruntime
            dst.eevdf_place(t, False)
            t.deadline = t.vruntime + rel
            return
        t.vruntime += dst.update_min_vruntime() - src.update_min_vruntime()

    def _wake_ksoftirqd(self, cpu: CPU) -> None:
        k = cpu.ksoftirqd
        if k is None:
            k = cpu.ksoftirqd = self.spawn(
                lambda task: self._ksoftirqd_script(task, cpu), f"ksoftirqd/{cpu.index}", affinity=(cpu.index,), kthread=True
            )
            return
        self.wake(k, cpu)

    def _ksoftirqd_script(self, task: Task, cpu: CPU) -> Script:
        """run_ksoftirqd: handle pending softirqs in thread context, one vector per op."""
        state: dict[str, Any] = {}

        def run_one(c: CPU, t: Task) -> int:
            pending = c.softirq_pending
            if not pending:
                return 0
            vec = (pending & -pending).bit_length() - 1
            c.softirq_pending = pending & ~(1 << vec)
            cost, done = self.softirq_handlers[vec](c)
            state["done"] = done

            def finish(c2: CPU, t2: Task) -> int:
                d = state.pop("done", None)
                if d is not None:
                    d(c2)
                return 0

            t.post = finish
            return cost + self.costs.softirq_entry

        def park(c: CPU, t: Task) -> int:
            if c.softirq_pending:
                return 0
            c.softirq_rounds = 0
            return BLOCKED

        op_run, op_park = Call(run_one), Call(park)
        while True:
            while cpu.softirq_pending:
                yield op_run
            yield op_park

    # ------------------------------------------------------------------ services for mechanisms
    def cut_segment(self, t: Task, delay: int = 0) -> None:
        """End the CPU time ``t`` is spending *now* early, after ``delay``, and continue with
        its ``post`` continuation: how a spinning waiter notices that the lock word changed
        (``delay`` is the cache-line transfer). Nothing happens if by then ``t`` has stopped
        spending that segment (preempted, finished, or in another op)."""
        if not t.on_cpu:
            return
        cpu = self.cpus[t.cpu]
        # the segment running now (if any) is the one whose end has this event id
        self.call_at(delay, self._cut, cpu, t, cpu.act_eid)

    @staticmethod
    def _cut(cpu: CPU, t: Task, eid: int) -> None:
        if cpu.act_eid != eid or cpu.curr is not t or not cpu.seg_active:
            return
        cpu._pause()
        t.remaining = 0
        cpu._dispatch()

    def end_segment(self, t: Task) -> None:
        """End the CPU time ``t`` is spending now, at once: if a CPU is running that segment,
        ``t``'s ``post`` continuation runs now; if the segment is paused (an interrupt, a
        context switch, or ``t`` was preempted), its rest is dropped and the continuation runs
        as soon as ``t`` runs again. For busy-wait loops whose owner tracks that ``t`` is still
        in the loop (unlike :meth:`cut_segment`, nothing is lost to an interrupt that arrives
        first)."""
        cpu = self.cpus[t.cpu] if t.cpu >= 0 else None
        if cpu is not None and cpu.curr is t and cpu.seg_active:
            cpu._pause()
            t.remaining = 0
            cpu._dispatch()
        else:
            t.remaining = 0

    def set_prio(self, t: Task, prio: int) -> None:
        """Change a task's effective priority (priority inheritance boost or deboost): a
        queued task is requeued, and the CPU concerned reschedules if the order changed."""
        if t.prio == prio:
            return
        if not 0 <= prio <= 99:
            raise ValueError(f"priority must be 0..99, got {prio}")
        old = t.prio
        t.prio = prio
        t.update_vplain()
        if t.state != RUNNABLE:
            return
        cpu = self.cpus[t.cpu]
        if t.on_cpu:
            if prio < old:
                head = cpu._peek()
                if head is not None and head.prio > prio:
                    self._need_resched(cpu)
            return
        if t._rq_seq:
            cpu._detach(t)
            cpu._enqueue(t)
            self._check_preempt(cpu, t, None)

    def _need_resched(self, cpu: CPU) -> None:
        cpu.need_resched = True
        if not cpu.resched_pending:
            cpu.resched_pending = True
            self.send_ipi(None, cpu, self._resched_done, name="resched ipi")

    # ------------------------------------------------------------------ substrate op handlers
    def _h_syscall(self, cpu: CPU, t: Task, op: Syscall) -> int:
        return self.jit_sched.apply(self.costs.syscall) + op.ns

    def _h_call(self, cpu: CPU, t: Task, op: Call) -> int:
        return op.fn(cpu, t)

    def _h_yield(self, cpu: CPU, t: Task, op: Yield) -> int:
        if cpu.nr_queued:
            head = cpu._peek()
            if head is not None and not t.prio and not head.prio and t.vruntime <= head.vruntime:
                t.vruntime = head.vruntime + 1  # yield_task_fair: go behind the leftmost
            cpu.need_resched = True
        return self.jit_sched.apply(self.costs.syscall)

    def _h_sleep(self, cpu: CPU, t: Task, op: Sleep) -> int:
        ns = op.ns
        t.post = lambda c, task: self._sleep_block(c, task, ns)
        return self.jit_sched.apply(self.costs.syscall)

    def _sleep_block(self, cpu: CPU, t: Task, ns: int) -> int:
        # hrtimer on the CPU the task sleeps on: expiry is an interrupt there, which wakes it.
        self.interrupt(cpu, self.jit_sched.apply(self.costs.timer_irq), lambda c: self._wake_irq(c, t), ns)
        return BLOCKED

    def _wake_irq(self, cpu: CPU, t: Task) -> int:
        return self.wake(t, cpu)

    def _h_spawn(self, cpu: CPU, t: Task, op: Spawn) -> int:
        def after_fork(c: CPU, parent: Task) -> int:
            child = self.spawn(
                lambda task: self._process(task, op.script, op.exec),
                op.name,
                policy=op.policy,
                prio=op.prio,
                affinity=op.affinity,
                parent=parent,
                from_cpu=c,
                thread_of=parent if op.thread else None,
            )
            parent.retval = child
            if op.wait:
                return self._wait_for(parent, child)
            return 0

        t.post = after_fork
        return self.jit_sched.apply(self.costs.fork)

    def _process(self, task: Task, script: ScriptFactory, exec_: bool) -> Script:
        """A user process: (exec,) the program, exit.

        As ``yield from script(task)`` followed by the exit's CPU time, without the cost of
        delegating every step: once the program's generator exists it becomes the task's
        script (the engine sends to it directly), and ``task.on_end`` gives the exit's step
        when it ends (drawn at that moment, as the delegating version did)."""
        costs = self.costs
        jit = self.jit_sched
        if exec_:
            yield CpuWork(jit.apply(costs.exec), user=False)
        inner = script(task)
        task.script = inner
        try:
            first = next(inner)
        except StopIteration:
            yield CpuWork(jit.apply(costs.exit), user=False)
            return
        task.on_end = lambda: CpuWork(jit.apply(costs.exit), user=False)
        yield first

    def _wait_for(self, parent: Task, child: Task) -> int:
        if child.state == DONE:
            parent.retval = child
            return 0
        child.exit_waiters.append(parent)
        return BLOCKED

    def _h_waitchild(self, cpu: CPU, t: Task, op: WaitChild) -> int:
        t.post = lambda c, task: self._wait_for(task, op.child)
        return self.jit_sched.apply(self.costs.syscall)

    # ------------------------------------------------------------------ results
    def finish_accounting(self) -> None:
        """Close the open accounting interval of every CPU at the current time."""
        for c in self.cpus:
            c._set_state(c.state)

    def cpu_stats(self) -> list[dict[str, Any]]:
        now = self.env.now
        out = []
        for c in self.cpus:
            acc = list(c.acc)
            acc[c.state] += now - c.since
            busy = sum(acc) - acc[IDLE] - acc[WAKING]
            out.append(
                {
                    "cpu": c.index,
                    "utilisation": busy / now if now else 0.0,
                    **{f"{STATE_NAMES[i]}_ns": acc[i] for i in range(len(STATE_NAMES))},
                    "switches": c.switches,
                    "ticks": c.ticks,
                    "ipis": c.ipis,
                    "idle_exits": c.idle_exits,
                }
            )
        return out
