"""The timer subsystem on the simulated machine: wheel, placement, expiry, NO_HZ idle, cpuidle.

What follows which kernel code:

* Arming and cancelling (``__mod_timer()``, ``timer_delete()`` in kernel/time/timer.c): the
  timer goes to a base chosen by the placement policy; each op costs ``timer_op`` plus a
  cache-line transfer when the base's hot line was last touched by another CPU.
* Placement: ``off`` and ``pull`` queue on the arming CPU (``get_timer_this_cpu_base()``);
  ``push`` asks ``get_nohz_timer_target()`` (kernel/sched/core.c, v6.6): keep the timer if
  the arming CPU is a timer housekeeping CPU and not idle, else walk the scheduling domains
  for the first non-idle housekeeping CPU, paying a probe per CPU looked at. Pinned timers
  always stay (``TIMER_PINNED``, the local base).
* Expiry: the tick of a busy CPU raises TIMER_SOFTIRQ (vector 1) when a base is due
  (``run_local_timers()``); the softirq expires the due timers (``run_timer_softirq()``) and,
  in ``pull``, the remote timers of idle CPUs this CPU migrates for (``tmigr_handle_remote()``).
* NO_HZ idle (``tick_nohz_stop_tick()`` / ``__get_next_timer_interrupt()``): a CPU going idle
  programs its clock event for its next timer; in ``pull`` only for its next *local* timer,
  unless its first global timer comes first, which it hands to the hierarchy
  (``tmigr_cpu_deactivate()``), or it is the last active CPU, which must wake for the
  system's first global event. Leaving idle re-activates it (``tmigr_cpu_activate()``). Both
  walks cost ``tmigr_level`` per group plus the cache-line transfers of the group state;
  the exit walk delays the wakeup (it is added to the idle exit latency), and a wakeup that
  arrives while the entry walk is still running waits for it.
* cpuidle: with idle states configured, the governor (:mod:`.idle`) picks the state from the
  time to the next timer event and the recent idle history; its exit latency is the
  machine's idle exit latency.

Outcomes counted for the metrics: idle wakeups (and how many by a timer), remote expiries,
remote enqueues, the remote-expiry ping pong of schedule_timeout() sleepers, idle residency
per state, hierarchy walks and cache-line transfers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.errors import ConfigError
from sim.machine import IDLE, Machine
from sim.ops import BLOCKED
from sim.trace import MODEL_PID
from sim.units import S

from .config import TimersConfig
from .idle import Governor
from .ops import ScheduleTimeout, TimerArm, TimerCancel
from .tmigr import Group, Hierarchy
from .wheel import BASE_DEF, BASE_GLOBAL, BASE_LOCAL, INF, Timer, TimerBase, lvl_depth

if TYPE_CHECKING:
    from sim.machine import CPU
    from sim.task import Task

TIMER_SOFTIRQ = 1  # include/linux/interrupt.h: HI_SOFTIRQ=0, TIMER_SOFTIRQ=1


class TimersModel:
    """The installed ``[kernel.timers]`` mechanism of one machine (kernel/time/timer.c,
    kernel/time/timer_migration.c, kernel/sched/core.c get_nohz_timer_target, drivers/cpuidle)."""

    def __init__(self, m: Machine, cfg: TimersConfig) -> None:
        n = len(m.cpus)
        bad = [c for c in cfg.nohz_full if c >= n]
        if bad:
            raise ConfigError(
                "kernel.timers.nohz_full", f"names CPU {bad[0]}, but the machine has {n} CPUs", f"use CPUs 0..{n - 1}"
            )
        if len(cfg.nohz_full) >= n:
            raise ConfigError("kernel.timers.nohz_full", "leaves no timer housekeeping CPU", "keep at least one CPU out of it")
        self.m = m
        self.cfg = cfg
        self.mode = cfg.timer_migration
        self.n = n
        self.tick = m.tick_ns
        depth = lvl_depth(m.kernel.hz)
        self.bases = [[TimerBase(c, k, depth) for k in (BASE_LOCAL, BASE_GLOBAL, BASE_DEF)] for c in range(n)]
        self.cpu_next = [INF] * n  # first bucket expiry (jiffies) over the CPU's bases
        self.hk = [c not in cfg.nohz_full for c in range(n)]
        spans: list[int] = []
        for s in (*cfg.domain_spans, n):
            s = min(s, n)
            if s > 1 and (not spans or s > spans[-1]):  # degenerate domains are not attached
                spans.append(s)
        self.spans = spans or [n]
        self.jit = m.jitter("timers")
        self.tmigr = Hierarchy(n, cfg.tmigr_children_per_group) if self.mode == "pull" and n > 1 else None
        self.gov = (
            Governor(n, cfg.idle_state_names, cfg.idle_exit_latency, cfg.idle_target_residency, cfg.governor)
            if cfg.idle_state_names
            else None
        )
        # per-CPU idle bookkeeping
        self.ce_gen = [0] * n  # clock event generation (a reprogram or a wakeup cancels the pending one)
        self.idle_since = [0] * n
        self.idle_state = [len(cfg.idle_state_names) - 1 if cfg.idle_state_names else 0] * n
        self.by_timer = [False] * n
        self.exit_extra = [0] * n
        self.entry_end = [0] * n
        self.residency = [0] * max(1, len(cfg.idle_state_names))
        self.pt_remote: dict[int, int] = {}  # task id -> home CPU of its remotely expired process_timeout
        # counters
        self.armed = self.cancelled = self.fired = self.fired_remote = 0
        self.remote_enqueues = self.nohz_probes = self.timer_wakeups = self.pingpong = 0
        self.tmigr_levels = self.tmigr_walk_ns = self.line_transfers = self.remote_handlings = 0
        self.timer_ns = 0
        # tests and diagnostics: when a list, every ("arm", now, cpu, timer, due_ns, was_pending),
        # ("cancel", now, cpu, timer) of a pending timer and ("fire", now, cpu, base cpu, timer, due_ns)
        self.log: list[tuple[Any, ...]] | None = None
        tracer = m.tracer
        self.tracer = tracer
        self.tid = tracer.track("timers") if tracer is not None else 0
        m.handle(TimerArm, self._h_arm)
        m.handle(TimerCancel, self._h_cancel)
        m.handle(ScheduleTimeout, self._h_schedule_timeout)
        m.register_softirq(TIMER_SOFTIRQ, "timer", self._softirq)
        self._orig_exit = m.idle_exit_latency
        self.hooked = False
        if self.tmigr is not None or self.gov is not None:
            self._hook()

    # ------------------------------------------------------------------ installation
    def _hook(self) -> None:
        """Join the tick and the idle path (at install time when the hierarchy or idle states
        need every transition; otherwise at the first timer op, so that a scenario that never
        uses a wheel timer pays nothing)."""
        if self.hooked:
            return
        self.hooked = True
        m = self.m
        m.tick_hooks.append(self._tick)
        m.idle_enter_hooks.append(self._idle_enter)
        m.idle_exit_hooks.append(self._idle_exit)
        if self.tmigr is not None or self.gov is not None:
            m.idle_exit_latency = self._exit_latency
        now = m.env.now
        for c in m.cpus:
            self.idle_since[c.index] = now

    # ------------------------------------------------------------------ helpers
    def line(self, obj: TimerBase | Group, cpu: int) -> int:
        """Touch ``obj``'s hot cache line from ``cpu``: a transfer if another CPU had it."""
        owner = obj.line_cpu
        obj.line_cpu = cpu
        if owner != cpu and owner >= 0:
            self.line_transfers += 1
            return self.cfg.cache_line_transfer
        return 0

    def _note_next(self, cpu: int) -> None:
        b = self.bases[cpu]
        a, g, d = b[0].next_expiry, b[1].next_expiry, b[2].next_expiry
        self.cpu_next[cpu] = min(a, g, d)

    def _walk_cost(self, groups: list[Group], cpu: int) -> int:
        cost = 0
        lvl = self.cfg.tmigr_level
        for g in groups:
            cost += lvl + self.line(g, cpu)
        cost = self.jit.apply(cost)
        self.tmigr_levels += len(groups)
        self.tmigr_walk_ns += cost
        return cost

    @staticmethod
    def _idle(c: CPU) -> bool:
        """idle_cpu(): running the idle task, nothing queued."""
        return c.curr is None and c.nr_queued == 0

    def _instant(self, name: str, args: dict[str, Any]) -> None:
        tracer = self.tracer
        if tracer is not None:
            tracer.instant(self.tid, name, self.m.env.now, pid=MODEL_PID, args=args)

    # ------------------------------------------------------------------ placement
    def _target(self, cpu: CPU, timer: Timer) -> tuple[int, int]:
        """The CPU whose base gets ``timer`` and the CPU time the choice costs."""
        c = cpu.index
        if timer.pinned or self.mode != "push":
            return c, 0
        # get_nohz_timer_target() (kernel/sched/core.c, v6.6)
        cfg = self.cfg
        cpus = self.m.cpus
        hk = self.hk
        cost = cfg.nohz_entry
        default = -1
        if hk[c]:
            cost += cfg.nohz_probe
            self.nohz_probes += 1
            if not self._idle(cpu):
                return c, cost
            default = c
        n = self.n
        for span in self.spans:
            cost += cfg.nohz_domain
            start = c - c % span
            for i in range(start, min(start + span, n)):
                if i == c or not hk[i]:
                    continue
                cost += cfg.nohz_probe
                self.nohz_probes += 1
                if not self._idle(cpus[i]):
                    return i, cost
        if default < 0:
            default = hk.index(True)  # housekeeping_any_cpu(HK_TYPE_TIMER)
        return default, cost

    # ------------------------------------------------------------------ arming and cancelling
    def mod_timer(self, cpu: CPU, timer: Timer, delta_j: int, due_ns: int) -> int:
        """__mod_timer(): (re)queue ``timer`` ``delta_j`` jiffies from now; returns the cost."""
        if not self.hooked:
            self._hook()
        m = self.m
        now = m.env.now
        j = now // self.tick
        c = cpu.index
        cost = self.cfg.timer_op
        old = timer.base
        if old is not None:
            cost += self.line(old, c)
            old.remove(timer)
            self._note_next(old.cpu)
        tcpu, extra = self._target(cpu, timer)
        cost += extra
        kind = BASE_DEF if timer.deferrable else (BASE_LOCAL if timer.pinned else BASE_GLOBAL)
        base = self.bases[tcpu][kind]
        if base is not old:
            cost += self.line(base, c)
        base.forward(j)
        if self.log is not None:
            self.log.append(("arm", now, c, timer, due_ns, old is not None))
        first = base.add(timer, j + delta_j)
        timer.armed_ns = now
        timer.due_ns = due_ns
        timer.armed_cpu = c
        self.armed += 1
        if tcpu != c:
            self.remote_enqueues += 1
            self._instant("push: remote enqueue", {"timer": timer.name, "from": c, "to": tcpu})
        self._note_next(tcpu)
        if first and not timer.deferrable and tcpu != c and m.cpus[tcpu].state == IDLE:
            # trigger_dyntick_cpu(): the idle target must re-evaluate its next event
            m.send_ipi(cpu, m.cpus[tcpu], None, name="timer kick")
        cost = self.jit.apply(cost)
        self.timer_ns += cost
        return cost

    def del_timer(self, cpu: CPU, timer: Timer) -> int:
        """timer_delete(): dequeue ``timer`` if pending; returns the cost."""
        base = timer.base
        if base is None:
            return 0
        cost = self.cfg.timer_op + self.line(base, cpu.index)
        if self.log is not None:
            self.log.append(("cancel", self.m.env.now, cpu.index, timer))
        base.remove(timer)
        self._note_next(base.cpu)
        self.cancelled += 1
        cost = self.jit.apply(cost)
        self.timer_ns += cost
        return cost

    def _h_arm(self, cpu: CPU, t: Task, op: TimerArm) -> int:
        was = op.timer.base is not None
        tick = self.tick
        cost = self.mod_timer(cpu, op.timer, -(-op.ns // tick), self.m.env.now + op.ns)
        t.retval = was
        return cost

    def _h_cancel(self, cpu: CPU, t: Task, op: TimerCancel) -> int:
        was = op.timer.base is not None
        cost = self.del_timer(cpu, op.timer)
        t.retval = was
        return cost

    # ------------------------------------------------------------------ schedule_timeout
    def _h_schedule_timeout(self, cpu: CPU, t: Task, op: ScheduleTimeout) -> int:
        timer = t.data.get("_process_timer")
        if timer is None:
            timer = t.data["_process_timer"] = Timer(
                f"process_timeout/{t.name}", self._process_timeout, kind="process_timeout", task=t
            )
        delta = op.jiffies if op.jiffies is not None else -(-op.ns // self.tick)
        home = self.pt_remote.pop(t.tid, None)
        if home is not None and home == cpu.index:
            # the task's timer was expired remotely, it was woken back onto the CPU it slept
            # on, and it re-arms there: one round of the ping pong
            self.pingpong += 1
            self._instant("ping pong", {"task": t.name, "cpu": cpu.index})
        cost = self.mod_timer(cpu, timer, delta, self.m.env.now + delta * self.tick)
        t.post = self._st_sleep
        return cost

    def _st_sleep(self, cpu: CPU, t: Task) -> int:
        timer = t.data["_process_timer"]
        if timer.base is None:  # already expired
            return 0
        t.post = self._st_woken
        return BLOCKED

    def _st_woken(self, cpu: CPU, t: Task) -> int:
        # del_timer_sync() after schedule(): a timer still pending means an early wakeup
        return self.del_timer(cpu, t.data["_process_timer"])

    def _process_timeout(self, cpu: CPU, timer: Timer) -> int:
        assert timer.task is not None
        return self.m.wake(timer.task, cpu)

    # ------------------------------------------------------------------ expiry
    def _expire(self, cpu: CPU, t: Timer, base_cpu: int) -> int:
        now = self.m.env.now
        t.fired += 1
        self.fired += 1
        if self.log is not None:
            self.log.append(("fire", now, cpu.index, base_cpu, t, t.due_ns))
        if base_cpu != cpu.index:
            self.fired_remote += 1
            if t.kind == "process_timeout" and t.task is not None:
                self.pt_remote[t.task.tid] = base_cpu
            self._instant("remote expiry", {"timer": t.name, "of": base_cpu, "on": cpu.index})
        cost = self.cfg.timer_op
        if t.fn is not None:
            cost += t.fn(cpu, t)
        return cost

    def _softirq(self, cpu: CPU) -> tuple[int, None]:
        """run_timer_softirq()"""
        c = cpu.index
        now = self.m.env.now
        j = now // self.tick
        cost = 0
        if self.cpu_next[c] <= j:
            for base in self.bases[c]:
                if base.next_expiry <= j:
                    for t in base.collect(j):
                        cost += self._expire(cpu, t, c)
            self._note_next(c)
        tm = self.tmigr
        if tm is not None and not tm.idle[c]:
            cost += self._handle_remote(cpu, now, j)
        cost = self.jit.apply(cost)
        self.timer_ns += cost
        return cost, None

    def _handle_remote(self, cpu: CPU, now: int, j: int) -> int:
        tm = self.tmigr
        assert tm is not None
        c = cpu.index
        acc = [0]
        tick = self.tick

        def expire(x: int) -> None:
            # tmigr_handle_remote_cpu(): lock the remote bases, expire its global timers,
            # fetch its next event and walk the hierarchy with it
            lb, gb = self.bases[x][BASE_LOCAL], self.bases[x][BASE_GLOBAL]
            cost = self.line(lb, c) + self.line(gb, c)
            for t in gb.collect(j):
                cost += self._expire(cpu, t, x)
            self._note_next(x)
            self.remote_handlings += 1
            ln, gn = lb.next_expiry, gb.next_expiry
            nxt = gn * tick if gn < ln else INF
            cost += self._walk_cost(tm.update_idle_event(x, nxt), c)
            acc[0] += cost

        checked = tm.handle_remote(c, now, expire)
        if acc[0]:
            acc[0] += self._walk_cost(checked, c)
        return acc[0]

    # ------------------------------------------------------------------ the tick and idle
    def _tick(self, cpu: CPU) -> None:
        """run_local_timers(): raise TIMER_SOFTIRQ when a base is due or remote timers wait."""
        c = cpu.index
        now = self.m.env.now
        if self.cpu_next[c] <= now // self.tick:
            cpu.raise_softirq(TIMER_SOFTIRQ)
            return
        tm = self.tmigr
        if tm is not None and tm.requires_handle_remote(c, now):
            cpu.raise_softirq(TIMER_SOFTIRQ)

    def _program(self, c: int, at: int) -> None:
        """Program CPU ``c``'s clock event (the stopped tick) for ``at``."""
        self.ce_gen[c] += 1
        now = self.m.env.now
        self.m.call_at(max(0, at - now), self._ce_fire, c, self.ce_gen[c])

    def _ce_fire(self, c: int, gen: int) -> None:
        if gen != self.ce_gen[c]:
            return  # reprogrammed or the CPU woke meanwhile
        cpu = self.m.cpus[c]
        if cpu.state != IDLE:
            return
        self.by_timer[c] = True
        self.timer_wakeups += 1
        m = self.m
        cpu.raise_irq(m.jit_sched.apply(m.costs.tick), self._ce_irq)

    def _ce_irq(self, cpu: CPU) -> int:
        # the tick handler the clock event runs (tick_nohz_handler -> update_process_times)
        self._tick(cpu)
        return 0

    def _idle_enter(self, cpu: CPU) -> None:
        c = cpu.index
        now = self.m.env.now
        tick = self.tick
        b = self.bases[c]
        ln, gn = b[BASE_LOCAL].next_expiry, b[BASE_GLOBAL].next_expiry
        tm = self.tmigr
        if tm is not None:
            # __get_next_timer_interrupt() -> timer_use_tmigr() -> tmigr_cpu_deactivate()
            gl = gn * tick if gn < ln else INF
            first, touched = tm.deactivate(c, gl)
            self.entry_end[c] = now + self._walk_cost(touched, c)
            ev = min(ln * tick if ln < INF else INF, first)
        else:
            nx = ln if ln < gn else gn
            ev = nx * tick if nx < INF else INF
        if ev < INF:
            self._program(c, ev)
        else:
            self.ce_gen[c] += 1
        if self.gov is not None:
            self.idle_state[c] = self.gov.select(c, ev - now if ev < INF else INF)
        self.idle_since[c] = now

    def _idle_exit(self, cpu: CPU) -> None:
        c = cpu.index
        now = self.m.env.now
        self.ce_gen[c] += 1
        dur = now - self.idle_since[c]
        by_timer = self.by_timer[c]
        self.by_timer[c] = False
        gov = self.gov
        if gov is not None:
            self.residency[self.idle_state[c]] += dur
            gov.record(c, dur, by_timer, self.idle_state[c])
        extra = self.entry_end[c] - now
        if extra < 0:
            extra = 0
        tm = self.tmigr
        if tm is not None:
            extra += self._walk_cost(tm.activate(c), c)
        self.exit_extra[c] = extra

    def _exit_latency(self, cpu: CPU) -> int:
        c = cpu.index
        extra = self.exit_extra[c]
        self.exit_extra[c] = 0
        gov = self.gov
        if gov is not None:
            lat = self.jit.apply(gov.exit_latency[self.idle_state[c]])
        else:
            lat = self._orig_exit(cpu)
        return lat + extra

    # ------------------------------------------------------------------ results
    def used(self) -> bool:
        return self.hooked

    def residency_now(self) -> list[int]:
        """Time spent in each idle state so far, the open idle periods included."""
        res = list(self.residency)
        if self.gov is not None:
            now = self.m.env.now
            for c in self.m.cpus:
                if c.state == IDLE:
                    res[self.idle_state[c.index]] += now - self.idle_since[c.index]
        return res

    def metrics(self) -> dict[str, float]:
        if not self.hooked:
            return {}
        m = self.m
        now = m.env.now
        secs = now / S if now else float("nan")
        wakeups = sum(c.idle_exits for c in m.cpus)
        out: dict[str, float] = {
            "armed": float(self.armed),
            "cancelled": float(self.cancelled),
            "fired": float(self.fired),
            "remote_expiries": float(self.fired_remote),
            "remote_enqueues": float(self.remote_enqueues),
            "idle_wakeups": float(wakeups),
            "idle_wakeups_per_s": wakeups / secs,
            "timer_wakeups": float(self.timer_wakeups),
            "pingpong": float(self.pingpong),
            "nohz_probes": float(self.nohz_probes),
            "tmigr_levels_walked": float(self.tmigr_levels),
            "tmigr_walk_ns": float(self.tmigr_walk_ns),
            "remote_handlings": float(self.remote_handlings),
            "cache_line_transfers": float(self.line_transfers),
            "timer_cpu_ns": float(self.timer_ns),
        }
        if self.gov is not None:
            res = self.residency_now()
            total = self.n * now
            for name, r in zip(self.cfg.idle_state_names, res, strict=True):
                out[f"residency_{name}"] = r / total if total else float("nan")
            out["deep_idle_fraction"] = res[-1] / total if total else float("nan")
        return out


def install(m: Machine, cfg: TimersConfig) -> TimersModel:
    return TimersModel(m, cfg)
