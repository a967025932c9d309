"""The timer primitives a task script yields (handled by :class:`models.timers.model.TimersModel`).

Build them once and yield them many times in hot loops, as with every op.
"""

from __future__ import annotations

from sim.ops import Op

from .wheel import Timer


class TimerArm(Op):
    """mod_timer(timer, jiffies + timeout): (re)arm ``timer`` to expire ``ns`` from now,
    rounded up to whole jiffies as msecs_to_jiffies()/usecs_to_jiffies() do. Where the timer
    is queued depends on ``[kernel.timers] timer_migration`` and ``timer.pinned``. The result
    is True when the timer was pending (mod_timer's return value)."""

    __slots__ = ("timer", "ns")

    def __init__(self, timer: Timer, ns: int) -> None:
        if ns < 0:
            raise ValueError(f"timer timeout must be >= 0 ns, got {ns}")
        self.timer = timer
        self.ns = int(ns)


class TimerCancel(Op):
    """timer_delete() (del_timer): dequeue ``timer`` if it is pending. The result is True when
    it was pending."""

    __slots__ = ("timer",)

    def __init__(self, timer: Timer) -> None:
        self.timer = timer


class ScheduleTimeout(Op):
    """schedule_timeout(timeout) in TASK_UNINTERRUPTIBLE: arm a ``process_timeout`` timer (a
    global, non-pinned timer on the task's stack) and sleep until it wakes the task. ``ns`` is
    rounded up to whole jiffies; ``jiffies`` gives the timeout in jiffies directly."""

    __slots__ = ("ns", "jiffies")

    def __init__(self, ns: int = 0, jiffies: int | None = None) -> None:
        if ns < 0 or (jiffies is not None and jiffies < 0):
            raise ValueError("schedule_timeout needs a timeout >= 0")
        self.ns = int(ns)
        self.jiffies = jiffies


__all__ = ["Timer", "TimerArm", "TimerCancel", "ScheduleTimeout"]
