"""The primitives a task script yields.

A task's script is a generator; each ``yield`` hands the machine one of these ops and receives
the op's result (e.g. the message a :class:`Recv` got). The substrate implements the ops here;
``models/`` adds its own op classes (locks, RCU calls, timers, membarrier) and registers a
handler for each with :meth:`sim.machine.Machine.handle`.

Ops are immutable and may be built once and yielded many times (a hot loop should do that).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

if TYPE_CHECKING:
    from .channel import Channel
    from .machine import CPU
    from .task import Task

Script = Generator["Op", Any, None]
ScriptFactory = Callable[["Task"], Script]


@mypyc_attr(allow_interpreted_subclasses=True)  # the models' own ops (sim/compiled.py)
class Op:
    """Base of all ops."""

    __slots__ = ()


class CpuWork(Op):
    """Compute for ``ns`` nanoseconds (user mode by default)."""

    __slots__ = ("ns", "user")

    def __init__(self, ns: int, user: bool = True) -> None:
        if ns < 0:
            raise ValueError(f"cpu work must be >= 0 ns, got {ns}")
        self.ns = int(ns)
        self.user = user


class Syscall(Op):
    """A system call doing ``ns`` of kernel work (plus the entry/exit cost)."""

    __slots__ = ("ns",)

    def __init__(self, ns: int = 0) -> None:
        if ns < 0:
            raise ValueError(f"syscall work must be >= 0 ns, got {ns}")
        self.ns = int(ns)


class Sleep(Op):
    """Block for ``ns`` (nanosleep): the wakeup arrives as a timer interrupt on the CPU the
    task slept on."""

    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        if ns < 0:
            raise ValueError(f"sleep must be >= 0 ns, got {ns}")
        self.ns = int(ns)


class Spawn(Op):
    """fork() (and with ``exec``, execve()) a child that runs ``script``; with ``wait`` the
    parent blocks in waitpid() until the child exits. The result is the child
    :class:`~sim.task.Task`. With ``thread`` the child shares the parent's address space
    (clone(CLONE_VM), a thread: no ``Costs.mm_switch`` between them); its creation and exit
    are charged as a process's (``Costs.fork``, ``Costs.exit``)."""

    __slots__ = ("script", "name", "wait", "policy", "prio", "affinity", "exec", "thread")

    def __init__(
        self,
        script: ScriptFactory,
        name: str,
        wait: bool = True,
        policy: str = "other",
        prio: int = 0,
        affinity: tuple[int, ...] | None = None,
        exec: bool = True,  # noqa: A002 - the syscall's name
        thread: bool = False,
    ) -> None:
        if thread and exec:
            raise ValueError(f"spawn {name}: a thread (thread=True) cannot exec (exec=False)")
        self.thread = thread
        self.exec = exec
        self.script = script
        self.name = name
        self.wait = wait
        self.policy = policy
        self.prio = prio
        self.affinity = affinity


class WaitChild(Op):
    """waitpid() for a child spawned earlier with ``wait=False``."""

    __slots__ = ("child",)

    def __init__(self, child: Task) -> None:
        self.child = child


class Send(Op):
    """Write one message to a channel (pipe or socket); blocks while the channel is full."""

    __slots__ = ("channel", "payload")

    def __init__(self, channel: Channel, payload: Any = None) -> None:
        self.channel = channel
        self.payload = payload


class Recv(Op):
    """Read one message from a channel; blocks while it is empty. The result is the payload."""

    __slots__ = ("channel",)

    def __init__(self, channel: Channel) -> None:
        self.channel = channel


class Yield(Op):
    """sched_yield(): give the CPU to another runnable task of the same class if there is one."""

    __slots__ = ()


class Call(Op):
    """Escape hatch for mechanisms: ``fn(cpu, task)`` runs in kernel context and returns the
    kernel time it costs, or :data:`BLOCKED` after parking the task on a wait queue."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[CPU, Task], int]) -> None:
        self.fn = fn


class BoundOp(Op):
    """An op that carries its handler: ``run(cpu, task, op)``, typically a bound method of
    the object the op acts on (a lock's ``acquire``). A model registers the class with
    :func:`run_bound` as its handler (:meth:`sim.machine.Machine.handle`); the engine then
    calls ``op.run`` itself, without a handler that would look the object up and call it (one
    Python call less per op: locks are taken several times per message)."""

    __slots__ = ("run",)

    run: Callable[[CPU, Task, Any], int]


def run_bound(cpu: CPU, t: Task, op: BoundOp) -> int:
    """The handler of :class:`BoundOp` classes (the engine calls ``op.run`` directly when it
    sees this handler; anything else calling the handler gets the same result)."""
    return op.run(cpu, t, op)


BLOCKED = -1
"""Returned by an op handler that parked the task; a later wakeup resumes it."""


# Lower-case builders read naturally in scripts: ``yield cpu(5 * US)``.
def cpu(ns: int, user: bool = True) -> CpuWork:
    return CpuWork(ns, user)


def syscall(ns: int = 0) -> Syscall:
    return Syscall(ns)


def sleep(ns: int) -> Sleep:
    return Sleep(ns)
