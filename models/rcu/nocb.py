"""Callback offloading (NOCB): the rcuo kthreads of v3.13 and the rcuog/rcuoc kthreads of v6.

Sources: v3.13 kernel/rcu/tree_plugin.h (``rcu_nocb_kthread``, ``rcu_nocb_wait_gp``,
``__call_rcu_nocb_enqueue``) and today's kernel/rcu/tree_nocb.h (``nocb_gp_wait``,
``nocb_cb_wait``, ``rcu_nocb_try_bypass``), summarised in docs/kernel/rcu-nocb-netns.md §3.

Every kthread here is an ordinary unbound SCHED_OTHER task: it is woken (paying a wakeup, an
IPI and an idle exit when it lands on an idle CPU), waits in run queues and context-switches
like any task. Nothing charges a "NOCB penalty": what offloading costs is what these
kthreads, their wakeups and their grace-period waits cost on the simulated CPUs.

* **v3.13** (``era = "v3.13"``): one ``rcuos/N`` kthread per offloaded CPU. ``call_rcu`` appends
  to the CPU's nocb list and wakes the kthread if the list was empty. The kthread takes the
  whole list, computes the GP number that would serve it, asks for that GP and sleeps until it
  ends (every GP end wakes all kthreads waiting for it), then invokes the batch, in order,
  without a batch limit. Callbacks that arrive meanwhile wait for the next round: their GP is
  requested only after the current batch has been invoked.
* **v6** (``era = "v6"``): one ``rcuog/L`` kthread per group of ``rcu_nocb_gp_stride`` CPUs and
  one ``rcuoc/N`` per offloaded CPU. ``call_rcu`` goes to the CPU's segmented list (or its
  bypass list past ``16 * 1000 / HZ`` enqueues per jiffy, or when lazy) and wakes the group's
  rcuog if the list had nothing pending. rcuog advances and accelerates every CPU of its group,
  wakes the rcuoc of CPUs with ready callbacks and sleeps until the earliest needed GP ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.machine import CPU
from sim.ops import BLOCKED, Call
from sim.task import Task

if TYPE_CHECKING:
    from .tree import Callback, Rcu, RcuData


def rcu_cb_part(cb: Callback, n: int) -> Callback:
    from .tree import Callback as _Callback

    return _Callback(cb.cost, None, cb.lazy, cb.queued, cb.cpu, cb.kind, n)


class Nocb:
    """The offload kthreads of one machine, for the configured era."""

    def __init__(self, rcu: Rcu) -> None:
        self.rcu = rcu
        self.m = rcu.m
        self.v313 = rcu.v313
        self.jit = rcu.jit
        m = self.m
        self.wakeups = 0
        self.kthread_runs = 0
        self.bypass_flushes = 0
        n = len(m.cpus)
        self.rcuo: list[Task | None] = [None] * n
        self.sleeping: dict[Task, str] = {}  # task -> what it sleeps on ("list", "gp", "cbs")
        if self.v313:
            for c in rcu.offloaded:
                self.rcuo[c] = m.spawn(self._bind(self._rcuo_v313, c), f"rcuos/{c}", kthread=True)
            self.groups: list[list[int]] = []
            self.rcuog: list[Task] = []
            self.group_of: dict[int, int] = {}
        else:
            stride = rcu.cfg.gp_stride(n)
            groups: dict[int, list[int]] = {}
            for c in rcu.offloaded:
                groups.setdefault(c // stride, []).append(c)
            self.groups = [groups[k] for k in sorted(groups)]
            self.group_of = {c: gi for gi, g in enumerate(self.groups) for c in g}
            self.rcuog = [m.spawn(self._bind(self._rcuog, gi), f"rcuog/{g[0]}", kthread=True) for gi, g in enumerate(self.groups)]
            for c in rcu.offloaded:
                self.rcuo[c] = m.spawn(self._bind(self._rcuoc, c), f"rcuoc/{c}", kthread=True)
            self.rcuog_wake_pending = [False] * len(self.groups)
            self.bypass_timer: list[int | None] = [None] * len(self.groups)
            self.rcuog_gp_wait = [0] * len(self.groups)
        self.nobypass_lim = 16 * 1000 // m.kernel.hz  # nocb_nobypass_lim_per_jiffy
        self.lazy_jiffies = max(1, rcu.cfg.lazy_flush // m.tick_ns)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _bind(fn: Any, arg: int) -> Any:
        return lambda task: fn(task, arg)

    def _sleep(self, t: Task, what: str) -> int:
        self.sleeping[t] = what
        return BLOCKED

    def _wake(self, t: Task, what: str | None, cpu: CPU | None) -> int:
        """Wake ``t`` if it sleeps (on ``what``, or on anything if None)."""
        got = self.sleeping.get(t)
        if got is None or (what is not None and got != what):
            return 0
        del self.sleeping[t]
        self.wakeups += 1
        return self.m.wake(t, cpu)

    CHUNK = 32  # callbacks per invocation step: the kthread's cond_resched() points

    def _invoke_ops(self, cb: Callback):  # type: ignore[no-untyped-def]
        """The ops that invoke ``cb`` in kthread context (no batch limit, but a preemption
        point every CHUNK callbacks)."""
        rcu = self.rcu
        left = cb.n
        while left > 0:
            take = min(left, self.CHUNK)
            left -= take
            part = cb if take == cb.n else rcu_cb_part(cb, take)

            def run(c: CPU, t: Task, part: Callback = part) -> int:
                def effect(c2: CPU, task: Task) -> int:
                    rcu._invoke(part, c2, "kthread")
                    return 0

                t.post = effect
                return rcu.jit.apply(part.cost * part.n) if part.cost else 1

            yield Call(run)

    def has_cbs(self, rdp: RcuData) -> bool:
        return bool(rdp.has_cbs() or rdp.bypass or rdp.nocb_list)

    # ------------------------------------------------------------------ enqueue
    def enqueue(self, cpu: CPU, rdp: RcuData, cb: Callback) -> int:
        if self.v313:
            was_empty = not rdp.nocb_list
            rdp.nocb_list.append(cb)
            t = self.rcuo[rdp.cpu]
            assert t is not None
            if was_empty:
                return self._wake(t, "list", cpu)  # wake_up(nocb_wq): only if it sleeps there
            if len(rdp.nocb_list) > rdp.qlen_last + self.rcu.cfg.qhimark:
                rdp.qlen_last = len(rdp.nocb_list)
                return self._wake(t, None, cpu)
            return 0
        return self._enqueue_v6(cpu, rdp, cb)

    def _pending_nothing(self, rdp: RcuData) -> bool:
        return not (rdp.nxt or rdp.waiting)

    def _enqueue_v6(self, cpu: CPU, rdp: RcuData, cb: Callback) -> int:
        """rcu_nocb_try_bypass + __call_rcu_nocb_wake."""
        period = self.m.tick_ns
        j = self.m.env.now // period
        if rdp.nb_jiffy != j:
            rdp.nb_jiffy = j
            rdp.nb_count = 0
        rdp.nb_count += 1
        cfg = self.rcu.cfg
        if not cb.lazy and rdp.nb_count <= self.nobypass_lim:
            nothing = self._pending_nothing(rdp)
            self._flush_bypass(rdp)
            rdp.nxt.append(cb)
            return self._wake_gp(cpu, rdp) if nothing else 0
        if rdp.bypass and (
            (not rdp.bypass_lazy_only and j > rdp.bypass_first)
            or (rdp.bypass_lazy_only and j >= rdp.bypass_first + self.lazy_jiffies)
            or len(rdp.bypass) >= cfg.qhimark
        ):
            nothing = self._pending_nothing(rdp)
            self._flush_bypass(rdp)
            rdp.nxt.append(cb)
            return self._wake_gp(cpu, rdp) if nothing else 0
        was_empty = not rdp.bypass
        joins_lazy = rdp.bypass and rdp.bypass_lazy_only and not cb.lazy
        if was_empty:
            rdp.bypass_first = j
            rdp.bypass_lazy_only = True
        rdp.bypass.append(cb)
        if not cb.lazy:
            rdp.bypass_lazy_only = False
        if (was_empty or joins_lazy) and self._pending_nothing(rdp):
            # deferred wake of rcuog: +2 jiffies for a bypass, +lazy_flush for lazy only
            delay = self.lazy_jiffies if rdp.bypass_lazy_only else 2
            gi = self.group_of[rdp.cpu]
            cpu.add_jiffy_timer(j + delay, lambda c: self._wake_gp(c, rdp, gi))
        return 0

    def _flush_bypass(self, rdp: RcuData) -> None:
        if rdp.bypass:
            self.bypass_flushes += 1
            rdp.nxt.extend(rdp.bypass)
            rdp.bypass = []
            rdp.bypass_lazy_only = True

    def _wake_gp(self, cpu: CPU | None, rdp: RcuData, gi: int | None = None) -> int:
        g = self.group_of[rdp.cpu] if gi is None else gi
        t = self.rcuog[g]
        if self.sleeping.get(t) == "list":
            return self._wake(t, "list", cpu)
        self.rcuog_wake_pending[g] = True  # it is busy: it will rescan
        return 0

    def entrain(self, cpu: CPU, rdp: RcuData, cb: Callback) -> int:
        """v6 rcu_barrier on an offloaded CPU: flush the bypass, entrain behind the last
        callback, and make sure rcuog looks at the CPU."""
        self._flush_bypass(rdp)
        nothing = self._pending_nothing(rdp) and not rdp.done
        self.rcu._entrain(rdp, cb)
        if rdp.done and not (rdp.nxt or rdp.waiting):
            t = self.rcuo[rdp.cpu]
            assert t is not None
            return self._wake(t, "cbs", cpu)
        return self._wake_gp(cpu, rdp) if nothing or rdp.nxt else 0

    # ------------------------------------------------------------------ v3.13 rcuo
    def _rcuo_v313(self, task: Task, c: int):  # type: ignore[no-untyped-def]
        rcu = self.rcu
        rdp = rcu.rdp[c]
        batch: list[Callback] = []
        need = [0]

        def wait_list(cpu: CPU, t: Task) -> int:
            if rdp.nocb_list:
                return 0
            return self._sleep(t, "list")

        def take(cpu: CPU, t: Task) -> int:
            self.kthread_runs += 1
            batch.clear()
            batch.extend(rdp.nocb_list)
            rdp.nocb_list.clear()
            rdp.qlen_last = 0
            # rcu_nocb_wait_gp: the GP that would serve callbacks queued now
            need[0] = rcu._future_gp()
            if rcu.v39:
                # 911af50: post the request; the next CPU to run the RCU core starts the GP
                if need[0] > rcu.future_needed:
                    rcu.future_needed = need[0]
                if not rcu.in_progress:
                    rcu.nocb_gp_request = True
                return rcu.jit.apply(rcu.cfg.call_rcu)
            return rcu.jit.apply(rcu.cfg.call_rcu) + rcu.start_future_gp(need[0], cpu)

        poll = rcu.cfg.nocb_poll_jiffies

        def wait_gp(cpu: CPU, t: Task) -> int:
            if rcu.completed >= need[0]:
                return 0
            if rcu.v39:
                # "repeated timed waits for grace periods to elapse" (before dae6e64)
                expires = self.m.env.now // self.m.tick_ns + poll
                cpu.add_jiffy_timer(expires, lambda c: self.m.wake(t, c))
                return BLOCKED
            rcu.gp_waiters.setdefault(need[0], []).append(t)
            return BLOCKED

        op_wait, op_take, op_gp = Call(wait_list), Call(take), Call(wait_gp)
        while True:
            yield op_wait
            if not rdp.nocb_list:
                continue
            yield op_take
            yield op_gp
            while rcu.completed < need[0]:
                yield op_gp  # (v3.9 polls; later eras are woken by the GP's end)
            for cb in list(batch):
                yield from self._invoke_ops(cb)

    # ------------------------------------------------------------------ v6 rcuog / rcuoc
    def _rcuog(self, task: Task, gi: int):  # type: ignore[no-untyped-def]
        rcu = self.rcu
        group = self.groups[gi]
        need = [0]

        def scan(cpu: CPU, t: Task) -> int:
            """nocb_gp_wait's pass over the group."""
            self.kthread_runs += 1
            self.rcuog_wake_pending[gi] = False
            period = self.m.tick_ns
            j = self.m.env.now // period
            cost = 0
            wait_for = 0
            for c in group:
                rdp = rcu.rdp[c]
                if rdp.bypass and (
                    (not rdp.bypass_lazy_only and j > rdp.bypass_first)
                    or (rdp.bypass_lazy_only and j >= rdp.bypass_first + self.lazy_jiffies)
                    or len(rdp.bypass) > 2 * rcu.cfg.qhimark
                ):
                    self._flush_bypass(rdp)
                if not (rdp.nxt or rdp.waiting or rdp.done):
                    continue
                cost += rcu.cfg.fqs_per_cpu
                rcu._advance(rdp)
                if rdp.nxt:
                    cost += rcu._accelerate(rdp, cpu)
                if rdp.waiting:
                    g = rdp.waiting[0][0]
                    wait_for = g if not wait_for else min(wait_for, g)
                if rdp.done:
                    ct = self.rcuo[c]
                    assert ct is not None
                    cost += self._wake(ct, "cbs", cpu)
            need[0] = wait_for
            return rcu.jit.apply(cost) if cost else 0

        def sleep(cpu: CPU, t: Task) -> int:
            if self.rcuog_wake_pending[gi]:
                self.rcuog_wake_pending[gi] = False
                return 0
            if need[0] == 0:
                # nothing waits for a GP: sleep until an enqueue (or a bypass timer) wakes us
                if any(rcu.rdp[c].nxt or rcu.rdp[c].waiting for c in group):
                    return 0
                self._arm_bypass_timer(cpu, gi)
                return self._sleep(t, "list")
            if rcu.completed >= need[0]:
                return 0
            rcu.gp_waiters.setdefault(need[0], []).append(t)
            return BLOCKED

        op_scan, op_sleep = Call(scan), Call(sleep)
        while True:
            yield op_scan
            yield op_sleep

    def _arm_bypass_timer(self, cpu: CPU, gi: int) -> None:
        """nocb_gp_wait before sleeping: non-empty bypass lists get a timer, +2 jiffies for
        non-lazy ones, the lazy flush time for lazy-only ones."""
        period = self.m.tick_ns
        j = self.m.env.now // period
        due = None
        for c in self.groups[gi]:
            rdp = self.rcu.rdp[c]
            if rdp.bypass:
                d = rdp.bypass_first + self.lazy_jiffies if rdp.bypass_lazy_only else j + 2
                due = d if due is None else min(due, d)
        if due is None:
            return
        due = max(due, j + 1)
        armed = self.bypass_timer[gi]
        if armed is not None and j < armed <= due:
            return  # an earlier one is armed

        def fire(c2: CPU) -> int:
            if self.bypass_timer[gi] == due:
                self.bypass_timer[gi] = None
            return self._wake(self.rcuog[gi], "list", c2)

        self.bypass_timer[gi] = due
        cpu.add_jiffy_timer(due, fire)

    def _rcuoc(self, task: Task, c: int):  # type: ignore[no-untyped-def]
        rcu = self.rcu
        rdp = rcu.rdp[c]

        def wait_cbs(cpu: CPU, t: Task) -> int:
            if rdp.done:
                return 0
            return self._sleep(t, "cbs")

        op_wait = Call(wait_cbs)
        while True:
            yield op_wait
            self.kthread_runs += 1
            while rdp.done:
                yield from self._invoke_ops(rdp.done.popleft())
            # advance if the next GP already ended (nocb_cb_wait)
            rcu._advance(rdp)

    def metrics(self) -> dict[str, float]:
        return {
            "nocb_wakeups": float(self.wakeups),
            "nocb_kthread_runs": float(self.kthread_runs),
            "nocb_bypass_flushes": float(self.bypass_flushes),
        }
