"""Tree RCU: grace periods, quiescent states, callbacks, synchronous waits, rcu_barrier.

Follows kernel/rcu/tree.c, tree.h and tree_plugin.h (v3.13 and today), as summarised with
sources in docs/kernel/rcu-nocb-netns.md. One RCU flavor is modelled (rcu_sched on the
non-preemptible kernels of the seed, rcu_preempt with ``preemptible``); the rcu_node tree is
flattened into one quiescent-state mask, its depth only showing in the per-node costs.

The pieces, all emerging from the substrate's CPUs and tasks:

* **The grace-period kthread** (``rcu_gp_kthread``, a SCHED_OTHER task that competes for CPUs)
  sleeps until a GP is requested, starts it (every online CPU owes a quiescent state), sleeps
  ``jiffies_till_first_fqs`` on a timer-wheel timer, scans for idle CPUs (dyntick-idle: reported
  on their behalf), sleeps ``jiffies_till_next_fqs``... until every CPU has reported, then ends
  the GP, wakes the offload kthreads waiting for it and starts another if one is needed.
* **Quiescent states** are noted at context switch and at the tick when it interrupts user mode
  or idle (or, with preemptible RCU, any code outside a reader), and reported by the RCU softirq
  (``rcu_core``), which the tick raises when ``rcu_pending()``. A CPU must first *notice* a new
  GP (in that softirq) before a QS counts for it, as ``__note_gp_changes`` does.
* **Callbacks** sit in per-CPU segments (done / waiting-for-GP-n / next) that advance as GPs
  end; the softirq invokes ready ones in batches of ``blimit`` (unlimited above ``qhimark``).
  v3.13 requests a GP for new callbacks at the next tick or at idle entry (RCU_FAST_NO_HZ,
  which then wakes the idle CPU every ``rcu_idle_gp_delay`` jiffies); v6 keeps the tick of an
  idle CPU that has callbacks (``rcu_needs_cpu``).
  ``fnh_advance_once_per_jiffy`` adds the 2015 kernels' once-a-jiffy ``rcu_try_advance_all_cbs()``
  (idle exit, interrupt from idle, tick stop), a GP end that leaves the kthread CPU's ready
  callbacks to that path, and a wakeup recomputed at each idle entry.
* **Offloaded CPUs** (NOCB) hand callbacks to kthreads: see :mod:`models.rcu.nocb`.
* ``synchronize_rcu()`` queues a wake-me callback and sleeps: its waiter is woken only when that
  callback is invoked (in softirq, or by the CPU's rcuo kthread when offloaded) unless
  ``wake_from_gp``; with one online CPU and non-preemptible RCU it returns at once
  (``rcu_blocking_is_gp``). Expedited GPs: v3.13 runs every CPU's stopper thread
  (``try_stop_cpus``) from the requester; v6 hands the GP to the expedited-GP kthread worker,
  which IPIs the non-idle CPUs and wakes the requesters (see :meth:`Rcu._expedited`).
  ``rcu_barrier()`` follows each era's rules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.machine import CPU, IDLE, Machine
from sim.ops import BLOCKED, Call, CpuWork
from sim.task import RUNNABLE, Task

from .config import RcuConfig
from .ops import CallRcu, RcuBarrier, RcuReadLock, RcuReadUnlock, SynchronizeRcu, SynchronizeRcuExpedited

if TYPE_CHECKING:
    from .nocb import Nocb

RCU_SOFTIRQ = 9  # include/linux/interrupt.h


class Callback:
    """One rcu_head (or ``n`` identical ones queued together, e.g. one per freed mount):
    the invocation cost of each, the effect, and when it was queued. A batch of ``n`` behaves
    as ``n`` callbacks in a row: batch limits split it."""

    __slots__ = ("cost", "fn", "lazy", "queued", "cpu", "gp", "kind", "n")

    def __init__(
        self, cost: int, fn: Callable[[CPU], None] | None, lazy: bool, queued: int, cpu: int, kind: str = "cb", n: int = 1
    ) -> None:
        if n > 1 and fn is not None:
            raise ValueError("a batch of callbacks cannot carry an effect")
        self.n = n
        self.cost = cost
        self.fn = fn
        self.lazy = lazy
        self.queued = queued
        self.cpu = cpu
        self.gp = -1  # the GP number that releases it, once accelerated
        self.kind = kind


class RcuData:
    """Per-CPU RCU state (struct rcu_data)."""

    __slots__ = (
        "cpu", "offloaded", "done", "waiting", "nxt", "gp_seen", "completed_seen", "qs_pending",
        "passed_quiesce", "epoch", "epoch_snap", "fnh_armed", "qlen_last",
        "unlimited", "bypass", "bypass_lazy_only", "bypass_first", "nb_jiffy", "nb_count",
        "nocb_list", "exp_deferred", "drain", "holdoff", "tick_keep", "fnh_fn", "last_advance_all",
    )  # fmt: skip

    def __init__(self, cpu: int, offloaded: bool) -> None:
        self.cpu = cpu
        self.offloaded = offloaded
        self.done: deque[Callback] = deque()
        self.waiting: list[list[Any]] = []  # [[gp, [cbs...]], ...] in GP order
        self.nxt: list[Callback] = []
        self.gp_seen = 0
        self.completed_seen = 0
        self.qs_pending = False
        self.passed_quiesce = False
        self.epoch = 0  # dynticks: bumped on every idle entry and exit
        self.epoch_snap = -1
        self.fnh_armed = -1  # jiffy of the pending RCU_FAST_NO_HZ wakeup timer, if any
        self.qlen_last = 0
        self.unlimited = False
        self.bypass: list[Callback] = []
        self.bypass_lazy_only = True
        self.bypass_first = 0
        self.nb_jiffy = -1
        self.nb_count = 0
        self.nocb_list: deque[Callback] = deque()  # v3.13 nocb_head list
        self.exp_deferred = False
        self.drain = 0  # v3.9 FAST_NO_HZ dyntick_drain
        self.holdoff = -1  # v3.9 FAST_NO_HZ dyntick_holdoff (a jiffy)
        self.tick_keep = -1  # v3.9: jiffy of the tick the last rcu_needs_cpu() kept, or -1
        self.fnh_fn: Any = None
        self.last_advance_all = -1  # jiffy of the last rcu_try_advance_all_cbs() (fnh_advance_once_per_jiffy)

    def has_cbs(self) -> bool:
        return bool(self.done or self.waiting or self.nxt)

    def qlen(self) -> int:
        return sum(cb.n for cb in self.done) + sum(cb.n for g in self.waiting for cb in g[1]) + sum(cb.n for cb in self.nxt)


class Rcu:
    """Tree RCU on a machine (the installed ``[kernel.rcu]`` mechanism)."""

    def __init__(self, m: Machine, cfg: RcuConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.env = m.env
        ncpu = len(m.cpus)
        self.ncpu = ncpu
        # "old" eras share per-CPU rcuo kthreads, stop-machine expedited GPs and v3.13's
        # rcu_barrier; v3.9 differs in FAST_NO_HZ, FQS timing and how rcuo waits for a GP
        self.v313 = cfg.era in ("v3.9", "v3.13")
        self.v39 = cfg.era == "v3.9"
        # the 2015 RCU_FAST_NO_HZ: callbacks advanced at most once per jiffy around idle
        self.fnh_throttle = cfg.fnh_advance_once_per_jiffy
        self.offloaded = cfg.offloaded(ncpu)
        self.rdp = [RcuData(i, i in self.offloaded) for i in range(ncpu)]
        self.nodes = max(1, -(-ncpu // cfg.fanout_leaf)) + (1 if ncpu > cfg.fanout_leaf else 0)
        self.fqs_first, self.fqs_next = cfg.fqs_jiffies(m.kernel.hz, ncpu)
        self.jit = m.jitter("rcu")
        self.costs = m.costs
        # grace-period state
        self.gpnum = 0
        self.completed = 0
        self.qsmask = 0
        self.gp_requested = False
        self.nocb_gp_request = False  # v3.9: an rcuo kthread wants a GP started at the next rcu_core
        self.future_needed = 0  # highest GP number somebody waits for
        self.gp_start_time = 0
        self.gp_blockers: dict[Task, None] = {}  # preempted readers holding up the current GP
        self.blocked_readers: dict[Task, None] = {}
        self.gp_waiters: dict[int, list[Task]] = {}  # kthreads waiting for GP n to complete
        self.sync_waiters_gp: dict[int, list[Task]] = {}  # wake_from_gp waiters
        self.gp_task: Task | None = None
        self.gp_task_sleeping = False
        self.gp_wait_token = 0
        self.gp_fqs_done = False
        # statistics
        self.gps = 0
        self.gp_latency_sum = 0
        self.cbs_queued = 0
        self.cbs_invoked = 0
        self.cbs_invoked_softirq = 0
        self.cbs_invoked_kthread = 0
        self.syncs = 0
        self.sync_ns = 0
        self.exp_gps = 0
        self.barriers = 0
        self.fqs_scans = 0
        from sim.stats import LogHistogram

        self.gp_hist = LogHistogram()
        self.sync_hist = LogHistogram()
        # optional logs for invariant checks (tests switch them on)
        self.record = False
        self.log_gp: list[tuple[int, int, int]] = []  # (gpnum, start, end)
        self.log_cb: list[tuple[int, int, str, str, int]] = []  # (queued, invoked, context, kind, cpu)
        self.log_read: list[tuple[int, int]] = []  # (start, end) of readers
        self.log_barrier: list[tuple[int, int]] = []  # (start, end)
        self.tracer = m.tracer
        self.gp_track = m.tracer.track("RCU grace periods", sort=1000) if m.tracer is not None else 0
        # expedited
        self.exp_seq_done = 0
        self.exp_seq_req = 0
        self.exp_running = False
        self.exp_waiters: list[tuple[int, Task]] = []
        self.exp_pending = 0
        self.exp_stoppers: list[Task | None] = [None] * ncpu
        self.stop_work = [0] * ncpu
        self.stop_parked = [False] * ncpu
        self.exp_task: Task | None = None
        # v6: the expedited-GP kthread worker (spawned at the first expedited GP), its one
        # queued work item, whether it sleeps for work or for the last quiescent state, and
        # the holder of rcu_state.exp_mutex
        self.exp_kworker: Task | None = None
        self.exp_kw_work = False
        self.exp_kw_idle = False
        self.exp_kw_waiting = False
        self.exp_holder: Task | None = None
        self.barrier_pending = 0
        self.barrier_waiter: Task | None = None

        self._install()
        self.nocb: Nocb | None = None
        if self.offloaded:
            from .nocb import Nocb

            self.nocb = Nocb(self)

    # ------------------------------------------------------------------ installation
    def _install(self) -> None:
        m = self.m
        m.register_softirq(RCU_SOFTIRQ, "RCU", self._softirq)
        m.tick_hooks.append(self._tick)
        m.switch_hooks.append(self._switch)
        m.idle_enter_hooks.append(self._idle_enter)
        m.idle_exit_hooks.append(self._idle_exit)
        if not self.v313 or not self.cfg.fast_no_hz:
            m.nohz_veto_hooks.append(self._needs_cpu)
        elif self.v39:
            m.nohz_veto_hooks.append(self._needs_cpu_v39)
        m.handle(CallRcu, self._h_call_rcu)
        m.handle(SynchronizeRcu, self._h_sync)
        m.handle(SynchronizeRcuExpedited, self._h_sync_exp)
        m.handle(RcuBarrier, self._h_barrier)
        m.handle(RcuReadLock, self._h_read_lock)
        m.handle(RcuReadUnlock, self._h_read_unlock)
        self._op_gp_wait = Call(self._gp_wait_request)
        self._op_gp_init = Call(self._gp_init)
        self._op_gp_cleanup = Call(self._gp_cleanup)
        self._op_fqs_wait = Call(self._fqs_wait)
        self._op_fqs_scan = Call(self._fqs_scan)
        self.gp_task = m.spawn(self._gp_kthread, "rcu_sched" if not self.cfg.preemptible else "rcu_preempt", kthread=True)
        if m.costs.other_call_rcu_per_s:
            self._others_gen = m.streams.get("other_call_rcu")
            self._others_mean = 1e9 / m.costs.other_call_rcu_per_s
            m.call_at(m.poisson_delay(self._others_gen, self._others_mean), self._other_call_rcu)

    def _other_call_rcu(self) -> None:
        """:attr:`Costs.other_call_rcu_per_s`: a call_rcu() of the machine's other activity (a
        daemon freeing something, a kworker) on a CPU drawn at random, from an interrupt there whose
        handler costs the call_rcu() (the activity itself is priced by
        Costs.idle_task_wakeups_per_s and the idle CPUs' timers). Its callback asks for a grace
        period like any other."""
        m = self.m
        m.interrupt(m.cpus[int(self._others_gen.integers(len(m.cpus)))], 0, self._other_callback)
        m.call_at(m.poisson_delay(self._others_gen, self._others_mean), self._other_call_rcu)

    def _other_callback(self, cpu: CPU) -> int:
        extra = self.queue(cpu, Callback(self.cfg.cb_invoke, None, self.cfg.lazy, self.env.now, cpu.index))
        if cpu.curr is None and not cpu.tick_on and self.m.kernel.nohz_idle and (not self.v313 or not self.cfg.fast_no_hz):
            # tick_nohz_irq_exit: rcu_needs_cpu() keeps the tick of an idle CPU that holds callbacks
            # (with RCU_FAST_NO_HZ the idle entry after the interrupt arms its wakeup instead)
            cpu._start_tick()
        return self.jit.apply(self.cfg.call_rcu) + extra

    # ------------------------------------------------------------------ GP numbers
    @property
    def in_progress(self) -> bool:
        return self.gpnum != self.completed

    def _future_gp(self) -> int:
        """The GP number that would serve a callback queued now (rcu_cbs_completed)."""
        return self.completed + (2 if self.in_progress else 1)

    def start_future_gp(self, c: int, cpu: CPU | None) -> int:
        """rcu_start_future_gp: note that GP ``c`` is needed; start one now if RCU is idle.
        Returns the cost of waking the GP kthread (0 if it needed no wake)."""
        if c > self.future_needed:
            self.future_needed = c
        if c <= self.completed:
            return 0
        if not self.in_progress:
            return self._request_gp(cpu)
        return 0  # the running GP's cleanup starts the next one

    def _request_gp(self, cpu: CPU | None) -> int:
        if self.gp_requested:
            return 0
        self.gp_requested = True
        if self.gp_task_sleeping:
            self.gp_task_sleeping = False
            assert self.gp_task is not None
            return self.m.wake(self.gp_task, cpu)
        return 0

    def _accelerate(self, rdp: RcuData, cpu: CPU | None) -> int:
        """rcu_accelerate_cbs: give the unassigned callbacks a GP number and ask for that GP."""
        if not rdp.nxt:
            return 0
        c = self._future_gp()
        if rdp.waiting and rdp.waiting[-1][0] == c:
            rdp.waiting[-1][1].extend(rdp.nxt)
        else:
            rdp.waiting.append([c, rdp.nxt])
        rdp.nxt = []
        return self.start_future_gp(c, cpu)

    def _advance(self, rdp: RcuData) -> bool:
        """rcu_advance_cbs: move callbacks whose GP has completed to done. True if any moved."""
        moved = False
        w = rdp.waiting
        while w and w[0][0] <= self.completed:
            rdp.done.extend(w.pop(0)[1])
            moved = True
        return moved

    # ------------------------------------------------------------------ the GP kthread
    def _gp_kthread(self, task: Task):  # type: ignore[no-untyped-def]
        while True:
            yield self._op_gp_wait
            yield self._op_gp_init
            self.gp_fqs_done = False
            first = True
            while True:
                yield self._op_fqs_wait  # timed sleep, or woken when the last QS arrives
                if self._gp_done():
                    break
                self._fqs_first = first
                yield self._op_fqs_scan
                first = False
                if self._gp_done():
                    break
            yield self._op_gp_cleanup

    def _gp_wait_request(self, cpu: CPU, t: Task) -> int:
        if self.gp_requested:
            self.gp_requested = False
            return 0
        self.gp_task_sleeping = True
        return BLOCKED

    def _gp_init(self, cpu: CPU, t: Task) -> int:
        now = self.env.now
        self.gp_requested = False  # rcu_gp_init clears ->gp_flags
        self.gpnum += 1
        self.gp_start_time = now
        mask = 0
        for c in self.m.cpus:
            mask |= 1 << c.index
        self.qsmask = mask
        # readers preempted before this GP began hold it up (rnp->gp_tasks)
        self.gp_blockers = dict(self.blocked_readers)
        # the kthread's own CPU notices the GP at once (note_gp_changes in rcu_gp_init)
        self._note_gp_changes(self.rdp[cpu.index])
        tr = self.tracer
        if tr is not None:
            tr.instant(self.gp_track, f"GP {self.gpnum} start", now, pid=2)
        return self.jit.apply(self.cfg.gp_init * self.nodes)

    def _gp_done(self) -> bool:
        return self.qsmask == 0 and not self.gp_blockers

    def _fqs_wait(self, cpu: CPU, t: Task) -> int:
        if self._gp_done():
            return 0
        j = self.fqs_first if not self.gp_fqs_done else self.fqs_next
        self.gp_fqs_done = True
        self.gp_wait_token += 1
        token = self.gp_wait_token
        period = self.m.tick_ns
        expires = self.env.now // period + max(1, j)
        self.gp_task_sleeping = False  # not waiting for a *request*
        self._fqs_sleeping = True

        def timeout(c: CPU) -> int:
            if self.gp_wait_token == token and self._fqs_sleeping:
                self._fqs_sleeping = False
                return self.m.wake(t, c)
            return 0

        cpu.add_jiffy_timer(expires, timeout)
        return BLOCKED

    _fqs_sleeping = False
    _fqs_first = True

    def _wake_gp_for_end(self, cpu: CPU | None) -> int:
        """The last quiescent state arrived (rcu_report_qs_rsp): wake the GP kthread."""
        if self._fqs_sleeping:
            self._fqs_sleeping = False
            self.gp_wait_token += 1
            assert self.gp_task is not None
            return self.m.wake(self.gp_task, cpu)
        return 0

    def force_quiescent_state(self, cpu: CPU | None) -> int:
        """Set the FQS flag: a GP kthread sleeping in its FQS wait scans at once (v3.9+).
        Lost if no grace period is running (rcu_gp_init clears the flags)."""
        if self.in_progress and self._fqs_sleeping:
            self._fqs_sleeping = False
            self.gp_wait_token += 1
            assert self.gp_task is not None
            return self.m.wake(self.gp_task, cpu)
        return 0

    def _fqs_scan(self, cpu: CPU, t: Task) -> int:
        """force_quiescent_state: report idle (dyntick) CPUs on their behalf."""
        self.fqs_scans += 1
        first = self._fqs_first
        n = 0
        mask = self.qsmask
        for c in self.m.cpus:
            bit = 1 << c.index
            if not mask & bit:
                continue
            n += 1
            rdp = self.rdp[c.index]
            if c.state == IDLE:
                self.qsmask &= ~bit
            elif first:
                rdp.epoch_snap = rdp.epoch
            elif rdp.epoch != rdp.epoch_snap:
                self.qsmask &= ~bit  # it passed through idle since the snapshot
        return self.jit.apply(self.cfg.fqs_per_cpu * n)

    def _gp_cleanup(self, cpu: CPU, t: Task) -> int:
        now = self.env.now
        self.completed = self.gpnum
        self.gps += 1
        lat = now - self.gp_start_time
        self.gp_latency_sum += lat
        self.gp_hist.add(lat)
        if self.record:
            self.log_gp.append((self.gpnum, self.gp_start_time, now))
        tr = self.tracer
        if tr is not None:
            tr.span(self.gp_track, f"GP {self.gpnum}", self.gp_start_time, now, pid=2, cat="gp")
        cost = 0
        # rcu_nocb_gp_cleanup: wake every kthread waiting for this GP
        for g in sorted(k for k in self.gp_waiters if k <= self.completed):
            for w in self.gp_waiters.pop(g):
                cost += self.m.wake(w, cpu)
        for g in sorted(k for k in self.sync_waiters_gp if k <= self.completed):
            for w in self.sync_waiters_gp.pop(g):
                cost += self._wake_waiter(w, cpu)
        # the kthread's own CPU notices the end at once and advances its callbacks
        rdp = self.rdp[cpu.index]
        self._note_gp_changes(rdp)
        if rdp.done and not rdp.offloaded and not self.fnh_throttle:
            # (with fnh_throttle, as in rcu_gp_cleanup: no invoke_rcu_core(); the idle path's
            # rcu_try_advance_all_cbs() or the next tick's rcu_pending() finds them)
            cpu.raise_softirq(RCU_SOFTIRQ)
        if self.future_needed > self.completed or (rdp.nxt and not rdp.offloaded):
            if rdp.nxt and not rdp.offloaded:
                self._accelerate(rdp, cpu)
            self.gp_requested = True
        return cost + self.jit.apply(self.cfg.gp_cleanup * self.nodes)

    # ------------------------------------------------------------------ quiescent states
    def _note_gp_changes(self, rdp: RcuData) -> None:
        if rdp.completed_seen != self.completed:
            rdp.completed_seen = self.completed
            if not rdp.offloaded:
                self._advance(rdp)
        if rdp.gp_seen != self.gpnum:
            rdp.gp_seen = self.gpnum
            rdp.passed_quiesce = False
            rdp.qs_pending = bool(self.qsmask & (1 << rdp.cpu))

    def _report_qs(self, cpu: CPU) -> int:
        rdp = self.rdp[cpu.index]
        rdp.qs_pending = False
        bit = 1 << cpu.index
        if self.qsmask & bit and rdp.gp_seen == self.gpnum and self.in_progress:
            self.qsmask &= ~bit
            if self._gp_done():
                return self._wake_gp_for_end(cpu)
        return 0

    def _switch(self, cpu: CPU, prev: Task | None, nxt: Task | None) -> None:
        rdp = self.rdp[cpu.index]
        rdp.passed_quiesce = True  # rcu_note_context_switch
        if self.cfg.preemptible and prev is not None and prev.data.get("rcu_nesting", 0) > 0 and prev.state == RUNNABLE:
            # a preempted reader joins the blocked-tasks list; it holds up the current GP
            # if this CPU still owed that GP a quiescent state
            self.blocked_readers[prev] = None
            if self.in_progress and rdp.qs_pending and self.qsmask & (1 << cpu.index):
                self.gp_blockers[prev] = None

    def _tick(self, cpu: CPU) -> None:
        """rcu_check_callbacks / rcu_sched_clock_irq."""
        rdp = self.rdp[cpu.index]
        t = cpu.curr
        if cpu.in_user() or cpu.was_idle():
            rdp.passed_quiesce = True
        elif self.cfg.preemptible and t is not None and not t.data.get("rcu_nesting", 0) and not t.preempt_count:
            rdp.passed_quiesce = True
        if self._pending(rdp):
            cpu.raise_softirq(RCU_SOFTIRQ)

    def _pending(self, rdp: RcuData) -> bool:
        """rcu_pending(): does this CPU have RCU work for its softirq?"""
        if rdp.qs_pending and rdp.passed_quiesce:
            return True
        if self.v39 and self.nocb_gp_request and not self.in_progress:
            return True  # cpu_needs_another_gp: a no-CBs kthread asked for a grace period
        if rdp.gp_seen != self.gpnum or rdp.completed_seen != self.completed:
            return True
        if rdp.offloaded:
            return False
        if rdp.done:
            return True
        if rdp.nxt and not self.in_progress:
            return True
        if self._needs_future_gp(rdp):
            return True
        return bool(rdp.waiting and rdp.waiting[0][0] <= self.completed)

    def _needs_future_gp(self, rdp: RcuData) -> bool:
        """The last test of v3.9-v3.13 cpu_needs_another_gp() (kernel/rcutree.c): RCU is idle
        but this CPU holds callbacks numbered for a grace period that has not completed."""
        return self.v313 and not self.in_progress and bool(rdp.waiting) and rdp.waiting[-1][0] > self.completed

    def _softirq(self, cpu: CPU) -> tuple[int, Callable[[CPU], None] | None]:
        """rcu_process_callbacks / rcu_core: notice GP changes, report a QS, request a GP for
        new callbacks, and invoke a batch of ready ones."""
        rdp = self.rdp[cpu.index]
        self._note_gp_changes(rdp)
        cost = self.cfg.rcu_core
        wake_cost = 0
        if not rdp.offloaded and rdp.nxt:
            wake_cost += self._accelerate(rdp, cpu)
        elif not rdp.offloaded and self._needs_future_gp(rdp):
            wake_cost += self._request_gp(cpu)  # __rcu_process_callbacks -> rcu_start_gp
        if self.v39 and self.nocb_gp_request and not self.in_progress:
            self.nocb_gp_request = False
            wake_cost += self._request_gp(cpu)
        report = rdp.qs_pending and rdp.passed_quiesce
        batch: list[Callback] = []
        if not rdp.offloaded and rdp.done:
            limit = self._batch_limit(rdp)
            done = rdp.done
            count = 0
            while done and count < limit:
                cb = done[0]
                take = min(cb.n, limit - count)
                if take < cb.n:
                    cb.n -= take  # the rest of the batch stays at the head
                    cb = Callback(cb.cost, None, cb.lazy, cb.queued, cb.cpu, cb.kind, take)
                else:
                    done.popleft()
                batch.append(cb)
                count += take
                cost += cb.cost * take
        if report:
            wake_cost += self._report_qs(cpu)

        def finish(c: CPU) -> None:
            for cb in batch:
                self._invoke(cb, c, "softirq")
            if rdp.done:
                c.raise_softirq(RCU_SOFTIRQ)

        return self.jit.apply(cost) + wake_cost, finish if batch else None

    def _batch_limit(self, rdp: RcuData) -> int:
        q = rdp.qlen()
        cfg = self.cfg
        if q > rdp.qlen_last + cfg.qhimark:
            rdp.unlimited = True
        elif q < cfg.qlowmark:
            rdp.unlimited = False
        rdp.qlen_last = q
        if rdp.unlimited:
            return 1 << 60
        if self.v313:
            return cfg.blimit
        return max(cfg.blimit, q >> cfg.rcu_divisor)

    def _invoke(self, cb: Callback, cpu: CPU, context: str) -> None:
        self.cbs_invoked += cb.n
        if context == "softirq":
            self.cbs_invoked_softirq += cb.n
        else:
            self.cbs_invoked_kthread += cb.n
        if self.record:
            self.log_cb.append((cb.queued, self.env.now, context, cb.kind, cb.cpu))
        if cb.fn is not None:
            cb.fn(cpu)

    # ------------------------------------------------------------------ idle
    def _idle_enter_v39(self, cpu: CPU, rdp: RcuData) -> None:
        """The first RCU_FAST_NO_HZ (v3.8-3.9 rcu_prepare_for_idle, kernel/rcutree_plugin.h
        v3.9): a CPU going idle with callbacks pushes the RCU state machine (note a QS, force
        a quiescent-state scan, run the RCU softirq, which starts a GP if none runs and
        invokes what is ready): the dyntick_drain counter allows RCU_IDLE_FLUSHES pushes, the
        last RCU_IDLE_OPT_FLUSHES only while RCU still has work for the CPU; then the CPU
        either sleeps with its callbacks until a timer at the next multiple of
        RCU_IDLE_GP_DELAY jiffies ("Dyntick with callbacks") or keeps its tick for the rest of
        the jiffy ("Begin holdoff"). A CPU without callbacks resets the machine."""
        period = self.m.tick_ns
        j = self.env.now // period
        if not rdp.has_cbs():
            rdp.holdoff = j - 1
            rdp.drain = 0
            return
        if rdp.holdoff == j:
            return  # "In holdoff": rcu_needs_cpu() kept the tick
        cfg = self.cfg
        if rdp.drain <= 0:
            rdp.drain = cfg.rcu_idle_flushes  # first time through
        elif rdp.drain <= cfg.rcu_idle_opt_flushes and not self._pending(rdp) and not cpu.softirq_pending:
            # "Dyntick with callbacks": timer at round_up(jiffies + 4, 4)
            rdp.drain = 0
            rdp.holdoff = j
            self._arm_idle_gp_timer(cpu, rdp, j)
            return
        else:
            rdp.drain -= 1
            if rdp.drain <= 0:
                rdp.holdoff = j  # "Begin holdoff"
                cpu.raise_softirq(RCU_SOFTIRQ)
                return
        # push: a QS for this CPU, force the scan, and run the RCU core
        rdp.passed_quiesce = True
        self.force_quiescent_state(cpu)
        if rdp.has_cbs():
            cpu.raise_softirq(RCU_SOFTIRQ)

    def _arm_idle_gp_timer(self, cpu: CPU, rdp: RcuData, j: int) -> None:
        """The RCU_FAST_NO_HZ wakeup of an idle CPU holding callbacks (idle_gp_timer in v3.9,
        the tick-stop horizon of rcu_needs_cpu in v3.13): round_up(jiffies + delay, delay)."""
        delay = self.cfg.rcu_idle_gp_delay
        expires = -(-(j + delay) // delay) * delay
        if rdp.fnh_armed < 0 or rdp.fnh_armed > expires or rdp.fnh_armed <= j:
            rdp.fnh_armed = expires

            def fire(c: CPU) -> int:
                if rdp.fnh_armed == expires:
                    rdp.fnh_armed = -1
                    rdp.fnh_fn = None
                return 0  # the tick itself runs rcu_check_callbacks

            rdp.fnh_fn = fire
            cpu.add_jiffy_timer(expires, fire)

    def _idle_enter(self, cpu: CPU) -> None:
        rdp = self.rdp[cpu.index]
        rdp.epoch += 1
        if rdp.offloaded or not self.v313 or not self.cfg.fast_no_hz:
            return
        if self.v39:
            # x86 cpu_idle (v3.9): tick_nohz_idle_enter() asks rcu_needs_cpu() for the
            # tick-stop horizon *before* rcu_idle_enter() runs rcu_prepare_for_idle(); it
            # keeps the tick (up to the next one, where irq exit asks again) only in a
            # holdoff jiffy
            j = self.env.now // self.m.tick_ns
            rdp.tick_keep = j + 1 if rdp.holdoff == j and rdp.has_cbs() else -1
            self._idle_enter_v39(cpu, rdp)
            return
        if not rdp.has_cbs():
            return
        # v3.13 RCU_FAST_NO_HZ. rcu_needs_cpu() (asked when the tick is about to stop)
        # advances callbacks if a GP ended; ready ones keep the tick and are invoked now;
        # otherwise it records last_accelerate = jiffies and asks for a wakeup at
        # round_up(jiffies + rcu_idle_gp_delay, rcu_idle_gp_delay). rcu_prepare_for_idle()
        # then skips its acceleration, since it was "already done" this jiffy: callbacks
        # queued just before idling wait for that wakeup (or any other) to get a GP.
        period = self.m.tick_ns
        j = self.env.now // period
        if not self.fnh_throttle or self._try_advance_all(rdp, j):
            self._note_gp_changes(rdp)
            if rdp.done:
                cpu.raise_softirq(RCU_SOFTIRQ)
                return
        self._arm_idle_gp_timer(cpu, rdp, j)

    @staticmethod
    def _try_advance_all(rdp: RcuData, j: int) -> bool:
        """The throttle of rcu_try_advance_all_cbs() (2015 kernels): "exit early if we advanced
        recently", i.e. already in jiffy ``j``; otherwise record ``j`` and go ahead."""
        if rdp.last_advance_all == j:
            return False
        rdp.last_advance_all = j
        return True

    def _idle_exit(self, cpu: CPU) -> None:
        rdp = self.rdp[cpu.index]
        rdp.epoch += 1
        throttle = self.fnh_throttle and not rdp.offloaded
        if (self.v39 or throttle) and rdp.fnh_fn is not None:
            # v3.9: rcu_cleanup_after_idle's del_timer(idle_gp_timer); fnh_throttle: the tick
            # restarts, so the next idle entry computes a new wakeup (tick_nohz_stop_sched_tick)
            cpu.cancel_jiffy_timer(rdp.fnh_armed, rdp.fnh_fn)
            rdp.fnh_armed = -1
            rdp.fnh_fn = None
        if throttle:
            # rcu_cleanup_after_idle (idle exit, or rcu_irq_enter from idle): at most once a jiffy,
            # with or without callbacks
            if not self._try_advance_all(rdp, self.env.now // self.m.tick_ns) or not rdp.has_cbs():
                return
            self._note_gp_changes(rdp)
            if rdp.done:
                cpu.raise_softirq(RCU_SOFTIRQ)
            return
        if self.v313 and not rdp.offloaded and rdp.has_cbs():
            # rcu_cleanup_after_idle: advance, and invoke what became ready
            self._note_gp_changes(rdp)
            if rdp.done:
                cpu.raise_softirq(RCU_SOFTIRQ)

    def _needs_cpu_v39(self, cpu: CPU) -> bool:
        """v3.9 rcu_needs_cpu(), as decided at the CPU's last idle entry (see _idle_enter):
        does this tick of an idle CPU still run?"""
        return self.rdp[cpu.index].tick_keep == self.env.now // self.m.tick_ns

    def _needs_cpu(self, cpu: CPU) -> bool:
        """rcu_needs_cpu() without RCU_FAST_NO_HZ (v6, or v3.13 built without it): an idle
        CPU with non-offloaded callbacks keeps its tick."""
        rdp = self.rdp[cpu.index]
        return not rdp.offloaded and rdp.has_cbs()

    # ------------------------------------------------------------------ call_rcu
    def queue(self, cpu: CPU, cb: Callback, waker: CPU | None = None) -> int:
        """__call_rcu onto ``cpu``'s lists, from ``waker`` (the CPU running the caller; the
        same CPU unless rcu_barrier posts remotely); returns the caller's extra cost."""
        self.cbs_queued += cb.n
        waker = cpu if waker is None else waker
        rdp = self.rdp[cpu.index]
        if rdp.offloaded:
            assert self.nocb is not None
            return self.nocb.enqueue(waker, rdp, cb)
        rdp.nxt.append(cb)
        if rdp.qlen() > rdp.qlen_last + self.cfg.qhimark:
            # __call_rcu_core: too many callbacks: force a GP now
            return self._accelerate(rdp, waker)
        return 0

    def _h_call_rcu(self, cpu: CPU, t: Task, op: CallRcu) -> int:
        cost = op.cost if op.cost is not None else self.cfg.cb_invoke
        lazy = self.cfg.lazy if op.lazy is None else (op.lazy and self.cfg.lazy)
        now = self.env.now
        if op.fn is None:
            extra = self.queue(cpu, Callback(cost, None, lazy, now, cpu.index, n=op.count))
        else:
            extra = 0
            for _ in range(op.count):
                extra += self.queue(cpu, Callback(cost, op.fn, lazy, now, cpu.index))
        return self.jit.apply(self.cfg.call_rcu * op.count) + extra

    # ------------------------------------------------------------------ synchronize_rcu
    def _blocking_is_gp(self) -> bool:
        """rcu_blocking_is_gp(): one online CPU and no preemptible RCU."""
        return self.ncpu == 1 and not self.cfg.preemptible

    def _h_sync(self, cpu: CPU, t: Task, op: SynchronizeRcu) -> int:
        if self._blocking_is_gp():
            return self.costs.syscall  # might_sleep() and return
        if self.cfg.rcu_expedited and not self.cfg.rcu_normal:
            return self._expedited(cpu, t)
        return self._normal_sync(cpu, t)

    def _wake_waiter(self, t: Task, cpu: CPU | None) -> int:
        """complete(): the flag makes a wakeup that arrives before the waiter has blocked
        (its enqueue was still spending CPU time) count, instead of being lost."""
        t.data["rcu_woken"] = True
        return self.m.wake(t, cpu)

    def _normal_sync(self, cpu: CPU, t: Task) -> int:
        self.syncs += 1
        start = self.env.now
        t.data["rcu_woken"] = False
        if self.cfg.wake_from_gp and not self.v313:
            # the GP machinery wakes the waiter at the end of the next full GP
            c = self._future_gp()
            self.sync_waiters_gp.setdefault(c, []).append(t)
            extra = self.start_future_gp(c, cpu)
            t.post = lambda c2, task: self._block_sync(task, start)
            return self.jit.apply(self.cfg.call_rcu) + extra

        def wakeme(c: CPU) -> None:
            self._wake_waiter(t, c)

        # wait_rcu_gp(): an on-stack callback whose invocation completes the wait
        extra = self.queue(cpu, Callback(self.costs.wakeup, wakeme, False, start, cpu.index, kind="wakeme"))
        t.post = lambda c2, task: self._block_sync(task, start)
        return self.jit.apply(self.cfg.call_rcu) + extra

    def _block_sync(self, t: Task, start: int) -> int:
        if t.data.pop("rcu_woken", False):
            return self._sync_done(t, start)
        t.post = lambda c, task: self._sync_done(task, start)
        return BLOCKED

    def _sync_done(self, t: Task, start: int) -> int:
        d = self.env.now - start
        self.sync_ns += d
        self.sync_hist.add(d)
        return 0

    # ------------------------------------------------------------------ expedited
    def _h_sync_exp(self, cpu: CPU, t: Task, op: SynchronizeRcuExpedited) -> int:
        if self.cfg.rcu_normal:
            if self._blocking_is_gp():
                return self.costs.syscall
            return self._normal_sync(cpu, t)
        return self._expedited(cpu, t)

    def _exp_request(self, t: Task) -> int:
        """Queue ``t`` for the first expedited GP that starts after its request
        (``->expedited_sequence``: the next one, or the one after a GP in flight); returns the
        request's time."""
        self.syncs += 1
        # a request is served by an expedited GP that starts after it (->expedited_sequence)
        need = self.exp_seq_done + (2 if self.exp_running else 1)
        t.data["rcu_woken"] = False
        self.exp_waiters.append((need, t))
        return self.env.now

    def _expedited(self, cpu: CPU, t: Task) -> int:
        if not self.v313:
            if self._blocking_is_gp():
                return self.costs.syscall
            return self._expedited_v6(cpu, t)
        start = self._exp_request(t)
        extra = 0
        if not self.exp_running:
            extra = self._exp_start(cpu)
        t.post = lambda c, task: self._block_sync(task, start)
        return self.jit.apply(self.cfg.call_rcu) + extra

    # v6 ------------------------------------------------------------------------------
    def _expedited_v6(self, cpu: CPU, t: Task) -> int:
        """synchronize_rcu_expedited() of Linux 6.x (kernel/rcu/tree_exp.h).

        The requester takes a sequence snapshot and goes through ``exp_funnel_lock()``: if an
        expedited GP that started after its request will serve it, or ``rcu_state.exp_mutex`` is
        held, it sleeps (on ``rnp->exp_wq[]``, or in ``mutex_lock``); otherwise it holds the
        mutex, starts the GP sequence and does *not* drive the GP itself:
        ``synchronize_rcu_expedited_queue_work()`` queues the work on the expedited-GP worker
        and the requester sleeps in ``wait_event(rnp->exp_wq[...])``. The worker runs
        ``wait_rcu_exp_gp()`` -> ``rcu_exp_sel_wait_wake()``: ``sync_rcu_exp_select_cpus()``
        (its own CPU and idle CPUs count as quiescent, the others get ``rcu_exp_handler`` IPIs;
        with one leaf rcu_node it does this inline rather than on a per-node worker), then
        ``rcu_exp_wait_wake()``: it sleeps until the last report wakes it (``swake_up_one`` of
        ``rcu_state.expedited_wq`` in ``__rcu_report_exp_rnp``) and ``wake_up_all()``s the
        waiters. The requester wakes, releases ``exp_mutex`` and so lets the next requester
        (woken by the mutex) start the next GP.

        The worker: since v6.9 (commit "rcu/exp: Remove rcu_par_gp_wq") always the
        ``rcu_exp_gp_kthread_worker`` kthread_worker (``rcu_start_exp_gp_kworker()`` in
        kernel/rcu/tree.c), unbound, SCHED_OTHER unless CONFIG_RCU_EXP_KTHREAD makes it
        SCHED_FIFO at ``kthread_prio`` (knob ``exp_kthread``). Before v6.9 without that option
        the work went to a kworker of the ``rcu_gp_wq`` workqueue, bound to the requester's CPU;
        that variant is not modelled. The worker is spawned at the first expedited GP (the
        kernel creates it at boot), so that runs without expedited GPs are unaffected.
        """
        start = self._exp_request(t)
        extra = 0
        if self.exp_holder is None:  # exp_funnel_lock() got exp_mutex
            self.exp_holder = t
            extra = self._exp_queue_work(cpu)
        t.post = lambda c, task: self._exp_wait(c, task, start)
        return self.jit.apply(self.cfg.call_rcu) + extra

    def _exp_queue_work(self, cpu: CPU) -> int:
        """rcu_exp_gp_seq_start() and kthread_queue_work() of the GP's work: wake the worker."""
        self.exp_running = True
        self.exp_gps += 1
        self.exp_started_at = self.env.now
        self.exp_kw_work = True
        m = self.m
        if self.exp_kworker is None:
            if self.cfg.exp_kthread:
                policy, prio = "fifo", 1  # kthread_prio: 1 with CONFIG_RCU_BOOST (kernel/rcu/tree.c)
            else:
                policy, prio = "other", 0
            self.exp_kworker = m.spawn(
                self._exp_kworker_script, "rcu_exp_gp_kthread_worker", policy=policy, prio=prio, kthread=True, from_cpu=cpu
            )
            return 0
        if self.exp_kw_idle:
            self.exp_kw_idle = False
            return m.wake(self.exp_kworker, cpu)
        return 0

    def _exp_wait(self, cpu: CPU, t: Task, start: int) -> int:
        """The requester's wait_event(), or its mutex_lock() in exp_funnel_lock()."""
        if t.data.pop("exp_start", False):
            # exp_mutex handed over: this requester's GP has not started yet; start it
            t.post = lambda c, task: self._exp_wait(c, task, start)
            return self._exp_queue_work(cpu)
        if t.data.pop("rcu_woken", False):
            cost = self._sync_done(t, start)
            if self.exp_holder is t:
                cost += self._exp_unlock(cpu)
            return cost
        t.post = lambda c, task: self._exp_wait(c, task, start)
        return BLOCKED

    def _exp_unlock(self, cpu: CPU) -> int:
        """mutex_unlock(&rcu_state.exp_mutex): the first requester still waiting (it arrived
        during or after the GP that just ended, so it needs the next one) takes the mutex."""
        self.exp_holder = None
        if not self.exp_waiters:
            return 0
        w = self.exp_waiters[0][1]
        self.exp_holder = w
        w.data["exp_start"] = True
        return self.m.wake(w, cpu)

    def _exp_kworker_script(self, task: Task):  # type: ignore[no-untyped-def]
        """The expedited-GP worker: wait_rcu_exp_gp() for each queued work item."""
        op_work = Call(self._exp_kw_wait_work)
        op_select = Call(self._exp_kw_select)
        op_wait = Call(self._exp_kw_wait_done)
        op_wake = Call(self._exp_kw_wake)
        while True:
            yield op_work
            if not self.exp_kw_work:
                continue
            self.exp_kw_work = False
            yield op_select
            while self.exp_pending > 0:
                yield op_wait
            yield op_wake

    def _exp_kw_wait_work(self, cpu: CPU, t: Task) -> int:
        if self.exp_kw_work:
            return 0
        self.exp_kw_idle = True
        return BLOCKED

    def _exp_kw_select(self, cpu: CPU, t: Task) -> int:
        """sync_rcu_exp_select_cpus(): the worker's CPU and idle CPUs are quiescent; IPI the rest."""
        m = self.m
        self.exp_pending = 1  # the worker's own CPU, reported below
        for c in m.cpus:
            if c is cpu or c.state == IDLE:
                continue
            self.exp_pending += 1
            m.send_ipi(cpu, c, self._exp_ipi, name="rcu exp ipi")
        return self.jit.apply(self.cfg.exp_handler) + self._exp_report(cpu)

    def _exp_kw_wait_done(self, cpu: CPU, t: Task) -> int:
        """synchronize_rcu_expedited_wait(): sleep until the last quiescent state is reported."""
        if self.exp_pending <= 0:
            return 0
        self.exp_kw_waiting = True
        return BLOCKED

    def _exp_kw_wake(self, cpu: CPU, t: Task) -> int:
        """rcu_exp_wait_wake(): end the GP sequence and wake_up_all() the requesters it serves."""
        return self._exp_gp_end(cpu)

    def _exp_gp_end(self, cpu: CPU) -> int:
        """The expedited GP is over: advance the sequence, trace it, wake every requester it
        serves (a later request stays in ``exp_waiters``); the cost of the wakeups."""
        self.exp_seq_done += 1
        self.exp_running = False
        tr = self.tracer
        if tr is not None:
            tr.span(self.gp_track, f"expedited GP {self.exp_seq_done}", self.exp_started_at, self.env.now, pid=2, cat="exp")
        cost = 0
        keep = []
        for need, w in self.exp_waiters:
            if need <= self.exp_seq_done:
                cost += self._wake_waiter(w, cpu)
            else:
                keep.append((need, w))
        self.exp_waiters = keep
        return cost

    # v3.13 -----------------------------------------------------------------------------
    def _exp_start(self, cpu: CPU) -> int:
        """v3.9/v3.13: begin an expedited GP from the requester (or the last reporter):
        try_stop_cpus(), each CPU's SCHED_FIFO stopper thread must run."""
        self.exp_running = True
        self.exp_gps += 1
        m = self.m
        self.exp_started_at = self.env.now
        # try_stop_cpus(): each CPU's SCHED_FIFO stopper thread must run
        self.exp_pending = len(m.cpus)
        cost = 0
        for c in m.cpus:
            self.stop_work[c.index] += 1
            st = self.exp_stoppers[c.index]
            if st is None:
                self.exp_stoppers[c.index] = m.spawn(
                    self._stopper_script(c.index),
                    f"migration/{c.index}",
                    policy="fifo",
                    prio=99,
                    affinity=(c.index,),
                    kthread=True,
                )
            elif self.stop_parked[c.index]:
                self.stop_parked[c.index] = False
                cost += m.wake(st, cpu)
        return cost

    def _stopper_script(self, idx: int):  # type: ignore[no-untyped-def]
        """The per-CPU stopper kthread (kernel/stop_machine.c): runs queued stop work."""

        def park(c: CPU, t: Task) -> int:
            if self.stop_work[idx]:
                return 0
            self.stop_parked[idx] = True
            return BLOCKED

        def script(task: Task):  # type: ignore[no-untyped-def]
            work = CpuWork(self.cfg.exp_handler, user=False)
            report = Call(lambda c, t: self._exp_report(c))
            op_park = Call(park)
            while True:
                while self.stop_work[idx]:
                    self.stop_work[idx] -= 1
                    yield work
                    yield report
                yield op_park

        return script

    def _exp_ipi(self, cpu: CPU) -> int:
        """rcu_exp_handler: report now unless the CPU is inside a reader."""
        t = cpu.curr
        if t is not None and t.data.get("rcu_nesting", 0) > 0:
            self.rdp[cpu.index].exp_deferred = True  # reported by rcu_read_unlock()
            return self.jit.apply(self.cfg.exp_handler)
        return self.jit.apply(self.cfg.exp_handler) + self._exp_report(cpu)

    def _exp_report(self, cpu: CPU) -> int:
        self.exp_pending -= 1
        self.rdp[cpu.index].passed_quiesce = True  # a stopper switch / IPI is also a QS
        if self.exp_pending > 0:
            return 0
        if not self.v313:
            # __rcu_report_exp_rnp(): the last report wakes the worker waiting for it
            if self.exp_kw_waiting:
                self.exp_kw_waiting = False
                assert self.exp_kworker is not None
                return self.m.wake(self.exp_kworker, cpu)
            return 0
        cost = self._exp_gp_end(cpu)
        if self.exp_waiters:
            cost += self._exp_start(cpu)
        return cost

    # ------------------------------------------------------------------ rcu_barrier
    def _h_barrier(self, cpu: CPU, t: Task, op: RcuBarrier) -> int:
        self.barriers += 1
        start = self.env.now
        count = [1]

        def arrive(c: CPU) -> None:
            count[0] -= 1
            if count[0] == 0:
                if self.record:
                    self.log_barrier.append((start, self.env.now))
                self.m.wake(t, c)

        cost = 0
        for c in self.m.cpus:
            rdp = self.rdp[c.index]
            cb = Callback(self.costs.wakeup, arrive, False, start, c.index, kind="barrier")
            if self.v313:
                if rdp.offloaded:
                    count[0] += 1
                    cost += self.queue(c, cb, cpu)  # even when the CPU has no callbacks
                elif rdp.has_cbs():
                    count[0] += 1
                    cost += self.queue(c, cb, cpu)  # IPI'd CPU posts it behind its own callbacks
                    if c is not cpu:
                        self.m.send_ipi(cpu, c, None, name="rcu_barrier ipi")
            else:
                if rdp.offloaded:
                    assert self.nocb is not None
                    if self.nocb.has_cbs(rdp):
                        count[0] += 1
                        cost += self.nocb.entrain(cpu, rdp, cb)
                elif rdp.has_cbs():
                    count[0] += 1
                    self._entrain(rdp, cb)
                    if c is not cpu:
                        self.m.send_ipi(cpu, c, None, name="rcu_barrier ipi")
        count[0] -= 1
        if count[0] == 0:
            if self.record:
                self.log_barrier.append((start, self.env.now))
            return self.costs.syscall
        return BLOCKED

    def _entrain(self, rdp: RcuData, cb: Callback) -> None:
        """rcu_barrier_entrain: behind the last callback, in its segment (no extra GP)."""
        self.cbs_queued += 1
        if rdp.nxt:
            rdp.nxt.append(cb)
        elif rdp.waiting:
            rdp.waiting[-1][1].append(cb)
        else:
            rdp.done.append(cb)

    # ------------------------------------------------------------------ readers
    def _h_read_lock(self, cpu: CPU, t: Task, op: RcuReadLock) -> int:
        n = t.data.get("rcu_nesting", 0)
        t.data["rcu_nesting"] = n + 1
        if n == 0:
            t.data["rcu_read_start"] = self.env.now
        if not self.cfg.preemptible:
            t.preempt_count += 1
        return 0

    def _h_read_unlock(self, cpu: CPU, t: Task, op: RcuReadUnlock) -> int:
        n = t.data.get("rcu_nesting", 0)
        if n <= 0:
            from sim.errors import ScenarioError

            raise ScenarioError(f"task {t.name!r}: rcu_read_unlock() without rcu_read_lock()")
        t.data["rcu_nesting"] = n - 1
        if not self.cfg.preemptible:
            t.preempt_count -= 1
        cost = 0
        if n == 1:
            if self.record:
                self.log_read.append((t.data["rcu_read_start"], self.env.now))
            rdp = self.rdp[cpu.index]
            if rdp.exp_deferred:
                rdp.exp_deferred = False
                cost += self._exp_report(cpu)
            if t in self.blocked_readers:
                del self.blocked_readers[t]
                if t in self.gp_blockers:
                    del self.gp_blockers[t]
                    if self.in_progress and self._gp_done():
                        cost += self._wake_gp_for_end(cpu)
        return cost

    # ------------------------------------------------------------------ results
    def metrics(self) -> dict[str, float]:
        nan = float("nan")
        return {
            "grace_periods": float(self.gps),
            "gp_latency_mean_ms": self.gp_latency_sum / self.gps / 1e6 if self.gps else nan,
            "gp_latency_p90_ms": self.gp_hist.percentile(90) / 1e6 if self.gps else nan,
            "callbacks_invoked": float(self.cbs_invoked),
            "callbacks_in_softirq": float(self.cbs_invoked_softirq),
            "callbacks_in_kthreads": float(self.cbs_invoked_kthread),
            "synchronize_calls": float(self.syncs),
            "synchronize_mean_ms": self.sync_ns / self.syncs / 1e6 if self.syncs else nan,
            "expedited_gps": float(self.exp_gps),
            "fqs_scans": float(self.fqs_scans),
            "barriers": float(self.barriers),
        }
