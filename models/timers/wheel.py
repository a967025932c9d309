"""The per-CPU timer wheel of kernel/time/timer.c (the 4.8+ non-cascading wheel).

Geometry as in the kernel (:mod:`sim.timerwheel`, shared with the substrate's jiffy timers):
``LVL_DEPTH`` levels (9 when HZ > 100, else 8) of ``LVL_SIZE`` = 64 buckets; level ``n`` has a
granularity of ``8**n`` jiffies (``LVL_CLK_SHIFT`` = 3) and holds timers whose distance from the
base clock is in ``[LVL_START(n), LVL_START(n + 1))`` with ``LVL_START(n) = 63 << 3 * (n - 1)``.
:func:`calc_wheel_index` follows ``calc_wheel_index()``
and ``calc_index()``: the expiry is rounded *up* to the level's granularity (plus one unit),
which is why a wheel timer never fires early and fires later the farther out it was armed;
timeouts beyond the last level are clamped to ``WHEEL_TIMEOUT_MAX``.

The kernel keeps a pending bitmap and scans it for the next expiring bucket
(``timer_recalc_next_expiry()``); expiring a bucket takes every timer in it
(``collect_expired_timers()``). All timers of one bucket share one bucket expiry, so the
wheel is represented here by a heap keyed by that bucket expiry: the first entry is the
kernel's ``base->next_expiry`` and "every timer whose bucket expiry is <= jiffies" is exactly
what ``__run_timers()`` expires. ``base->clk`` is kept and forwarded as
``__forward_timer_base()`` does, because it decides the level (hence the granularity) of a
newly armed timer.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.timerwheel import LVL_CLK_SHIFT, LVL_MASK, LVL_SIZE, calc_wheel_index, lvl_depth, lvl_gran, lvl_start

if TYPE_CHECKING:
    from sim.machine import CPU
    from sim.task import Task

__all__ = [
    "BASE_DEF", "BASE_GLOBAL", "BASE_LOCAL", "BASE_NAMES", "INF", "LVL_CLK_SHIFT", "LVL_MASK", "LVL_SIZE",
    "Timer", "TimerBase", "TimerFn", "calc_wheel_index", "describe_levels", "lvl_depth", "lvl_gran", "lvl_start",
]  # fmt: skip

INF = 1 << 62  # "no timer" (KTIME_MAX / base->clk + NEXT_TIMER_MAX_DELTA)

# the three per-CPU bases of a NO_HZ_COMMON kernel since v6.9 (kernel/time/timer.c)
BASE_LOCAL, BASE_GLOBAL, BASE_DEF = 0, 1, 2
BASE_NAMES = ("local", "global", "deferrable")


TimerFn = Callable[["CPU", "Timer"], int]


class Timer:
    """A ``struct timer_list``: a callback, flags and, while pending, the base it is queued on.

    ``fn(cpu, timer)`` runs in the timer softirq of ``cpu`` (which is not the base's CPU when
    the pull model expires it remotely) and returns the CPU time it costs. ``pinned`` is
    TIMER_PINNED (always expired on the CPU it was queued on: the local base since v6.9);
    ``deferrable`` is TIMER_DEFERRABLE (never wakes an idle CPU).
    """

    __slots__ = (
        "name", "fn", "pinned", "deferrable", "base", "expires", "bucket_expiry", "idx", "level",
        "seq", "armed_ns", "due_ns", "fired", "task", "kind", "armed_cpu",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        fn: TimerFn | None = None,
        pinned: bool = False,
        deferrable: bool = False,
        kind: str = "timer",
        task: Task | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.pinned = pinned
        self.deferrable = deferrable
        self.base: TimerBase | None = None
        self.expires = 0
        self.bucket_expiry = 0
        self.idx = -1
        self.level = 0
        self.seq = 0
        self.armed_ns = 0  # when it was last armed
        self.due_ns = 0  # armed_ns + the requested timeout: it must not fire before this
        self.fired = 0
        self.task = task  # the sleeper of a process_timeout timer
        self.kind = kind
        self.armed_cpu = -1  # CPU that armed it (the "home" of a schedule_timeout)

    @property
    def pending(self) -> bool:
        """timer_pending()"""
        return self.base is not None

    def __repr__(self) -> str:
        where = f"cpu{self.base.cpu}/{BASE_NAMES[self.base.kind]}" if self.base is not None else "idle"
        return f"<Timer {self.name} {where}>"


class TimerBase:
    """One ``struct timer_base`` of one CPU (local, global or deferrable)."""

    __slots__ = ("cpu", "kind", "clk", "depth", "heap", "count", "seq", "line_cpu")

    def __init__(self, cpu: int, kind: int, depth: int, clk: int = 0) -> None:
        self.cpu = cpu
        self.kind = kind
        self.clk = clk
        self.depth = depth
        self.heap: list[tuple[int, int, Timer]] = []
        self.count = 0
        self.seq = 0
        # the CPU whose cache holds this base's hot line (lock, clk, next_expiry): an access
        # from any other CPU is a cache-line transfer (see TimersModel.line)
        self.line_cpu = cpu

    def __len__(self) -> int:
        return self.count

    @property
    def next_expiry(self) -> int:
        """The bucket expiry (jiffies) of the first pending timer, or INF."""
        heap = self.heap
        while heap:
            e, seq, t = heap[0]
            if t.base is self and t.seq == seq:
                return e
            heapq.heappop(heap)
        return INF

    def forward(self, jnow: int) -> None:
        """__forward_timer_base(): bring clk up to jiffies, or to the first expiry if that is
        earlier, so that a timer armed now gets the level its real distance calls for."""
        if jnow <= self.clk:
            return
        nxt = self.next_expiry
        self.clk = jnow if nxt > jnow else nxt

    def add(self, t: Timer, expires: int) -> bool:
        """Enqueue ``t`` to expire at jiffy ``expires`` (internal_add_timer); True when it is
        the new first timer of the base (enqueue_timer then kicks an idle CPU)."""
        idx, bucket_expiry, lvl = calc_wheel_index(expires, self.clk, self.depth)
        first = bucket_expiry < self.next_expiry
        self.seq += 1
        t.base = self
        t.expires = expires
        t.bucket_expiry = bucket_expiry
        t.idx = idx
        t.level = lvl
        t.seq = self.seq
        heapq.heappush(self.heap, (bucket_expiry, self.seq, t))
        self.count += 1
        return first

    def remove(self, t: Timer) -> None:
        """detach_if_pending(): the heap entry becomes stale."""
        assert t.base is self
        t.base = None
        t.seq = 0
        self.count -= 1

    def collect(self, jnow: int) -> list[Timer]:
        """__run_timers(): detach and return every timer whose bucket expiry is <= jiffies,
        in expiry order; clk ends one past the last expired bucket."""
        out: list[Timer] = []
        heap = self.heap
        while heap:
            e, seq, t = heap[0]
            if t.base is not self or t.seq != seq:
                heapq.heappop(heap)
                continue
            if e > jnow:
                break
            heapq.heappop(heap)
            t.base = None
            t.seq = 0
            self.count -= 1
            out.append(t)
            if e + 1 > self.clk:
                self.clk = e + 1
        return out

    def timers(self) -> list[Timer]:
        """The pending timers, in expiry order (for tests and diagnostics)."""
        return [t for e, seq, t in sorted(self.heap, key=lambda x: (x[0], x[1])) if t.base is self and t.seq == seq]


def describe_levels(hz: int) -> list[dict[str, Any]]:
    """The wheel's levels at ``hz``: granularity and range in ms, as the table at the top of
    kernel/time/timer.c prints them."""
    depth = lvl_depth(hz)
    jiffy_ms = 1000 / hz
    rows = []
    for n in range(depth):
        lo = 0 if n == 0 else lvl_start(n)
        hi = lvl_start(n + 1) - 1 if n < depth - 1 else lvl_start(depth) - lvl_gran(depth - 1)
        rows.append(
            {
                "level": n,
                "offset": n * LVL_SIZE,
                "granularity_ms": lvl_gran(n) * jiffy_ms,
                "range_ms": (lo * jiffy_ms, hi * jiffy_ms),
            }
        )
    return rows
