"""membarrier(2): memory barriers on other threads, by grace period or by IPI
(kernel/sched/membarrier.c, v4.15 and today).

* ``GLOBAL`` (formerly ``SHARED``): ``synchronize_rcu()`` (``synchronize_sched()`` before the
  flavour consolidation) when more than one CPU is online: it blocks for a normal grace period.
  It needs no registration. Served here by the installed RCU model.
* ``PRIVATE_EXPEDITED``: needs ``REGISTER_PRIVATE_EXPEDITED`` first (else ``-EPERM``). Returns
  at once with one CPU online (and, since v4.16, when the mm has a single user). Otherwise it
  reads every other CPU's ``rq->curr`` and IPIs those running a thread of the caller's mm
  (``smp_call_function_many(..., wait=1)``): the caller spins with preemption disabled until
  every IPI handler (``ipi_mb``: one ``smp_mb()``) has run. It never sleeps. The targets pay
  the IPI: their current task is interrupted for ``costs.ipi_handler``.
* ``GLOBAL_EXPEDITED`` (v4.16+): the same over CPUs whose current task has an mm registered
  with ``REGISTER_GLOBAL_EXPEDITED`` (kernel threads are skipped).
* Registration: v4.15 sets a flag on the mm; today (``sync_runqueues_membarrier_state``) a
  multi-threaded mm first waits for a grace period (``synchronize_rcu``) so that every
  runqueue sees the new state. (The IPIs that follow it, ``ipi_sync_rq_state``, are left out.)

A task's membarrier state lives in ``task.data["mm"]``, an :class:`Mm` shared by the threads
of one process (None for kernel threads and for tasks that never set one, each of which then
counts as its own process). It is kept apart from the substrate's address-space identity
``Task.mm`` (an integer the scheduler uses to charge ``Costs.mm_switch``), which came later;
the workloads that use membarrier set both consistently (their threads share one of each).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.errors import ScenarioError
from sim.ops import BLOCKED, Op
from sim.units import US

from .config import MembarrierConfig
from .futex import Futex

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

# include/uapi/linux/membarrier.h
QUERY = 0
GLOBAL = 1 << 0  # formerly MEMBARRIER_CMD_SHARED
GLOBAL_EXPEDITED = 1 << 1
REGISTER_GLOBAL_EXPEDITED = 1 << 2
PRIVATE_EXPEDITED = 1 << 3
REGISTER_PRIVATE_EXPEDITED = 1 << 4

COMMANDS = {
    "query": QUERY,
    "global": GLOBAL,
    "shared": GLOBAL,
    "global_expedited": GLOBAL_EXPEDITED,
    "register_global_expedited": REGISTER_GLOBAL_EXPEDITED,
    "private_expedited": PRIVATE_EXPEDITED,
    "register_private_expedited": REGISTER_PRIVATE_EXPEDITED,
}
NAMES = {GLOBAL: "global", GLOBAL_EXPEDITED: "global_expedited", PRIVATE_EXPEDITED: "private_expedited"}

EPERM = -1
EINVAL = -22

# mm->membarrier_state bits (kernel/sched/membarrier.c)
STATE_PRIVATE_EXPEDITED_READY = 1 << 0
STATE_GLOBAL_EXPEDITED = 1 << 2

SPIN_QUANTUM = 100 * US  # longest piece of the IPI wait before it re-checks (an engine granularity)


class Mm:
    """A process's address space (struct mm_struct): the threads that share it, and its
    membarrier registration state."""

    __slots__ = ("name", "users", "membarrier_state")

    def __init__(self, name: str, users: int = 1) -> None:
        self.name = name
        self.users = users  # mm_users
        self.membarrier_state = 0

    def __repr__(self) -> str:
        return f"<Mm {self.name}>"


def mm_of(t: Task | None) -> Mm | None:
    if t is None:
        return None
    return t.data.get("mm")


class Membarrier(Op):
    """membarrier(cmd, 0): ``cmd`` is a name of :data:`COMMANDS` (``"private_expedited"``...).
    The result is 0, a command mask (QUERY), or a negative errno."""

    __slots__ = ("cmd",)

    def __init__(self, cmd: str) -> None:
        if cmd not in COMMANDS:
            raise ValueError(f"unknown membarrier command {cmd!r}; use one of {', '.join(COMMANDS)}")
        self.cmd = COMMANDS[cmd]


class _IpiWait:
    """The caller of an expedited membarrier, spinning until its IPIs are handled."""

    __slots__ = ("t", "pending", "spinning")

    def __init__(self, t: Task, pending: int) -> None:
        self.t = t
        self.pending = pending
        self.spinning = False


class MembarrierModel:
    """The installed ``[kernel.membarrier]`` mechanism: membarrier(2) and futex(2)."""

    def __init__(self, m: Machine, cfg: MembarrierConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.v6 = cfg.era == "v6"
        self.jit = m.jitter("membarrier")
        self.futex = Futex(m, cfg.futex_op)
        self.calls: dict[int, int] = {}
        self.ipis = 0
        self.returned_at_once = 0
        self.ns_in_calls = 0
        self._rcu_sync: Callable[[CPU, Task, Any], int] | None = None
        self._sync_op: Op | None = None
        self.log: list[tuple[int, int, str]] | None = None  # (start, end, cmd) when a test asks
        m.handle(Membarrier, self._h_membarrier)

    # ------------------------------------------------------------------ helpers
    def _rcu(self) -> tuple[Callable[[CPU, Task, Any], int], Op]:
        if self._rcu_sync is None:
            from models.rcu.ops import SynchronizeRcu

            h = self.m.handlers.get(SynchronizeRcu)
            if h is None:
                raise ScenarioError("membarrier(GLOBAL) waits for an RCU grace period: enable [kernel.rcu]")
            self._rcu_sync, self._sync_op = h, SynchronizeRcu()
        assert self._sync_op is not None
        return self._rcu_sync, self._sync_op

    def _syscall(self) -> int:
        return self.jit.apply(self.m.costs.syscall)

    def _count(self, cmd: int) -> None:
        self.calls[cmd] = self.calls.get(cmd, 0) + 1

    # ------------------------------------------------------------------ the syscall
    def _h_membarrier(self, cpu: CPU, t: Task, op: Membarrier) -> int:
        cmd = op.cmd
        t.retval = 0
        if cmd == QUERY:
            mask = GLOBAL | PRIVATE_EXPEDITED | REGISTER_PRIVATE_EXPEDITED
            if self.v6:
                mask |= GLOBAL_EXPEDITED | REGISTER_GLOBAL_EXPEDITED
            t.retval = mask
            return self._syscall()
        if cmd in (GLOBAL_EXPEDITED, REGISTER_GLOBAL_EXPEDITED) and not self.v6:
            t.retval = EINVAL  # not in v4.15
            return self._syscall()
        self._count(cmd)
        start = self.m.now
        if cmd == GLOBAL:
            return self._global(cpu, t, start)
        if cmd in (REGISTER_PRIVATE_EXPEDITED, REGISTER_GLOBAL_EXPEDITED):
            return self._register(cpu, t, cmd)
        mm = mm_of(t)
        if cmd == PRIVATE_EXPEDITED:
            if mm is None or not mm.membarrier_state & STATE_PRIVATE_EXPEDITED_READY:
                t.retval = EPERM
                return self._syscall()
            if len(self.m.cpus) == 1 or (self.v6 and mm.users == 1):
                self.returned_at_once += 1
                return self._done(start, cmd, self._syscall())
            targets = [c for c in self.m.cpus if c is not cpu and c.curr is not None and mm_of(c.curr) is mm]
        else:  # GLOBAL_EXPEDITED
            if len(self.m.cpus) == 1:
                self.returned_at_once += 1
                return self._done(start, cmd, self._syscall())
            targets = []
            for c in self.m.cpus:
                if c is cpu or c.curr is None:
                    continue
                other = mm_of(c.curr)
                if other is not None and other.membarrier_state & STATE_GLOBAL_EXPEDITED:
                    targets.append(c)
        cost = self._syscall() + self.jit.apply(self.cfg.scan_per_cpu * (len(self.m.cpus) - 1))
        if not targets:
            self.returned_at_once += 1
            return self._done(start, cmd, cost)
        # The send itself is inside costs.ipi_latency: the calibration derives that figure from
        # the collector's membarrier round trip (irq_cost.ipi_round_trip), so adding ipi_send
        # here would count it twice.
        wait = _IpiWait(t, len(targets))

        def send(c: CPU, task: Task) -> int:
            # smp_call_function_many(mask, ipi_mb, NULL, wait=1), preemption disabled
            task.preempt_count += 1

            def ipi_mb(d: CPU) -> int:
                return self._ipi_mb(wait)

            for dst in targets:
                self.ipis += 1
                self.m.send_ipi(c, dst, ipi_mb, name="membarrier ipi")
            wait.spinning = True
            task.post = lambda c2, task2: self._spin_done(c2, task2, wait, start, cmd)
            return SPIN_QUANTUM

        t.post = send
        return cost

    def _ipi_mb(self, wait: _IpiWait) -> int:
        # the handler (smp_mb) occupies the target for costs.ipi_handler; the caller sees the
        # call-function data released when it ends
        self.m.call_at(self.m.costs.ipi_handler, self._ack, wait)
        return 0

    def _ack(self, wait: _IpiWait) -> None:
        wait.pending -= 1
        if wait.pending == 0 and wait.spinning:
            wait.spinning = False
            self.m.end_segment(wait.t)

    def _spin_done(self, cpu: CPU, t: Task, wait: _IpiWait, start: int, cmd: int) -> int:
        if wait.pending > 0:  # a whole quantum went by: keep spinning
            t.post = lambda c2, task2: self._spin_done(c2, task2, wait, start, cmd)
            return SPIN_QUANTUM
        t.preempt_count -= 1
        return self._done(start, cmd, 0)

    def _done(self, start: int, cmd: int, cost: int) -> int:
        end = self.m.now + cost
        self.ns_in_calls += end - start
        if self.log is not None:
            self.log.append((start, end, NAMES.get(cmd, str(cmd))))
        return cost

    def _global(self, cpu: CPU, t: Task, start: int) -> int:
        if len(self.m.cpus) == 1:
            self.returned_at_once += 1
            return self._done(start, GLOBAL, self._syscall())
        h, sync = self._rcu()
        r = h(cpu, t, sync)  # queues the wait; its continuation blocks the caller
        if r == BLOCKED:
            return BLOCKED
        inner = t.post

        def after(c: CPU, task: Task) -> int:
            # chained behind the RCU wait's continuations, to account the call's end
            if inner is None:
                return self._done(start, GLOBAL, 0)
            return self._wrap(c, task, inner, start)

        t.post = after
        return r + self._syscall()

    def _wrap(self, cpu: CPU, t: Task, post: Callable[[CPU, Task], int], start: int) -> int:
        r = post(cpu, t)
        nxt = t.post
        if nxt is None:
            if r == BLOCKED:  # pragma: no cover - a continuation that blocks sets its successor
                return r
            return r + self._done(start, GLOBAL, 0)
        t.post = lambda c, task: self._wrap(c, task, nxt, start)
        return r

    def _register(self, cpu: CPU, t: Task, cmd: int) -> int:
        mm = mm_of(t)
        if mm is None:
            t.retval = EINVAL
            return self._syscall()
        bit = STATE_PRIVATE_EXPEDITED_READY if cmd == REGISTER_PRIVATE_EXPEDITED else STATE_GLOBAL_EXPEDITED
        if mm.membarrier_state & bit:
            return self._syscall()
        mm.membarrier_state |= bit
        if self.v6 and mm.users > 1 and len(self.m.cpus) > 1:
            # sync_runqueues_membarrier_state(): synchronize_rcu() before the state is used
            h, sync = self._rcu()
            r = h(cpu, t, sync)
            return r if r == BLOCKED else r + self._syscall()
        return self._syscall()

    # ------------------------------------------------------------------ results
    def metrics(self) -> dict[str, float]:
        out = dict(self.futex.metrics())
        if not self.calls:
            return out
        for cmd, name in NAMES.items():
            if cmd in self.calls:
                out[f"calls_{name}"] = float(self.calls[cmd])
        regs = self.calls.get(REGISTER_PRIVATE_EXPEDITED, 0) + self.calls.get(REGISTER_GLOBAL_EXPEDITED, 0)
        if regs:
            out["registrations"] = float(regs)
        out["ipis"] = float(self.ipis)
        out["returned_at_once"] = float(self.returned_at_once)
        out["time_in_calls_s"] = self.ns_in_calls / 1e9
        return out


def install(m: Machine, cfg: MembarrierConfig) -> MembarrierModel:
    return MembarrierModel(m, cfg)
