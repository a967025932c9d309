"""Wait queues and channels (pipes, stream sockets) between tasks.

A :class:`WaitQueue` is the kernel's ``wait_queue_head_t``: tasks park on it and a waker wakes
one or all of them, paying ``costs.wakeup`` for each. A :class:`Channel` is a bounded FIFO of
messages with a reader and a writer wait queue, as a pipe is (fs/pipe.c: a writer blocks while
the ring is full, a reader while it is empty, and each side wakes the other).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from .ops import BLOCKED, Recv, Send
from .stats import LogHistogram

if TYPE_CHECKING:
    from .machine import CPU, Machine
    from .task import Task


class WaitQueue:
    """FIFO of blocked tasks."""

    __slots__ = ("m", "name", "waiters")

    def __init__(self, machine: Machine, name: str = "") -> None:
        self.m = machine
        self.name = name
        self.waiters: deque[Task] = deque()

    def __len__(self) -> int:
        return len(self.waiters)

    def block(self, t: Task) -> int:
        """Park ``t``; return :data:`~sim.ops.BLOCKED` from the op handler."""
        self.waiters.append(t)
        return BLOCKED

    def wake_one(self, waker: CPU | None) -> int:
        """Wake the longest waiter; returns the waker's cost (0 if nobody waited)."""
        if not self.waiters:
            return 0
        return self.m.wake(self.waiters.popleft(), waker)

    def wake_all(self, waker: CPU | None) -> int:
        cost = 0
        w = self.waiters
        while w:
            cost += self.m.wake(w.popleft(), waker)
        return cost


class Channel:
    """A pipe-like channel holding at most ``capacity`` messages.

    Every message records when it was sent, so :attr:`latency` collects send-to-receive times.
    """

    __slots__ = ("m", "name", "capacity", "buf", "readers", "writers", "latency", "sent", "received")

    def __init__(self, machine: Machine, name: str = "", capacity: int = 16) -> None:
        if capacity < 1:
            raise ValueError(f"channel {name!r}: capacity must be >= 1, got {capacity}")
        self.m = machine
        self.name = name
        self.capacity = capacity
        self.buf: deque[tuple[int, Any]] = deque()
        self.readers = WaitQueue(machine, f"{name}.readers")
        self.writers = WaitQueue(machine, f"{name}.writers")
        self.latency: LogHistogram | None = None
        self.sent = 0
        self.received = 0


def install_channel_ops(m: Machine) -> None:
    """Register the Send and Recv handlers on machine ``m``."""
    jit = m.jitter("pipe")
    env = m.env
    costs = m.costs
    send_cost = costs.pipe_send + costs.syscall
    recv_cost = costs.syscall + costs.pipe_recv

    def send_commit(cpu: CPU, t: Task) -> int:
        op: Send = t.data["_op"]
        ch = op.channel
        if len(ch.buf) >= ch.capacity:
            # pipe_write: wait for room, then copy again
            t.post = send_commit
            return ch.writers.block(t)
        ch.buf.append((env._now, op.payload))
        ch.sent += 1
        if ch.readers.waiters:
            return ch.readers.wake_one(cpu)
        return 0

    def h_send(cpu: CPU, t: Task, op: Send) -> int:
        # the copy into the pipe is the op's CPU time; the message is there when it ends
        t.data["_op"] = op
        t.post = send_commit
        return jit.apply(send_cost)

    def take(cpu: CPU, t: Task, ch: Channel, cost: int) -> int:
        sent_at, payload = ch.buf.popleft()
        ch.received += 1
        if ch.latency is not None:
            ch.latency.add(env._now - sent_at)
        t.retval = payload
        if ch.writers.waiters:
            cost += ch.writers.wake_one(cpu)
        return cost

    def recv_retry(cpu: CPU, t: Task) -> int:
        ch: Any = t.data["_op"].channel
        if not ch.buf:
            t.post = recv_retry
            return ch.readers.block(t)
        return take(cpu, t, ch, jit.apply(costs.pipe_recv))

    def h_recv(cpu: CPU, t: Task, op: Recv) -> int:
        # pipe_read looks for data on entry: entry and copy are one span of CPU time
        ch = op.channel
        if ch.buf:
            return take(cpu, t, ch, jit.apply(recv_cost))
        t.data["_op"] = op
        t.post = recv_retry
        return ch.readers.block(t)

    m.handle(Send, h_send)
    m.handle(Recv, h_recv)
