"""test_urcu: liburcu's read/write benchmark (tests/benchmark/test_urcu.c, v0.10-0.11).

``test_urcu NR_READERS NR_WRITERS DURATION [-c rduration] [-e wduration] [-d wdelay]``: one
process; each reader thread loops ``rcu_read_lock(); p = rcu_dereference(ptr); assert(*p == 8);
[loop_sleep(rduration);] rcu_read_unlock(); nr_reads++`` until the test stops; each writer loops
``new = malloc(); *new = 8; old = rcu_xchg_pointer(&ptr, new); [loop_sleep(wduration);]
synchronize_rcu(); free(old); nr_writes++; [loop_sleep(wdelay);]``. The main thread initialises
the library (the flavor's membarrier QUERY and, for PRIVATE_EXPEDITED, REGISTER), creates the
threads, sets ``test_go`` and sleeps for the duration. ``test_urcu`` is the memb flavor,
``test_urcu_mb``, ``test_urcu_signal`` and ``test_urcu_bp`` the others (``flavor``).
The result counts reads and writes over the duration, as the benchmark prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sim.config import knob
from sim.errors import ConfigError, ScenarioError
from sim.ops import Call, CpuWork, Sleep
from sim.params import MachineConfig
from sim.units import MS, S

from .membarrier import Membarrier, Mm
from .urcu import Urcu, UrcuCosts

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task


@dataclass(frozen=True)
class TestUrcuConfig:
    """``[workload] kind = "test_urcu"``."""

    __test__ = False  # not a pytest class

    readers: int = knob(6, doc="reader threads (nr_readers)", min=0, max=4096, source="test_urcu.c argv[1]")
    writers: int = knob(2, doc="writer threads (nr_writers)", min=0, max=4096, source="test_urcu.c argv[2]")
    duration: int = knob(10 * S, doc="test duration", unit="ns", min=1, source="test_urcu.c argv[3]")
    flavor: Literal["memb", "mb", "signal", "bp"] = knob(
        "memb",
        doc="liburcu flavor: 'memb' (test_urcu: membarrier, compiler barriers in readers), 'mb' (full fences in "
        "readers), 'signal' (signals readers), 'bp' (test_urcu_bp: bulletproof, no registration)",
        source="tests/benchmark/Makefile.am",
    )
    membarrier: Literal["shared", "private_expedited", "global_expedited", "none"] = knob(
        "private_expedited",
        doc="the membarrier command the memb and bp flavors issue as smp_mb_master(): 'shared' (0.10.1 memb: "
        "MEMBARRIER_CMD_SHARED, a grace period), 'private_expedited' (0.10.1 + c0bb9f6/3745305, 0.11: IPIs), "
        "'global_expedited', or 'none' (no membarrier: the 0.10.1 bp flavor, or a kernel without it: fences in "
        "readers and writer). mb and signal never call membarrier and ignore it",
        source="src/urcu.c, src/urcu-bp.c (v0.10.1, c0bb9f6, 3745305)",
    )
    read_cs_loops: int = knob(
        0, doc="-c: read-side critical-section length in caa_cpu_relax() loops (rduration)", min=0, source="test_urcu.c"
    )
    write_cs_loops: int = knob(
        0, doc="-e: loops between rcu_xchg_pointer and synchronize_rcu (wduration)", min=0, source="test_urcu.c"
    )
    write_delay_loops: int = knob(0, doc="-d: loops a writer waits after each write (wdelay)", min=0, source="test_urcu.c")
    reader_model: Literal["aggregate", "explicit"] = knob(
        "aggregate",
        doc="'aggregate': readers run as long chunks and reads are counted from their CPU time (fast; see "
        "models/sync/urcu.py); 'explicit': every read-side critical section is simulated (exact, slow)",
    )
    chunk: int = knob(1 * MS, doc="aggregate readers: longest uninterrupted piece of a reader's loop", unit="ns", min=1)
    costs: UrcuCosts = field(default_factory=UrcuCosts)

    def check_machine(self, machine: MachineConfig, path: str) -> None:
        if self.readers + self.writers == 0:
            raise ConfigError(f"{path}.readers", "the test needs at least one thread", "set readers or writers >= 1")
        if self.reader_model == "explicit" and self.costs.read_loop_ps < 100_000 and self.read_cs_loops == 0:
            raise ConfigError(
                f"{path}.reader_model",
                "'explicit' simulates every ~3 ns read as an event: far too slow for this loop",
                "use reader_model = 'aggregate', or a long read_cs_loops",
            )


class TestUrcu:
    """The benchmark process: its threads, its liburcu and its counters."""

    __test__ = False

    def __init__(self, m: Machine, cfg: TestUrcuConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.mm = Mm("test_urcu", users=cfg.readers + cfg.writers + 1)
        self.lib = Urcu(m, cfg.flavor, cfg.membarrier, cfg.costs, cfg.read_cs_loops, cfg.reader_model, cfg.chunk)
        self.writes = 0
        self.start = -1
        self.end = -1
        relax = cfg.costs.relax_ps / 1000
        self.op_work = CpuWork(cfg.costs.write_work)
        self.op_wcs = CpuWork(round(cfg.write_cs_loops * relax)) if cfg.write_cs_loops else None
        self.op_wdelay = CpuWork(round(cfg.write_delay_loops * relax)) if cfg.write_delay_loops else None
        self.threads: list[Task] = []
        main = m.spawn(self._main, "test_urcu")
        main.data["mm"] = self.mm

    def _main(self, task: Task):  # type: ignore[no-untyped-def]
        cmd = self.lib.membarrier_cmd
        if cmd is not None:
            yield Membarrier("query")
            if cmd in ("private_expedited", "global_expedited"):
                r = yield Membarrier(f"register_{cmd}")
                if r < 0:
                    why = (
                        "; MEMBARRIER_CMD_GLOBAL_EXPEDITED arrived in v4.16: set kernel.membarrier.era = 'v6'"
                        if cmd == "global_expedited"
                        else ""
                    )
                    raise ScenarioError(f"test_urcu: membarrier registration failed ({r}, EINVAL) for {cmd}{why}")
        yield Call(self._create_threads)
        yield Sleep(self.cfg.duration)
        self.lib.stopped = True
        self.end = self.m.now
        self.m.done.succeed()

    def _create_threads(self, cpu: CPU, t: Task) -> int:
        m = self.m
        for i in range(self.cfg.readers):
            th = m.spawn(self.lib.reader, f"reader/{i}", parent=t, from_cpu=cpu, thread_of=t)
            th.data["mm"] = self.mm
            self.threads.append(th)
        for i in range(self.cfg.writers):
            th = m.spawn(self._writer, f"writer/{i}", parent=t, from_cpu=cpu, thread_of=t)
            th.data["mm"] = self.mm
            self.threads.append(th)
        self.start = m.now
        return 0

    def _writer(self, task: Task):  # type: ignore[no-untyped-def]
        lib = self.lib
        while not lib.stopped:
            yield self.op_work
            if self.op_wcs is not None:
                yield self.op_wcs
            yield from lib.synchronize_rcu(task)
            if lib.stopped:
                break
            self.writes += 1
            if self.op_wdelay is not None:
                yield self.op_wdelay

    # ------------------------------------------------------------------ results
    def elapsed(self) -> int:
        if self.start < 0:
            return 0
        end = self.end if self.end >= 0 else self.m.now
        return end - self.start

    def progress(self) -> float:
        if self.start < 0:
            return 0.0
        return min(1.0, (self.m.now - self.start) / self.cfg.duration)

    def metrics(self) -> dict[str, Any]:
        el = self.elapsed()
        reads = self.lib.reads()
        out: dict[str, Any] = {
            "reads": reads,
            "writes": float(self.writes),
            "reads_per_s": reads / (el / S) if el else float("nan"),
            "writes_per_s": self.writes / (el / S) if el else float("nan"),
            "test_seconds": el / S,
        }
        for k, v in self.lib.metrics().items():
            out[f"urcu.{k}"] = v
        if self.writes:
            out["urcu.membarrier_per_write"] = self.lib.membarrier_calls / self.writes
        return out


def build(m: Machine, cfg: TestUrcuConfig) -> TestUrcu:
    if "membarrier" not in getattr(m, "models", {}):
        raise ScenarioError("the test_urcu workload needs the membarrier mechanism ([kernel.membarrier])")
    return TestUrcu(m, cfg)
