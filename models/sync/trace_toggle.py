"""Trace-event toggling: Oleg Nesterov's rcu_sync test case (seed 003, 2015).

::

    perf probe -x /lib/libc.so.6 syscall
    for i in {1..1000}; do
        echo 1 >| /sys/kernel/debug/tracing/events/probe_libc/syscall/enable
        echo 0 >| /sys/kernel/debug/tracing/events/probe_libc/syscall/enable
    done

``echo`` is a shell builtin: each line is an open/write/close of the tracefs file by the one
shell process. Enabling the uprobe event registers the uprobe (``uprobe_register``), disabling
it unregisters it; both go through ``register_for_each_vma()`` (kernel/events/uprobes.c),
which holds ``percpu_down_write(&dup_mmap_sem)`` while it walks every mapping of libc and
installs or removes the breakpoint. So every line is one percpu-rwsem write. Readers of
``dup_mmap_sem`` are forks (``dup_mmap``); the loop itself forks nothing, but ``forkers``
adds processes that fork in a loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sim.config import knob
from sim.errors import ScenarioError
from sim.ops import Call, CpuWork, Sleep, Syscall
from sim.units import MS, US

if TYPE_CHECKING:
    from sim.machine import CPU, Machine
    from sim.task import Task

    from .percpu_rwsem import PercpuRwsem

NOTES = "docs/kernel/membarrier-urcu-rcu-sync.md"
FITS = "calibration/fits/rcu-sync-2015.toml"


@dataclass(frozen=True)
class TraceToggleConfig:
    """``[workload] kind = "trace_toggle"``."""

    pairs: int = knob(1000, doc="enable/disable pairs (the loop count)", min=1, max=10_000_000, source="seed 003")
    toggle_work: int = knob(
        6_516_324,
        doc="kernel work of one enable or disable inside the write section: build_map_info() and installing or "
        "removing the breakpoint in every mapping of libc",
        unit="ns",
        min=0,
        source=f"fit: the expedited run of the rcu-sync-2015 seed ({FITS})",
    )
    shell_work: int = knob(
        20 * US,
        doc="the shell's work per line outside the write section: parsing, open, write entry, close",
        unit="ns",
        min=0,
        source=f"estimate: a builtin with a redirection, a handful of syscalls ({NOTES})",
    )
    forkers: int = knob(
        0, doc="extra processes forking in a loop (each fork is a percpu_down_read of dup_mmap_sem)", min=0, max=1024
    )
    fork_hold: int = knob(50 * US, doc="dup_mmap() time under the read lock", unit="ns", min=0, source="estimate")
    fork_gap: int = knob(1 * MS, doc="a forker's pause between forks", unit="ns", min=0)


class TraceToggle:
    """The shell loop (and optional forkers) on one percpu_rw_semaphore."""

    def __init__(self, m: Machine, cfg: TraceToggleConfig) -> None:
        self.m = m
        self.cfg = cfg
        model = m.models["percpu_rwsem"]
        self.sem: PercpuRwsem = model.new("dup_mmap_sem")
        self.toggles = 0
        self.forks = 0
        self.start = 0
        self.end = -1
        self.stop = False
        self.op_shell = CpuWork(cfg.shell_work) if cfg.shell_work else None
        self.op_entry = Syscall()
        self.op_work = Call(self._work)
        self.log: list[tuple[int, int]] | None = None  # write sections (start, end) when a test asks
        m.spawn(self._shell, "bash")
        for i in range(cfg.forkers):
            m.spawn(self._forker, f"forker/{i}")

    def _work(self, cpu: CPU, t: Task) -> int:
        return self.cfg.toggle_work

    def _shell(self, task: Task):  # type: ignore[no-untyped-def]
        sem = self.sem
        for _ in range(2 * self.cfg.pairs):
            if self.op_shell is not None:
                yield self.op_shell
            yield self.op_entry
            yield from sem.down_write(task)
            t0 = self.m.now
            yield self.op_work  # register_for_each_vma() under the write lock
            if self.log is not None:
                self.log.append((t0, self.m.now))
            yield from sem.up_write()
            self.toggles += 1
        self.end = self.m.now
        self.stop = True
        self.m.done.succeed()

    def _forker(self, task: Task):  # type: ignore[no-untyped-def]
        sem = self.sem
        hold = CpuWork(self.cfg.fork_hold, user=False)
        gap = Sleep(self.cfg.fork_gap) if self.cfg.fork_gap else None
        while not self.stop:
            yield from sem.down_read()
            yield hold
            yield from sem.up_read()
            self.forks += 1
            if gap is not None:
                yield gap

    def progress(self) -> float:
        return self.toggles / (2 * self.cfg.pairs)

    def metrics(self) -> dict[str, Any]:
        end = self.end if self.end >= 0 else self.m.now
        secs = (end - self.start) / 1e9
        out: dict[str, Any] = {
            "toggles": float(self.toggles),
            "total_s": secs,
            "ms_per_pair": 2e3 * secs / self.toggles if self.toggles else float("nan"),
            "forks": float(self.forks),
            "violations": float(len(self.sem.violations)),
        }
        return out


def build(m: Machine, cfg: TraceToggleConfig) -> TraceToggle:
    models = getattr(m, "models", {})
    if "percpu_rwsem" not in models or "rcu" not in models:
        raise ScenarioError("the trace_toggle workload needs [kernel.rcu] and [kernel.percpu_rwsem]")
    return TraceToggle(m, cfg)
