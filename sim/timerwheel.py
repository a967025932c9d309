"""The timer wheel's geometry (kernel/time/timer.c, the 4.8+ non-cascading wheel): which bucket,
hence which jiffy, a timer armed for jiffy ``expires`` fires at.

``LVL_DEPTH`` levels (9 when HZ > 100, else 8) of ``LVL_SIZE`` = 64 buckets; level ``n`` has a
granularity of ``8**n`` jiffies (``LVL_CLK_SHIFT`` = 3) and holds timers whose distance from the
base clock is in ``[LVL_START(n), LVL_START(n + 1))`` with ``LVL_START(n) = 63 << 3 * (n - 1)``.
``calc_index()`` rounds the expiry *up* to the level's granularity plus one unit, so a timer
never fires early: at level 0 a timeout of ``j`` jiffies fires at the ``j + 1``-th tick after
it was armed, between ``j`` and ``j + 1`` jiffies later ("the off by one has a reason and is
required to prevent too short timeouts", tglx). Shared by the substrate's jiffy timers
(:meth:`sim.machine.CPU.add_jiffy_timer` with ``kernel.timer_wheel`` "v4.8" or "v6.9") and the
timers model's wheel (:mod:`models.timers.wheel`).
"""

from __future__ import annotations

LVL_CLK_SHIFT = 3
LVL_BITS = 6
LVL_SIZE = 1 << LVL_BITS
LVL_MASK = LVL_SIZE - 1


def lvl_depth(hz: int) -> int:
    """``LVL_DEPTH``: 9 levels when HZ > 100, else 8."""
    return 9 if hz > 100 else 8


def lvl_start(n: int) -> int:
    """``LVL_START(n)``: the smallest distance (in jiffies) that goes to level ``n``."""
    return (LVL_SIZE - 1) << ((n - 1) * LVL_CLK_SHIFT)


def lvl_gran(n: int) -> int:
    """``LVL_GRAN(n)``: the granularity of level ``n`` in jiffies."""
    return 1 << (n * LVL_CLK_SHIFT)


def calc_wheel_index(expires: int, clk: int, depth: int) -> tuple[int, int, int]:
    """``(bucket index, bucket expiry, level)`` of a timer expiring at jiffy ``expires`` on a
    base whose clock is ``clk`` (calc_wheel_index() in kernel/time/timer.c)."""
    delta = expires - clk
    if delta < 0:
        # already expired: the current bucket, expiring at clk
        return clk & LVL_MASK, clk, 0
    lvl = depth - 1
    for n in range(depth - 1):
        if delta < lvl_start(n + 1):
            lvl = n
            break
    else:
        cutoff = lvl_start(depth)  # WHEEL_TIMEOUT_CUTOFF
        if delta >= cutoff:
            expires = clk + cutoff - lvl_gran(depth - 1)  # WHEEL_TIMEOUT_MAX
    shift = lvl * LVL_CLK_SHIFT
    e = (expires >> shift) + 1  # round up: never early (calc_index)
    return lvl * LVL_SIZE + (e & LVL_MASK), e << shift, lvl
