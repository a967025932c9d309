"""Engine speed: rcusim's events per second against a bare SimPy loop with the same event
pattern, in the same run.

The rcusim side runs a message-passing scenario (hackbench-style pipes, 4 CPUs). Its events
are the CPUs' timed actions (the end of a run segment, of a context switch, of an interrupt;
at most one pending per CPU), the interrupts on their way, and each CPU's tick. The bare side
is plain SimPy doing nothing but producing that pattern: one process per CPU that loops on
``yield env.timeout(d)`` (d: the run's simulated time per action of one CPU), plus one
process per CPU for its tick (``yield env.timeout(tick period)``, as many as the CPU had
ticks); together exactly as many events as the rcusim run, over the same simulated time, with
the same few events pending at once (SimPy's heap cost grows with its size, so a bare loop of
hundreds of processes would flatter the ratio).

The ratio rcusim / bare says which fraction of the per-event cost is SimPy's own scheduling;
the rest is rcusim's model work around it (the op loop, the scheduler, cost jitter, pipes and
every installed mechanism's hooks). The target is >= 0.5. Both sides are timed in wall clock
and in CPU time of this process (``time.process_time``), which other jobs on a shared machine
distort much less. Prints figures only; nothing here is a test.

    python benchmarks/engine.py [--groups N] [--loops N] [--repeat K]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from sim import compiled  # noqa: E402
from sim import scenario as sc  # noqa: E402

CPUS = 4


class Pattern:
    """What the bare loop must reproduce: events, simulated time, CPUs, ticks per CPU."""

    def __init__(self, events: int, sim_ns: int, tick_ns: int, ticks: list[int]) -> None:
        self.events = events
        self.sim_ns = sim_ns
        self.tick_ns = tick_ns
        self.ticks = ticks


def rcusim_run(groups: int, loops: int) -> tuple[Pattern, float, float]:
    cat = models.catalog()
    data = sc.load(Path(__file__).resolve().parents[1] / "scenarios" / "messaging-demo.toml")
    data["workload"].update(groups=groups, senders=20, receivers=20, loops=loops)
    data["machine"]["cpus"] = CPUS
    scn = sc.validate(data, cat)
    w0, c0 = time.perf_counter(), time.process_time()
    res = sc.run(scn, cat)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    tick_ns = 1_000_000_000 // scn.kernel.hz
    return Pattern(res.events, res.sim_ns, tick_ns, [c["ticks"] for c in res.cpus]), wall, cpu


def bare_run(p: Pattern) -> tuple[int, float, float]:
    env = simpy.Environment()

    def chain(env: simpy.Environment, n: int, d: int):  # type: ignore[no-untyped-def]
        for _ in range(n):
            yield env.timeout(d)

    actions = p.events - sum(p.ticks)
    for i in range(CPUS):
        n = actions // CPUS + (i < actions % CPUS)
        env.process(chain(env, n, max(1, p.sim_ns // max(1, n))))
        env.process(chain(env, p.ticks[i], p.tick_ns))
    w0, c0 = time.perf_counter(), time.process_time()
    env.run()
    return p.events, time.perf_counter() - w0, time.process_time() - c0


def floor_run(events: int) -> tuple[Pattern, float, float]:
    """The engine with no model work: on each of the 4 CPUs one task yields back-to-back CPU
    work segments (one event per segment, the bare loop's pattern). What the substrate itself
    costs per event, next to what rcusim_run costs with the models' work around it."""
    from sim.machine import Env, Machine
    from sim.ops import CpuWork
    from sim.params import Costs, KernelConfig, MachineConfig
    from sim.rng import Streams

    costs = Costs(
        **{f.name: 0 for f in dataclasses.fields(Costs) if f.name not in ("jitter_cv", "tick_busy", "other_gaps")}, jitter_cv=0.0
    )
    m = Machine(Env(), MachineConfig(cpus=CPUS), KernelConfig(hz=1000), costs, Streams(1))
    work = CpuWork(1000)

    def script(task):  # type: ignore[no-untyped-def]
        for _ in range(events // CPUS):
            yield work

    for i in range(CPUS):
        m.spawn(script, f"t{i}", affinity=[i])
    w0, c0 = time.perf_counter(), time.process_time()
    m.env.run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    ticks = [c.ticks for c in m.cpus]
    return Pattern(m.events, int(m.env.now), 1_000_000, ticks), wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, python {platform.python_version()}, "
        f"simpy {simpy.__version__}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"engine: {compiled.status()[1]}")
    print(f"scenario: messaging-demo, {CPUS} CPUs, {a.groups} groups x 20+20 tasks, {a.loops} loops")
    best_w = best_c = 0.0
    for _ in range(a.repeat):
        pat, wall, cpu = rcusim_run(a.groups, a.loops)
        bev, bwall, bcpu = bare_run(pat)
        rw, bw = pat.events / wall, bev / bwall
        rc, bc = pat.events / cpu, bev / bcpu
        print(
            f"rcusim {pat.events:>10,} events: {rw:>10,.0f} ev/s wall, {rc:>10,.0f} ev/s CPU | "
            f"bare SimPy: {bw:>10,.0f} ev/s wall, {bc:>10,.0f} ev/s CPU | ratio {rw / bw:.2f} wall, {rc / bc:.2f} CPU"
        )
        best_w, best_c = max(best_w, rw / bw), max(best_c, rc / bc)
    print(f"best ratio rcusim/bare: {best_w:.2f} wall, {best_c:.2f} CPU time (target >= 0.5)")
    fpat, fwall, fcpu = floor_run(400_000)
    _, bwall, bcpu = bare_run(fpat)
    print(
        f"engine alone (4 tasks of back-to-back CPU work, {fpat.events:,} events): {fpat.events / fcpu:>10,.0f} ev/s CPU "
        f"| bare SimPy, same pattern: {fpat.events / bcpu:>10,.0f} ev/s CPU | ratio {bcpu / fcpu:.2f} CPU, {bwall / fwall:.2f} wall"
    )


if __name__ == "__main__":
    main()
