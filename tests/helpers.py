"""Small builders shared by the tests."""

from __future__ import annotations

import dataclasses

from sim.machine import Env, Machine
from sim.params import Costs, KernelConfig, MachineConfig
from sim.rng import Streams
from sim.trace import Tracer

ZERO_COSTS = Costs(
    **{f.name: 0 for f in dataclasses.fields(Costs) if f.name not in ("jitter_cv", "tick_busy", "other_gaps")}, jitter_cv=0.0
)


def machine(
    cpus: int = 1,
    hz: int = 100,
    nohz_idle: bool = True,
    preempt: str = "voluntary",
    seed: int = 1,
    trace: bool = False,
    kernel: dict | None = None,
    **costs: int,
) -> Machine:
    """A machine with every cost 0 (unless given) and no jitter: times are exact. ``kernel``:
    further KernelConfig knobs."""
    c = dataclasses.replace(ZERO_COSTS, **costs)
    k = KernelConfig(hz=hz, nohz_idle=nohz_idle, preempt=preempt, **(kernel or {}))  # type: ignore[arg-type]
    return Machine(Env(), MachineConfig(cpus=cpus), k, c, Streams(seed), Tracer() if trace else None)
