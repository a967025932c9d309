"""Wait queues and channels (pipes, stream sockets) between tasks.

A :class:`WaitQueue` is the kernel's ``wait_queue_head_t``: tasks park on it and a waker wakes
one or all of them, paying ``costs.wakeup`` for each. A :class:`Channel` is a bounded FIFO of
messages with a reader and a writer wait queue, as a pipe is (fs/pipe.c: a writer blocks while
the ring is full, a reader while it is empty, and each side wakes the other); with
``message_bytes`` its capacity and wakeups follow fs/pipe.c page by page (:class:`Channel`).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from .ops import BLOCKED, Recv, Send
from .stats import FLUSH, LogHistogram

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

    def wake_all(self, waker: CPU | None, sync: bool = False) -> int:
        """Wake every waiter; ``sync`` is WF_SYNC (see :meth:`sim.machine.Machine.wake`)."""
        cost = 0
        w = self.waiters
        while w:
            cost += self.m.wake(w.popleft(), waker, False, sync)
        return cost


PAGE_SIZE = 4096
PIPE_DEF_BUFFERS = 16  # include/linux/pipe_fs_i.h


class Channel:
    """A pipe-like channel holding at most ``capacity`` messages.

    With ``message_bytes`` it is a pipe as fs/pipe.c (5.5+) keeps one: a ring of ``capacity``
    page buffers (PIPE_DEF_BUFFERS = 16). ``pipe_write`` merges a small write into the last
    page only while the pipe is not empty and the page has room, else it takes a new page, and
    blocks while all ``capacity`` pages are in use; it wakes a reader only when the pipe was
    empty, and a writer that had waited wakes the next writer if room is left.
    ``pipe_read`` frees a page when its last byte is read and wakes one writer when that
    frees a slot of a full ring. Both wait queues are exclusive (one waiter woken at a time).

    Every message records when it was sent, so :attr:`latency` collects send-to-receive times.
    """

    __slots__ = (
        "m", "name", "capacity", "buf", "readers", "writers", "latency", "received",
        "message_bytes", "pages", "last_end", "commit",
    )  # fmt: skip

    def __init__(self, machine: Machine, name: str = "", capacity: int = 16, message_bytes: int | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"channel {name!r}: capacity must be >= 1, got {capacity}")
        if message_bytes is not None and not 1 <= message_bytes <= PAGE_SIZE:
            raise ValueError(f"channel {name!r}: message_bytes must be 1..{PAGE_SIZE}, got {message_bytes}")
        self.m = machine
        self.name = name
        self.capacity = capacity
        # the messages, oldest first: each its send time, or (send time, payload) if it has a payload
        self.buf: deque[Any] = deque()
        self.readers = WaitQueue(machine, f"{name}.readers")
        self.writers = WaitQueue(machine, f"{name}.writers")
        self.latency: LogHistogram | None = None
        self.received = 0
        self.message_bytes = message_bytes
        self.pages: deque[int] = deque()  # paged mode: unread messages of each page in use, oldest first
        self.last_end = 0  # paged mode: offset + len of the last page
        # what a send does when its copy ends (install_channel_ops: the paged or the plain commit)
        self.commit = machine.channel_commit[message_bytes is not None]

    @property
    def sent(self) -> int:
        """Messages written so far (those read and those still in the channel)."""
        return self.received + len(self.buf)


def install_channel_ops(m: Machine) -> None:
    """Register the Send and Recv handlers on machine ``m``.

    The handlers run for every message, so they read what they need into locals, keep their
    scratch state in the task's slots (``op``, ``pipe_waited``), and do WaitQueue.block and
    wake_one's work inline; paged and unpaged channels get their own closures.
    """
    jit = m.jitter("pipe")
    pop, refill = jit.pop, jit.refill
    env = m.env
    wake = m.wake
    costs = m.costs
    send_cost = costs.pipe_send + costs.syscall
    recv_cost = costs.syscall + costs.pipe_recv
    pipe_recv = costs.pipe_recv

    def commit_paged(cpu: CPU, t: Task) -> int:
        # pipe_write (fs/pipe.c): merge into the last page if the pipe is not empty and it has room
        op: Send = t.op
        ch = op.channel
        size: int = ch.message_bytes  # type: ignore[assignment]
        pages = ch.pages
        buf = ch.buf
        was_empty = not buf
        if not was_empty and ch.last_end + size <= PAGE_SIZE:
            pages[-1] += 1
            ch.last_end += size
        elif len(pages) < ch.capacity:
            pages.append(1)
            ch.last_end = size
        else:
            # pipe_full: wait (exclusively) for a page to be freed, then copy again
            t.pipe_waited = True
            t.post = commit_paged
            ch.writers.waiters.append(t)
            return BLOCKED
        payload = op.payload
        buf.append(env._now if payload is None else (env._now, payload))
        cost = 0
        if was_empty:
            w = ch.readers.waiters
            if w:
                cost += wake(w.popleft(), cpu, False, True)
        if t.pipe_waited:
            t.pipe_waited = False
            if len(pages) < ch.capacity:
                w = ch.writers.waiters
                if w:
                    cost += wake(w.popleft(), cpu, False, True)  # wake_next_writer
        return cost

    def commit_plain(cpu: CPU, t: Task) -> int:
        op: Send = t.op
        ch = op.channel
        if len(ch.buf) >= ch.capacity:
            # pipe_write: wait for room, then copy again
            t.post = commit_plain
            ch.writers.waiters.append(t)
            return BLOCKED
        payload = op.payload
        ch.buf.append(env._now if payload is None else (env._now, payload))
        w = ch.readers.waiters
        if w:
            return wake(w.popleft(), cpu, False, True)
        return 0

    def h_send_free(cpu: CPU, t: Task, op: Send) -> int:
        # h_send when sending costs nothing (no draw, as apply(0))
        t.op = op
        t.post = op.channel.commit
        return send_cost

    def h_send(cpu: CPU, t: Task, op: Send) -> int:
        # the copy into the pipe is the op's CPU time; the message is there when it ends
        t.op = op
        t.post = op.channel.commit  # commit_paged or commit_plain
        # apply(send_cost), inlined (see Jitter); send_cost > 0 here
        try:
            v = (send_cost * pop()).__trunc__()
        except IndexError:
            refill()
            v = (send_cost * pop()).__trunc__()
        return v if v > 0 else 1

    def free_page(cpu: CPU, ch: Any, pages: Any, lat: Any) -> int:
        """pipe_read freed the ring's first page (its last byte was read): bin the buffered
        latencies if enough, and wake a writer if the ring was full; the wakeup's cost."""
        if lat is not None and len(lat.pending) >= FLUSH:
            lat.flush()
        was_full = len(pages) >= ch.capacity
        pages.popleft()
        if not pages:
            ch.last_end = 0
        if was_full:
            w = ch.writers.waiters
            if w:
                return wake(w.popleft(), cpu, False, True)
        return 0

    def take(cpu: CPU, t: Task, ch: Channel, cost: int) -> int:
        sent_at = ch.buf.popleft()
        if sent_at.__class__ is tuple:
            sent_at, payload = sent_at
        else:
            payload = None
        ch.received += 1
        lat = ch.latency
        if lat is not None:
            lat.pending.append(env._now - sent_at)  # lat.add, inlined as in h_recv
        t.retval = payload
        if ch.message_bytes is not None:
            # pipe_read: a page whose last byte is read is freed; freeing a slot of a full ring wakes a writer
            pages = ch.pages
            n = pages[0] - 1
            if n:
                pages[0] = n
                return cost
            return cost + free_page(cpu, ch, pages, lat)
        if lat is not None and len(lat.pending) >= FLUSH:
            lat.flush()
        w = ch.writers.waiters
        if w:
            cost += wake(w.popleft(), cpu, False, True)
        return cost

    def recv_retry(cpu: CPU, t: Task) -> int:
        ch: Any = t.op.channel
        if not ch.buf:
            t.post = recv_retry
            ch.readers.waiters.append(t)
            return BLOCKED
        # cost = apply(pipe_recv), inlined (see Jitter)
        if pipe_recv <= 0:
            cost = pipe_recv
        else:
            try:
                cost = (pipe_recv * pop()).__trunc__()
            except IndexError:
                refill()
                cost = (pipe_recv * pop()).__trunc__()
            if cost <= 0:
                cost = 1
        return take(cpu, t, ch, cost)

    def h_recv(cpu: CPU, t: Task, op: Recv) -> int:
        # pipe_read looks for data on entry: entry and copy are one span of CPU time
        ch = op.channel
        buf = ch.buf
        if not buf:
            t.op = op
            t.post = recv_retry
            ch.readers.waiters.append(t)
            return BLOCKED
        # cost = apply(recv_cost), inlined (see Jitter)
        if recv_cost <= 0:
            cost = recv_cost
        else:
            try:
                cost = (recv_cost * pop()).__trunc__()
            except IndexError:
                refill()
                cost = (recv_cost * pop()).__trunc__()
            if cost <= 0:
                cost = 1
        if ch.message_bytes is None:
            return take(cpu, t, ch, cost)
        # take(), paged, inlined (the usual receive); the op loop has set t.retval to None
        sent_at = buf.popleft()
        if sent_at.__class__ is tuple:
            sent_at, t.retval = sent_at
        ch.received += 1
        lat = ch.latency
        if lat is not None:
            # lat.add(now - sent_at), inlined (see LogHistogram.pending); flushed below
            lat.pending.append(env._now - sent_at)
        pages = ch.pages
        n = pages[0] - 1
        if n:
            pages[0] = n
            return cost
        # The first page is freed: also the time to bin the buffered latencies, if enough (at
        # most PAGE_SIZE / message_bytes receives later than add() would; binning is exact
        # whenever it happens).
        return cost + free_page(cpu, ch, pages, lat)

    m.channel_commit = (commit_plain, commit_paged)
    m.handle(Send, h_send if send_cost > 0 else h_send_free)
    m.handle(Recv, h_recv)
