"""Timers: the timer wheel, placement (push heuristic vs timer-migration pull), idle states.

``[kernel.timers]`` (:class:`~models.timers.config.TimersConfig`) selects the placement of
non-pinned timers (``timer_migration = "off" | "push" | "pull"``), the timer-migration
hierarchy, cpuidle states and the costs; the ops are in :mod:`models.timers.ops`
(``TimerArm``, ``TimerCancel``, ``ScheduleTimeout``); the workloads of the timers-2023 story
in :mod:`models.timers.workloads`. Kernel sources: docs/kernel/timers.md.
"""

from sim.scenario import Mechanism, WorkloadSpec

from . import workloads
from .config import TimersConfig
from .model import TIMER_SOFTIRQ, TimersModel, install
from .ops import ScheduleTimeout, TimerArm, TimerCancel
from .wheel import Timer

MECHANISMS: dict = {
    "timers": Mechanism(
        "timers",
        TimersConfig,
        install,
        "timer wheel, placement of non-pinned timers (off / push / pull), timer-migration hierarchy, cpuidle states",
    ),
}
WORKLOADS: dict = {
    "timer-loop": WorkloadSpec(
        "timer-loop", workloads.TimerLoopConfig, workloads.build_loop, "timer enqueue+dequeue micro-benchmark on an isolated CPU"
    ),
    "dbench-like": WorkloadSpec(
        "dbench-like", workloads.DbenchConfig, workloads.build_dbench, "client/server pairs with timeouts and short sleeps"
    ),
    "idle-sleepers": WorkloadSpec(
        "idle-sleepers",
        workloads.IdleSleepersConfig,
        workloads.build_idle,
        "mostly idle machine with schedule_timeout() sleepers",
    ),
}

__all__ = [
    "MECHANISMS",
    "WORKLOADS",
    "TIMER_SOFTIRQ",
    "TimersConfig",
    "TimersModel",
    "Timer",
    "TimerArm",
    "TimerCancel",
    "ScheduleTimeout",
]
