"""The substrate's configuration: machine, scheduler knobs and costs.

Defaults: kernel defaults cite their file; costs are measured on the project's development
machine by the native collector (``calibration/profiles/default.json``, item named in each
``source``) and are replaced by a profile's figures when a run is given one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .config import knob
from .errors import ConfigError
from .units import MS, US

PROFILE = "dev-machine profile (calibration/profiles/default.json)"


@dataclass(frozen=True)
class MachineConfig:
    """The simulated hardware."""

    cpus: int = knob(4, doc="CPUs online (1..1024)", min=1, max=1024, source="scenario")
    name: str = knob("generic", doc="a label for the machine, shown in results", source="scenario")


@dataclass(frozen=True)
class KernelConfig:
    """Scheduler-level kernel configuration (CONFIG_* and sysctls).

    The fair-class model is CFS as in kernels 2.6.23..6.5 (kernel/sched/fair.c), the era of the
    seed stories; its sysctls are the unscaled defaults, multiplied at boot by
    ``1 + ilog2(min(cpus, 8))`` as ``get_update_sysctl_factor()`` does (SCHED_TUNABLESCALING_LOG).
    """

    hz: int = knob(1000, doc="CONFIG_HZ: scheduler tick frequency", min=24, max=10000, source="kernel/Kconfig.hz")
    preempt: Literal["none", "voluntary", "full"] = knob(
        "voluntary",
        doc="preemption model: 'none'/'voluntary' preempt kernel code only at op boundaries "
        "(return to user, cond_resched); 'full' preempts kernel code too, outside preempt-disabled regions",
        source="kernel/Kconfig.preempt",
    )
    nohz_idle: bool = knob(True, doc="CONFIG_NO_HZ_IDLE: stop the tick on idle CPUs", source="kernel/time/Kconfig")
    sched_latency: int = knob(
        6 * MS, doc="sysctl_sched_latency before CPU scaling", unit="ns", min=100 * US, source="kernel/sched/fair.c"
    )
    sched_min_granularity: int = knob(
        750 * US, doc="sysctl_sched_min_granularity before CPU scaling", unit="ns", min=1, source="kernel/sched/fair.c"
    )
    sched_wakeup_granularity: int = knob(
        1 * MS, doc="sysctl_sched_wakeup_granularity before CPU scaling", unit="ns", min=0, source="kernel/sched/fair.c"
    )
    sched_migration_cost: int = knob(
        500 * US,
        doc="sysctl_sched_migration_cost: a task that ran more recently than this is cache-hot and not pulled by load balancing",
        unit="ns",
        min=0,
        source="kernel/sched/fair.c",
    )

    def check(self, path: str) -> None:
        if self.sched_min_granularity > self.sched_latency:
            raise ConfigError(
                f"{path}.sched_min_granularity" if path else "sched_min_granularity",
                "is larger than sched_latency",
                "keep sched_min_granularity <= sched_latency",
            )


@dataclass(frozen=True)
class Costs:
    """Time the machine spends on basic operations (ns). Every one is a parameter that a
    profile can set; jitter_cv spreads them (lognormal, mean 1)."""

    context_switch: int = knob(
        1_500, doc="switching from one task to another on a CPU", unit="ns", min=0, source=f"{PROFILE}: context_switch"
    )
    wakeup: int = knob(600, doc="try_to_wake_up as paid by the waker", unit="ns", min=0, source=f"{PROFILE}: context_switch")
    ipi_latency: int = knob(
        1_500,
        doc="from sending an IPI to the handler starting on the target",
        unit="ns",
        min=0,
        source=f"{PROFILE}: cross_cpu_wakeup",
    )
    ipi_handler: int = knob(
        300, doc="a reschedule / function-call IPI handler", unit="ns", min=0, source=f"{PROFILE}: membarrier_private_expedited"
    )
    idle_exit: int = knob(
        20_000, doc="leaving the idle state until the CPU runs code", unit="ns", min=0, source=f"{PROFILE}: cross_cpu_wakeup"
    )
    migration: int = knob(
        2_000, doc="cache refill when a task first runs on another CPU", unit="ns", min=0, source=f"{PROFILE}: cross_cpu_wakeup"
    )
    tick: int = knob(1_000, doc="the scheduler tick interrupt handler", unit="ns", min=0, source=f"{PROFILE}: sleep_lateness")
    timer_irq: int = knob(
        1_000, doc="an hrtimer interrupt that wakes a sleeper", unit="ns", min=0, source=f"{PROFILE}: sleep_lateness"
    )
    syscall: int = knob(100, doc="system call entry and exit", unit="ns", min=0, source=f"{PROFILE}: syscall")
    fork: int = knob(80_000, doc="fork() as paid by the parent", unit="ns", min=0, source=f"{PROFILE}: fork_exec")
    exec: int = knob(
        300_000, doc="execve() and process start, paid by the child", unit="ns", min=0, source=f"{PROFILE}: fork_exec"
    )
    exit: int = knob(60_000, doc="process exit and reaping", unit="ns", min=0, source=f"{PROFILE}: fork_exec")
    pipe_send: int = knob(1_000, doc="writing a 100-byte message to a pipe", unit="ns", min=0, source=f"{PROFILE}: pipe_message")
    pipe_recv: int = knob(
        1_000, doc="reading a 100-byte message from a pipe", unit="ns", min=0, source=f"{PROFILE}: pipe_message"
    )
    softirq_entry: int = knob(
        200, doc="entering and leaving softirq processing", unit="ns", min=0, source=f"{PROFILE}: sleep_lateness"
    )
    balance: int = knob(
        2_000, doc="one load-balancing pass that moves a task", unit="ns", min=0, source=f"{PROFILE}: cross_cpu_wakeup"
    )
    jitter_cv: float = knob(
        0.1,
        doc="coefficient of variation applied to every cost",
        min=0.0,
        max=2.0,
        source=f"{PROFILE}: spread of context_switch samples",
    )
