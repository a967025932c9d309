"""``[kernel.timers]``: timer placement, the timer-migration hierarchy, idle states and costs.

Cost defaults: ``timer_op`` is the one parameter fitted to the timers-2023 story (the push
figure of its enqueue+dequeue loop, calibration/fits/timers_2023.json); the others are derived
from the kernel code paths they stand for, counted in dependent cache-hot memory accesses and
locked operations on a zen3 core at an assumed 3.5 GHz (docs/kernel/timers.md, "Costs").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.config import knob
from sim.errors import ConfigError
from sim.units import US

FIT = "fit to the timers-2023 push figure (calibration/fits/timers_2023.json)"
DERIVED = "derived from the kernel code path, docs/kernel/timers.md 'Costs'"


@dataclass(frozen=True)
class TimersConfig:
    """Timer wheel, placement and idle states (kernel/time/timer.c, timer_migration.c,
    kernel/sched/core.c get_nohz_timer_target, drivers/cpuidle)."""

    timer_migration: Literal["off", "push", "pull"] = knob(
        "push",
        doc="where non-pinned timers go: 'off' queues on the arming CPU (sysctl timer_migration=0); "
        "'push' is the pre-6.9 heuristic (get_nohz_timer_target: a busy CPU when the arming CPU is idle "
        "or not a timer housekeeping CPU); 'pull' is the v6.9+ timer-migration hierarchy (queue locally, "
        "idle CPUs' global timers expired remotely by an active migrator)",
        source="kernel/time/timer.c (sysctl kernel.timer_migration, default 1); push before v6.9, pull since",
    )
    nohz_full: tuple[int, ...] = knob(
        (),
        doc="CPUs that are not timer housekeeping CPUs (nohz_full= / isolcpus=nohz): push never keeps a "
        "timer on them and walks the scheduling domains for a busy CPU instead",
        source="kernel/sched/isolation.c (HK_TYPE_TIMER)",
    )
    domain_spans: tuple[int, ...] = knob(
        (),
        doc="sizes of the scheduling domains below the whole machine, lowest first (e.g. [2, 16] for SMT "
        "pairs and 16-thread LLCs); get_nohz_timer_target walks them in this order",
        source="kernel/sched/topology.c (SMT, MC, PKG domains); the substrate has one LLC, so none by default",
    )
    tmigr_children_per_group: int = knob(
        8,
        doc="children per group of the timer-migration hierarchy (a power of two)",
        min=2,
        max=64,
        source="kernel/time/timer_migration.h TMIGR_CHILDREN_PER_GROUP",
    )
    idle_state_names: tuple[str, ...] = knob(
        (),
        doc="cpuidle states, shallowest first (e.g. ['POLL', 'C1', 'C2']); empty: one idle state with the "
        "substrate's costs.idle_exit and no governor",
        source="drivers/cpuidle; the machine's /sys/devices/system/cpu/cpu0/cpuidle",
    )
    idle_exit_latency: tuple[int, ...] = knob(
        (),
        doc="exit latency of each idle state (ns or '1 us')",
        unit="ns",
        min=0,
        source="ACPI _CST via drivers/acpi/processor_idle.c (state->exit_latency)",
    )
    idle_target_residency: tuple[int, ...] = knob(
        (),
        doc="target residency of each idle state (ACPI: exit latency x latency_factor 2)",
        unit="ns",
        min=0,
        source="drivers/acpi/processor_idle.c (target_residency = latency * latency_factor)",
    )
    governor: Literal["menu", "teo"] = knob(
        "menu",
        doc="cpuidle governor: the idle-duration predictor that picks the state (see models/timers/idle.py)",
        source="drivers/cpuidle/governors/menu.c, teo.c",
    )
    timer_op: int = knob(
        60, doc="one cache-hot mod_timer() or timer_delete() on a local timer base (also the bookkeeping of one "
        "expired timer)", unit="ns", min=0, max=100 * US, source=FIT,
    )  # fmt: skip
    nohz_entry: int = knob(
        6,
        doc="get_nohz_timer_target() entry and exit: housekeeping check, rcu_read_lock/unlock, this_rq()->sd",
        unit="ns",
        min=0,
        source=f"{DERIVED}: ~22 cycles",
    )
    nohz_domain: int = knob(
        3,
        doc="one scheduling-domain step of the push walk (sd->parent, span & housekeeping mask scan)",
        unit="ns",
        min=0,
        source=f"{DERIVED}: ~12 cycles",
    )
    nohz_probe: int = knob(
        3,
        doc="one idle_cpu() probe of another CPU's run queue in the push walk",
        unit="ns",
        min=0,
        source=f"{DERIVED}: 3 dependent L1 loads, ~12 cycles",
    )
    tmigr_level: int = knob(
        17,
        doc="one group of a timer-migration hierarchy walk (cmpxchg of the group state, event update "
        "under the group lock), cache-hot",
        unit="ns",
        min=0,
        source=f"{DERIVED}: ~60 cycles",
    )
    cache_line_transfer: int = knob(
        13,
        doc="moving a cache line last written by another CPU (a remote timer base, a hierarchy group)",
        unit="ns",
        min=0,
        source=f"{DERIVED}: zen3 L3 hit latency, 46 cycles",
    )

    def check(self, path: str) -> None:
        p = f"{path}." if path else ""
        n = len(self.idle_state_names)
        if len(self.idle_exit_latency) != n or len(self.idle_target_residency) != n:
            raise ConfigError(
                f"{p}idle_state_names",
                f"{n} names but {len(self.idle_exit_latency)} exit latencies and {len(self.idle_target_residency)} target residencies",
                "give idle_state_names, idle_exit_latency and idle_target_residency the same length",
            )
        for key, vals in (("idle_exit_latency", self.idle_exit_latency), ("idle_target_residency", self.idle_target_residency)):
            if any(b < a for a, b in zip(vals, vals[1:], strict=False)):
                raise ConfigError(f"{p}{key}", "must not decrease from one state to the next", "list the states shallowest first")
        f = self.tmigr_children_per_group
        if f & (f - 1):
            raise ConfigError(f"{p}tmigr_children_per_group", f"{f} is not a power of two", "use 2, 4, 8, 16, 32 or 64")
        if any(s < 1 for s in self.domain_spans) or list(self.domain_spans) != sorted(self.domain_spans):
            raise ConfigError(f"{p}domain_spans", "must be positive and ascending", "e.g. [2, 16]: SMT pairs, then LLCs")
        if any(c < 0 for c in self.nohz_full):
            raise ConfigError(f"{p}nohz_full", "CPU numbers must be >= 0", "list CPUs of the machine, e.g. [0]")
