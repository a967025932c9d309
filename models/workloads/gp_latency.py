"""Grace-period latency as a caller sees it: a task that calls synchronize_rcu() (or the
expedited variant) in a loop, on an idle machine or with every other CPU busy.

The measured side is the collector's membarrier_global (MEMBARRIER_CMD_GLOBAL waits for a
normal grace period) and membarrier_global_busy items, so a profile's distribution can be
compared with this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from models.rcu.ops import SynchronizeRcu, SynchronizeRcuExpedited
from sim.config import knob
from sim.machine import Machine
from sim.ops import CpuWork, Sleep
from sim.stats import LogHistogram
from sim.task import Task
from sim.units import MS, US, S


@dataclass(frozen=True)
class GpLatencyConfig:
    calls: int = knob(200, doc="synchronize calls to time", min=1, max=10_000_000)
    primitive: Literal["normal", "expedited"] = knob("normal", doc="synchronize_rcu() or synchronize_rcu_expedited()")
    busy: bool = knob(False, doc="keep every other CPU busy with a user-mode spinner (collector: membarrier_global_busy)")
    gap: int = knob(1 * MS, doc="sleep between calls", unit="ns", min=0, source="collector: membarrier items pace their calls")
    spin_slice: int = knob(100 * US, doc="user-mode work per loop of a busy spinner", unit="ns", min=1)


class GpLatency:
    def __init__(self, m: Machine, cfg: GpLatencyConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.hist = LogHistogram()
        self.done_calls = 0
        self.stop = False
        op = SynchronizeRcu() if cfg.primitive == "normal" else SynchronizeRcuExpedited()
        self.op = op
        m.spawn(self._caller, "caller", affinity=(0,))
        if cfg.busy:
            for c in range(1, len(m.cpus)):
                m.spawn(self._spinner, f"spin/{c}", affinity=(c,))

    def _caller(self, task: Task):  # type: ignore[no-untyped-def]
        gap = Sleep(self.cfg.gap) if self.cfg.gap else None
        for _ in range(self.cfg.calls):
            if gap is not None:
                yield gap
            t0 = self.m.now
            yield self.op
            self.hist.add(self.m.now - t0)
            self.done_calls += 1
        self.stop = True
        self.m.done.succeed()

    def _spinner(self, task: Task):  # type: ignore[no-untyped-def]
        work = CpuWork(self.cfg.spin_slice)
        while not self.stop:
            yield work

    def progress(self) -> float:
        return self.done_calls / self.cfg.calls

    def metrics(self) -> dict[str, float]:
        h = self.hist
        return {
            "calls": float(h.n),
            "latency_mean_ms": h.mean / MS if h.n else float("nan"),
            "latency_p50_ms": h.percentile(50) / MS if h.n else float("nan"),
            "latency_p90_ms": h.percentile(90) / MS if h.n else float("nan"),
            "calls_per_s": h.n / (h.total / S) if h.total else float("nan"),
        }

    def latency(self) -> dict[str, LogHistogram]:
        return {"synchronize_ns": self.hist}

    def series(self) -> dict[str, list[dict[str, float]]]:
        """The latency distribution: calls per histogram bucket (at most 1.6 % wide), in ms."""
        return {"latency": [{"ms": v / MS, "calls": float(n)} for v, n in self.hist.buckets()]}


def build(m: Machine, cfg: GpLatencyConfig) -> GpLatency:
    if "rcu" not in getattr(m, "models", {}):
        from sim.errors import ScenarioError

        raise ScenarioError("the gp_latency workload needs the RCU mechanism ([kernel.rcu])")
    return GpLatency(m, cfg)
