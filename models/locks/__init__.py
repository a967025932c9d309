"""Locks: spinlock, mutex with optimistic spinning, rt-mutex with PI and handoff policies
(strict, lateral stealing, adaptive spinning), PREEMPT_RT's sleeping spinlocks; and the
``hackbench`` workload that exercises them (``models/workloads/hackbench.py``)."""

from sim.scenario import Mechanism, WorkloadSpec

from ..workloads import hackbench
from .config import LocksConfig
from .core import Lock, LockModel, Unlock, install

MECHANISMS: dict = {
    "locks": Mechanism("locks", LocksConfig, install, LocksConfig.__doc__ or ""),
}
WORKLOADS: dict = {
    "hackbench": WorkloadSpec("hackbench", hackbench.HackbenchConfig, hackbench.build, hackbench.__doc__ or ""),
}

# The four kernels of the hackbench-rt-2008 story (seed 001): knob overrides on the scenario.
CONFIGS: dict[str, dict[str, object]] = {
    "vanilla": {"kernel.preempt": "voluntary", "kernel.locks.preempt_rt": False, "kernel.locks.policy": "strict"},
    "rt6": {"kernel.preempt": "full", "kernel.locks.preempt_rt": True, "kernel.locks.policy": "strict"},
    "rt7-lateral": {"kernel.preempt": "full", "kernel.locks.preempt_rt": True, "kernel.locks.policy": "lateral"},
    "rt7-adaptive": {"kernel.preempt": "full", "kernel.locks.preempt_rt": True, "kernel.locks.policy": "adaptive"},
}

__all__ = ["MECHANISMS", "WORKLOADS", "CONFIGS", "Lock", "Unlock", "LockModel", "LocksConfig"]
