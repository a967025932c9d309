"""Tree RCU: grace periods, callbacks, offloading (NOCB), expedited GPs, rcu_barrier."""

from __future__ import annotations

from typing import Any

from sim.machine import Machine
from sim.scenario import Mechanism, WorkloadSpec

from .config import RcuConfig
from .ops import CallRcu, RcuBarrier, RcuReadLock, RcuReadUnlock, SynchronizeRcu, SynchronizeRcuExpedited
from .tree import Rcu


class _Installed:
    """What ``[kernel.rcu]`` installs: the Rcu model, whose metrics include its NOCB kthreads'."""

    def __init__(self, m: Machine, cfg: RcuConfig) -> None:
        self.rcu = Rcu(m, cfg)

    def metrics(self) -> dict[str, float]:
        out = self.rcu.metrics()
        if self.rcu.nocb is not None:
            out.update(self.rcu.nocb.metrics())
        return out


def install(m: Machine, cfg: RcuConfig) -> Any:
    return _Installed(m, cfg)


MECHANISMS: dict = {"rcu": Mechanism("rcu", RcuConfig, install, __doc__ or "")}


def _netns_workloads() -> dict[str, WorkloadSpec]:
    from ..workloads import gp_latency, netns

    return {
        "netns": WorkloadSpec("netns", netns.NetnsConfig, netns.build, netns.__doc__ or ""),
        "gp_latency": WorkloadSpec("gp_latency", gp_latency.GpLatencyConfig, gp_latency.build, gp_latency.__doc__ or ""),
    }


WORKLOADS: dict[str, WorkloadSpec] = _netns_workloads()

__all__ = [
    "RcuConfig",
    "Rcu",
    "CallRcu",
    "SynchronizeRcu",
    "SynchronizeRcuExpedited",
    "RcuBarrier",
    "RcuReadLock",
    "RcuReadUnlock",
    "MECHANISMS",
    "WORKLOADS",
]
