"""Tasks: what the scheduler runs.

A task runs a script (a generator of :mod:`sim.ops`). Its scheduling class is SCHED_OTHER
(fair share by virtual runtime, as CFS) or SCHED_FIFO (fixed priority 1..99, higher wins).
``kthread`` marks kernel threads (rcuog, rcuoc, the RCU GP kthread...), which the trace and
the metrics show apart from user tasks. ``mm`` is the task's address space: every user process
has its own, threads share their process's, kernel threads have none (0) and run on the
previous task's (lazy TLB), so a switch to a different mm costs ``Costs.mm_switch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .machine import CPU
    from .ops import Script

RUNNABLE = 0
BLOCKED = 1
DONE = 2

NICE_0_WEIGHT = 1024


class Task:
    __slots__ = (
        "tid", "name", "script", "policy", "prio", "weight", "vruntime", "state", "cpu",
        "affinity", "remaining", "seg_user", "post", "retval", "preempt_count",
        "kthread", "parent", "exit_waiters", "started", "wait_since", "last_ran",
        "run_ns", "wait_ns", "nvcsw", "nivcsw", "migrations", "wakeups", "ended", "data",
        "base_prio", "_rq_seq", "on_cpu", "ran_cpu", "slice_exec", "op", "pipe_waited", "on_end",
        "deadline", "vlag", "vprot", "delayed", "vcredit", "mm", "load_avg", "load_t", "held", "lockw",
        "vplain",
    )  # fmt: skip

    def __init__(
        self,
        tid: int,
        name: str,
        script: Script,
        policy: str = "other",
        prio: int = 0,
        affinity: tuple[int, ...] | None = None,
        kthread: bool = False,
        parent: Task | None = None,
        mm: int = 0,
    ) -> None:
        if policy not in ("other", "fifo"):
            raise ValueError(f"task {name}: policy must be 'other' or 'fifo', got {policy!r}")
        if policy == "fifo" and not 1 <= prio <= 99:
            raise ValueError(f"task {name}: SCHED_FIFO priority must be 1..99, got {prio}")
        self.tid = tid
        self.name = name
        self.script = script
        self.policy = policy
        self.prio = prio if policy == "fifo" else 0
        self.base_prio = self.prio
        self.weight = NICE_0_WEIGHT
        self.vruntime = 0
        self.state = RUNNABLE
        self.cpu = -1  # last CPU it ran or was queued on
        self.affinity = affinity
        self.remaining = 0  # ns left of an interrupted segment
        self.seg_user = True  # the mode of its paused segment (CPU._pause), read when it resumes
        self.post: Callable[[CPU, Task], int] | None = None
        self.retval: Any = None
        self.preempt_count = 0
        self.kthread = kthread
        # the address space (task->mm): an id shared by the threads of one process, 0 for a kernel
        # thread (no mm of its own: it borrows the previous task's, lazy TLB)
        self.mm = mm
        self.parent = parent
        self.exit_waiters: list[Task] = []
        self.started = 0
        self.ended = -1
        self.wait_since = 0
        self.last_ran = 0
        self.run_ns = 0
        self.wait_ns = 0
        self.nvcsw = 0  # voluntary switches (blocked)
        self.nivcsw = 0  # involuntary switches (preempted)
        self.migrations = 0
        self.wakeups = 0
        self.on_cpu = False
        self.ran_cpu = -1  # CPU it last ran on (a different one costs a migration)
        self.slice_exec = 0  # run_ns when it was last picked (for the CFS slice check)
        # kernel.sched = "eevdf" (sim/machine.py, kernel/sched/fair.c): virtual deadline, lag kept
        # across a sleep, the vruntime up to which the slice is protected, delayed dequeue
        self.deadline = 0
        self.vlag = 0
        self.vprot = 0
        self.delayed = False
        self.vcredit = 0  # eevdf: run time already in vruntime (a waker's wakeup work, see Machine.wake)
        # run time goes into vruntime one to one: a fair task (prio 0) of weight 1024 without
        # vcredit. The engine charges such a segment with one test (Env._loop); every write of
        # prio or vcredit calls update_vplain (weight is fixed at creation).
        self.vplain = False
        self.update_vplain()
        # kernel.wake_affine = "weight": the task's PELT load (se->avg.load_avg, kernel/sched/pelt.c) as
        # of load_t, its last wakeup; a new task starts at its full weight (init_entity_runnable_average)
        self.load_avg = NICE_0_WEIGHT
        self.load_t = 0
        self.data: dict[str, Any] = {}  # per-task state of models (reader state, lock waits...)
        # the kernel locks it holds, in the order taken (models/locks; task_struct's held_locks
        # of lockdep): a slot, not in ``data``, as it changes at every lock operation
        self.held: list[Any] = []
        self.lockw: Any = None  # its lock-wait state (models/locks LockWait), made when it first contends
        self._rq_seq = 0
        # scratch state of the op handlers, in slots rather than ``data`` (they run per message):
        self.op: Any = None  # the op a retry (``post``) completes (sim/channel.py)
        self.pipe_waited = False  # the writer waited for room in a pipe (sim/channel.py)
        # what the script's end yields first (Machine._process: the exit), or None: the task ends
        self.on_end: Callable[[], Any] | None = None

    def eevdf_uncredited(self, ns: int) -> int:
        """The part of ``ns`` of run time not yet in the vruntime (see ``vcredit``)."""
        d = min(ns, self.vcredit)
        self.vcredit -= d
        self.update_vplain()
        return ns - d

    def update_vplain(self) -> None:
        """Recompute ``vplain`` after ``prio`` or ``vcredit`` changed."""
        self.vplain = not self.prio and not self.vcredit and self.weight == NICE_0_WEIGHT

    @property
    def rt(self) -> bool:
        return self.prio > 0

    def allowed(self, cpu: int) -> bool:
        return self.affinity is None or cpu in self.affinity

    def __repr__(self) -> str:
        return f"<Task {self.tid} {self.name}>"
