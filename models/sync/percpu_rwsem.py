"""percpu_rw_semaphore and rcu_sync (kernel/locking/percpu-rwsem.c, kernel/rcu/sync.c,
include/linux/rcu_sync.h).

**Readers** take a fast path while no writer is around: inside a preempt-disabled region (an
RCU-sched read-side critical section) they test the writer state and increment their CPU's
``fast_read_ctr``; ``up_read`` decrements it the same way. Otherwise they take the slow path:
``down_read(&rw_sem)`` (blocking while a writer holds it), an atomic increment of
``slow_read_ctr``, and on release an atomic decrement that wakes the writer at zero.

**A writer** first switches readers to the slow path and waits until every reader that might
still be on the fast path has left its preempt-disabled region: one grace period. Then it
takes ``rw_sem`` for writing (excluding writers and new slow readers), moves the sum of the
per-CPU counters into ``slow_read_ctr`` and sleeps until that reaches zero. How the switch
is made is the knob ``writer_sync``:

* ``expedited`` / ``normal`` (v3.8-v4.3): ``down_write`` increments ``write_ctr`` and calls
  ``synchronize_sched_expedited()`` (or ``synchronize_sched()``); ``up_write`` releases
  ``rw_sem``, calls it again, then decrements ``write_ctr``: two grace periods per write.
* ``rcu_sync`` (v4.4+): ``rcu_sync_enter()`` / ``rcu_sync_exit()`` (:class:`RcuSync`). A
  writer pays a synchronous grace period only when the rcu_sync is idle; ``exit`` lets readers
  back onto the fast path through ``call_rcu()``, one grace period later, and a writer that
  arrives before that callback ran pays nothing.

The model keeps the kernel's window that makes the grace period necessary: a fast-path
reader tests the state when its region starts and bumps the counter when it ends.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from models.rcu.ops import CallRcu, RcuReadLock, RcuReadUnlock, SynchronizeRcu, SynchronizeRcuExpedited
from sim.channel import WaitQueue
from sim.errors import ScenarioError
from sim.ops import BLOCKED, Call, Op

from .config import PercpuRwsemConfig

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

# kernel/rcu/sync.c (v5.4+)
GP_IDLE, GP_ENTER, GP_PASSED, GP_EXIT, GP_REPLAY = range(5)
STATE_NAMES = ("GP_IDLE", "GP_ENTER", "GP_PASSED", "GP_EXIT", "GP_REPLAY")
# kernel/rcu/sync.c (v4.4): gp_state x cb_state
V44_GP_IDLE, V44_GP_PENDING, V44_GP_PASSED = range(3)
CB_IDLE, CB_PENDING, CB_REPLAY = range(3)


class RcuSync:
    """struct rcu_sync: lets a writer switch readers to a slow path and back, paying grace
    periods only when it must (kernel/rcu/sync.c; ``era`` "v5.4" is today's five-state machine,
    "v4.4" Oleg Nesterov's 2015 gp_state x cb_state version)."""

    def __init__(self, m: Machine, era: str = "v5.4", name: str = "rcu_sync") -> None:
        if era not in ("v4.4", "v5.4"):
            raise ValueError(f"unknown rcu_sync era {era!r}")
        self.m = m
        self.name = name
        self.v44 = era == "v4.4"
        self.gp_state = GP_IDLE  # v4.4: V44_GP_* values
        self.cb_state = CB_IDLE  # v4.4 only
        self.gp_count = 0
        self.gp_wait = WaitQueue(m, f"{name}.gp_wait")
        self.sync_gps = 0  # synchronous grace periods paid by rcu_sync_enter()
        self.callbacks = 0  # call_rcu()s queued (exit and replays)
        self.skipped = 0  # rcu_sync_enter() calls that paid nothing
        self.log: list[tuple[int, str]] | None = None
        self._op_enter = Call(self._enter_locked)
        self._op_exit = Call(self._exit_locked)
        self._op_passed = Call(self._sync_passed)
        self._op_wait = Call(self._wait_passed)
        self._op_sync = SynchronizeRcu()
        self._op_call = CallRcu(fn=self._func, lazy=False)

    # ------------------------------------------------------------------ state
    def is_idle(self) -> bool:
        """rcu_sync_is_idle(): may readers use their fast path?"""
        return self.gp_state == GP_IDLE

    def state_name(self) -> str:
        if self.v44:
            return (
                f"{('GP_IDLE', 'GP_PENDING', 'GP_PASSED')[self.gp_state]}/{('CB_IDLE', 'CB_PENDING', 'CB_REPLAY')[self.cb_state]}"
            )
        return STATE_NAMES[self.gp_state]

    def _note(self, what: str) -> None:
        if self.log is not None:
            self.log.append((self.m.now, f"{what} -> {self.state_name()} count={self.gp_count}"))

    def _passed(self) -> bool:
        if self.v44:
            return self.gp_state == V44_GP_PASSED
        return self.gp_state >= GP_PASSED

    # ------------------------------------------------------------------ rcu_sync_enter
    def enter(self) -> Generator[Op, Any, None]:
        """rcu_sync_enter(): after it, readers stay off their fast path."""
        need_sync = yield self._op_enter
        if need_sync:
            self.sync_gps += 1
            yield self._op_sync
            yield self._op_passed
        else:
            yield self._op_wait

    def _enter_locked(self, cpu: CPU, t: Task) -> int:
        if self.v44:
            need_wait = self.gp_count > 0
            self.gp_count += 1
            need_sync = self.gp_state == V44_GP_IDLE
            if need_sync:
                self.gp_state = V44_GP_PENDING
            if need_wait and need_sync:  # pragma: no cover - BUG_ON() in the kernel
                raise ScenarioError(f"{self.name}: rcu_sync_enter with waiters while idle")
        else:
            need_sync = self.gp_state == GP_IDLE
            if need_sync:
                self.gp_state = GP_ENTER
            self.gp_count += 1
        if not need_sync:
            self.skipped += 1
        t.retval = need_sync
        self._note("enter")
        return 0

    def _sync_passed(self, cpu: CPU, t: Task) -> int:
        # v5.4: rcu_sync_func() called synchronously (GP_ENTER -> GP_PASSED); v4.4: the same
        # assignment in rcu_sync_enter(); both wake whoever waited meanwhile
        self.gp_state = V44_GP_PASSED if self.v44 else GP_PASSED
        self._note("grace period passed")
        return self.gp_wait.wake_all(cpu)

    def _wait_passed(self, cpu: CPU, t: Task) -> int:
        if self._passed():
            return 0
        t.post = self._wait_passed
        return self.gp_wait.block(t)

    # ------------------------------------------------------------------ rcu_sync_exit
    def exit(self) -> Generator[Op, Any, None]:
        """rcu_sync_exit(): readers may use their fast path again after a grace period."""
        queue = yield self._op_exit
        if queue:
            self.callbacks += 1
            yield self._op_call

    def _exit_locked(self, cpu: CPU, t: Task) -> int:
        if self.gp_count <= 0:
            raise ScenarioError(f"{self.name}: rcu_sync_exit() without rcu_sync_enter()")
        self.gp_count -= 1
        queue = False
        if self.gp_count == 0:
            if self.v44:
                if self.cb_state == CB_IDLE:
                    self.cb_state = CB_PENDING
                    queue = True
                elif self.cb_state == CB_PENDING:
                    self.cb_state = CB_REPLAY
            elif self.gp_state == GP_PASSED:
                self.gp_state = GP_EXIT
                queue = True
            elif self.gp_state == GP_EXIT:
                self.gp_state = GP_REPLAY
        t.retval = queue
        self._note("exit")
        return 0

    # ------------------------------------------------------------------ the callback
    def _func(self, cpu: CPU) -> None:
        """rcu_sync_func(), invoked a grace period after the exit that queued it."""
        requeue = False
        if self.v44:
            if self.gp_count:
                self.cb_state = CB_IDLE
            elif self.cb_state == CB_REPLAY:
                self.cb_state = CB_PENDING
                requeue = True
            else:
                self.cb_state = CB_IDLE
                self.gp_state = V44_GP_IDLE
        elif self.gp_count:
            self.gp_state = GP_PASSED
            self.gp_wait.wake_all(cpu)
        elif self.gp_state == GP_REPLAY:
            self.gp_state = GP_EXIT
            requeue = True
        else:
            self.gp_state = GP_IDLE
        self._note("callback")
        if requeue:
            self.callbacks += 1
            from models.rcu.tree import Callback

            rcu = self.m.models["rcu"].rcu
            rcu.queue(cpu, Callback(rcu.cfg.cb_invoke, self._func, False, self.m.now, cpu.index))

    def metrics(self) -> dict[str, float]:
        return {"sync_gps": float(self.sync_gps), "callbacks": float(self.callbacks), "enters_skipped": float(self.skipped)}


class RwSem:
    """A kernel rw_semaphore, FIFO: a reader waits behind a writer that holds or waits for
    it; release hands the lock to the next writer or to every reader at the head."""

    def __init__(self, m: Machine, name: str, cost: int) -> None:
        self.m = m
        self.name = name
        self.cost = cost
        self.readers = 0
        self.writer: Task | None = None
        self.queue: list[tuple[Task, bool]] = []  # (task, is_writer)
        self.op_down_read = Call(self._down_read)
        self.op_up_read = Call(self._up_read)
        self.op_down_write = Call(self._down_write)
        self.op_up_write = Call(self._up_write)

    def _down_read(self, cpu: CPU, t: Task) -> int:
        if self.writer is None and not self.queue:
            self.readers += 1
            return self.cost
        self.queue.append((t, False))
        return BLOCKED

    def _down_write(self, cpu: CPU, t: Task) -> int:
        if self.writer is None and self.readers == 0 and not self.queue:
            self.writer = t
            return self.cost
        self.queue.append((t, True))
        return BLOCKED

    def _up_read(self, cpu: CPU, t: Task) -> int:
        self.readers -= 1
        return self.cost + (self._grant(cpu) if self.readers == 0 else 0)

    def _up_write(self, cpu: CPU, t: Task) -> int:
        self.writer = None
        return self.cost + self._grant(cpu)

    def _grant(self, cpu: CPU) -> int:
        q = self.queue
        cost = 0
        if q and q[0][1]:
            w = q.pop(0)[0]
            self.writer = w
            return self.m.wake(w, cpu)
        while q and not q[0][1]:
            r = q.pop(0)[0]
            self.readers += 1
            cost += self.m.wake(r, cpu)
        return cost


class PercpuRwsem:
    """One percpu_rw_semaphore (kernel/locking/percpu-rwsem.c, the v3.13 and v4.4 shapes)."""

    def __init__(self, model: PercpuRwsemModel, name: str) -> None:
        m = model.m
        cfg = model.cfg
        self.m = m
        self.model = model
        self.name = name
        self.mode = cfg.writer_sync
        ncpu = len(m.cpus)
        self.fast_read_ctr = [0] * ncpu
        self.write_ctr = 0
        self.slow_read_ctr = 0
        self.rw_sem = RwSem(m, f"{name}.rw_sem", cfg.slow_path // 2)
        self.write_waitq = WaitQueue(m, f"{name}.write_waitq")
        self.rss = RcuSync(m, cfg.rcu_sync_era, f"{name}.rss") if self.mode == "rcu_sync" else None
        self.fast_cost = cfg.fast_path
        self.slow_cost = cfg.slow_path
        self.sum_cost = cfg.sum_per_cpu * ncpu
        # statistics and invariant checks
        self.fast_reads = 0
        self.slow_reads = 0
        self.writes = 0
        self.sync_calls = 0
        self.readers_inside = 0
        self.writer_inside: Task | None = None
        self.violations: list[str] = []
        # prebuilt ops
        self._op_rlock = RcuReadLock()
        self._op_runlock = RcuReadUnlock()
        self._op_fast_down = Call(self._fast_down)
        self._op_fast_up = Call(self._fast_up)
        self._op_slow_inc = Call(self._slow_inc)
        self._op_slow_dec = Call(self._slow_dec)
        self._op_write_ctr_inc = Call(self._write_ctr_inc)
        self._op_write_ctr_dec = Call(self._write_ctr_dec)
        self._op_clear_fast = Call(self._clear_fast)
        self._op_wait_readers = Call(self._wait_readers)
        self._op_sync = SynchronizeRcuExpedited() if self.mode == "expedited" else SynchronizeRcu()

    # ------------------------------------------------------------------ readers
    def _fast_allowed(self) -> bool:
        if self.rss is not None:
            return self.rss.is_idle()
        return self.write_ctr == 0

    def _fast_down(self, cpu: CPU, t: Task) -> int:
        # the test happens now; the per-CPU increment when the preempt-disabled region ends
        fast = self._fast_allowed()
        t.retval = fast
        if fast:
            if self.writer_inside is not None:
                self.violations.append(f"{self.m.now}: {t.name} took the fast path while {self.writer_inside.name} held the lock")
            t.post = self._fast_inc
        return self.fast_cost

    def _fast_inc(self, cpu: CPU, t: Task) -> int:
        self.fast_read_ctr[cpu.index] += 1
        t.retval = True
        return 0

    def _fast_up(self, cpu: CPU, t: Task) -> int:
        fast = self._fast_allowed()
        if fast:
            self.fast_read_ctr[cpu.index] -= 1
        t.retval = fast
        return self.fast_cost

    def _slow_inc(self, cpu: CPU, t: Task) -> int:
        self.slow_read_ctr += 1
        return self.slow_cost // 2

    def _slow_dec(self, cpu: CPU, t: Task) -> int:
        self.slow_read_ctr -= 1
        cost = self.slow_cost // 2
        if self.slow_read_ctr == 0:  # atomic_dec_and_test(): wake the writer
            cost += self.write_waitq.wake_all(cpu)
        return cost

    def down_read(self) -> Generator[Op, Any, None]:
        """percpu_down_read()."""
        yield self._op_rlock
        fast = yield self._op_fast_down
        yield self._op_runlock
        if fast:
            self.fast_reads += 1
        else:
            self.slow_reads += 1
            yield self.rw_sem.op_down_read  # waits while a writer holds rw_sem
            yield self._op_slow_inc
            yield self.rw_sem.op_up_read  # __up_read(): the slow counter now holds us
        self._reader_in()

    def up_read(self) -> Generator[Op, Any, None]:
        """percpu_up_read()."""
        self.readers_inside -= 1
        yield self._op_rlock
        fast = yield self._op_fast_up
        yield self._op_runlock
        if not fast:
            yield self._op_slow_dec

    def _reader_in(self) -> None:
        self.readers_inside += 1
        if self.writer_inside is not None:
            self.violations.append(f"{self.m.now}: a reader entered while {self.writer_inside.name} held the lock")

    # ------------------------------------------------------------------ writers
    def _write_ctr_inc(self, cpu: CPU, t: Task) -> int:
        self.write_ctr += 1
        return self.slow_cost // 2

    def _write_ctr_dec(self, cpu: CPU, t: Task) -> int:
        self.write_ctr -= 1
        return self.slow_cost // 2

    def _clear_fast(self, cpu: CPU, t: Task) -> int:
        self.slow_read_ctr += sum(self.fast_read_ctr)
        for i in range(len(self.fast_read_ctr)):
            self.fast_read_ctr[i] = 0
        return self.sum_cost

    def _wait_readers(self, cpu: CPU, t: Task) -> int:
        if self.slow_read_ctr == 0:
            return 0
        t.post = self._wait_readers
        return self.write_waitq.block(t)

    def _sync(self) -> Generator[Op, Any, None]:
        self.sync_calls += 1
        yield self._op_sync

    def down_write(self, task: Task) -> Generator[Op, Any, None]:
        """percpu_down_write()."""
        if self.rss is not None:
            yield from self.rss.enter()
        else:
            yield self._op_write_ctr_inc
            yield from self._sync()
        yield self.rw_sem.op_down_write
        yield self._op_clear_fast
        yield self._op_wait_readers
        self.writes += 1
        self.writer_inside = task
        if self.readers_inside > 0:
            self.violations.append(f"{self.m.now}: {task.name} got the lock with {self.readers_inside} reader(s) inside")

    def up_write(self) -> Generator[Op, Any, None]:
        """percpu_up_write()."""
        self.writer_inside = None
        yield self.rw_sem.op_up_write
        if self.rss is not None:
            yield from self.rss.exit()
        else:
            yield from self._sync()
            yield self._op_write_ctr_dec

    def metrics(self) -> dict[str, float]:
        out = {
            "writes": float(self.writes),
            "fast_reads": float(self.fast_reads),
            "slow_reads": float(self.slow_reads),
            "writer_synchronize_calls": float(self.sync_calls),
        }
        if self.rss is not None:
            for k, v in self.rss.metrics().items():
                out[f"rcu_sync_{k}"] = v
        return out


class PercpuRwsemModel:
    """The installed ``[kernel.percpu_rwsem]`` mechanism: creates semaphores for workloads."""

    def __init__(self, m: Machine, cfg: PercpuRwsemConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.sems: list[PercpuRwsem] = []

    def new(self, name: str) -> PercpuRwsem:
        if "rcu" not in getattr(self.m, "models", {"rcu": None}):
            raise ScenarioError("a percpu_rw_semaphore needs RCU ([kernel.rcu])")
        sem = PercpuRwsem(self, name)
        self.sems.append(sem)
        return sem

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for sem in self.sems:
            for k, v in sem.metrics().items():
                key = k if len(self.sems) == 1 else f"{sem.name}.{k}"
                out[key] = v
        return out


def install(m: Machine, cfg: PercpuRwsemConfig) -> PercpuRwsemModel:
    return PercpuRwsemModel(m, cfg)
