"""futex(2) on userspace words: FUTEX_WAIT and FUTEX_WAKE (kernel/futex/waitwake.c).

A :class:`FutexWord` is a 32-bit userspace integer with the kernel's wait list for it (the
hash bucket's queue, one per word here). User code changes ``value`` directly (a store or an
atomic in a :class:`~sim.ops.Call` op); the syscalls are ops:

* ``FutexWait(word, expected)``: after syscall entry and the bucket lock, the kernel compares
  the word with ``expected``; if it differs the call returns ``-EAGAIN`` (the script receives
  it), else the task sleeps until a ``FutexWake`` on the word. The comparison and the queueing
  are atomic with respect to wakers, as the hash-bucket lock makes them (futex_wait_setup).
* ``FutexWake(word, n)``: wakes up to ``n`` waiters (oldest first); the result is the number
  woken. Each wakeup costs the waker ``costs.wakeup`` (try_to_wake_up).

Used by the userspace RCU model (liburcu's ``rcu_gp.futex``, its wait-queue nodes and glibc's
mutexes, :mod:`models.sync.urcu`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.channel import WaitQueue
from sim.ops import BLOCKED, Op

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

EAGAIN = -11


class FutexWord:
    """A userspace futex word and the tasks waiting on it."""

    __slots__ = ("name", "value", "waiters")

    def __init__(self, m: Machine, name: str = "futex", value: int = 0) -> None:
        self.name = name
        self.value = value
        self.waiters = WaitQueue(m, name)

    def __repr__(self) -> str:
        return f"<FutexWord {self.name}={self.value}>"


class FutexWait(Op):
    """futex(word, FUTEX_WAIT, expected): sleep while the word holds ``expected``."""

    __slots__ = ("word", "expected")

    def __init__(self, word: FutexWord, expected: int) -> None:
        self.word = word
        self.expected = expected


class FutexWake(Op):
    """futex(word, FUTEX_WAKE, n): wake up to ``n`` waiters; the result is how many."""

    __slots__ = ("word", "n")

    def __init__(self, word: FutexWord, n: int = 1) -> None:
        if n < 1:
            raise ValueError("FUTEX_WAKE needs n >= 1")
        self.word = word
        self.n = n


class Futex:
    """The futex syscalls on one machine (installed by the ``membarrier`` mechanism)."""

    def __init__(self, m: Machine, futex_op: int) -> None:
        self.m = m
        self.jit = m.jitter("futex")
        self.entry = m.costs.syscall + futex_op
        self.waits = 0
        self.sleeps = 0
        self.wakes = 0
        self.woken = 0
        m.handle(FutexWait, self._h_wait)
        m.handle(FutexWake, self._h_wake)

    def _h_wait(self, cpu: CPU, t: Task, op: FutexWait) -> int:
        self.waits += 1
        word = op.word
        if word.value != op.expected:
            t.retval = EAGAIN
            return self.jit.apply(self.entry)
        # the comparison and the queueing happen under the bucket lock, after the entry cost
        t.data["_futex_op"] = op
        t.post = self._wait_queue
        return self.jit.apply(self.entry)

    def _wait_queue(self, cpu: CPU, t: Task) -> int:
        op: FutexWait = t.data.pop("_futex_op")
        if op.word.value != op.expected:
            t.retval = EAGAIN
            return 0
        self.sleeps += 1
        t.retval = 0
        return op.word.waiters.block(t)

    def _h_wake(self, cpu: CPU, t: Task, op: FutexWake) -> int:
        self.wakes += 1
        q = op.word.waiters
        cost = self.jit.apply(self.entry)
        n = 0
        while n < op.n and q.waiters:
            cost += q.wake_one(cpu)
            n += 1
        self.woken += n
        t.retval = n
        return cost

    def metrics(self) -> dict[str, float]:
        if not (self.waits or self.wakes):
            return {}
        return {
            "futex_waits": float(self.waits),
            "futex_sleeps": float(self.sleeps),
            "futex_wakes": float(self.wakes),
            "futex_woken": float(self.woken),
        }


__all__ = ["BLOCKED", "EAGAIN", "Futex", "FutexWait", "FutexWake", "FutexWord"]
