"""Engine speed: rcusim's events per second against a bare SimPy loop, in the same run.

The rcusim side runs a large message-passing scenario (hackbench-style, pipes); the bare side
runs plain SimPy processes that each loop on ``yield env.timeout(d)`` until they have produced
the same number of events. The ratio (rcusim / bare) says how much time rcusim spends around
SimPy rather than in it; the target is >= 0.5. Prints figures only; nothing here is a test.

    python benchmarks/engine.py [--groups N] [--loops N] [--repeat K]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from sim import scenario as sc  # noqa: E402


def rcusim_run(groups: int, loops: int) -> tuple[int, float]:
    cat = models.catalog()
    data = sc.load(Path(__file__).resolve().parents[1] / "scenarios" / "messaging-demo.toml")
    data["workload"].update(groups=groups, senders=20, receivers=20, loops=loops)
    data["machine"]["cpus"] = 4
    scn = sc.validate(data, cat)
    t0 = time.perf_counter()
    res = sc.run(scn, cat)
    return res.events, time.perf_counter() - t0


def bare_run(events: int, procs: int = 200) -> tuple[int, float]:
    env = simpy.Environment()
    per = events // procs

    def loop(env, n, d):
        for _ in range(n):
            yield env.timeout(d)

    for i in range(procs):
        env.process(loop(env, per, 1000 + i))
    t0 = time.perf_counter()
    env.run()
    return per * procs, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()} simpy {simpy.__version__}"
    )
    best = None
    for _ in range(a.repeat):
        ev, wall = rcusim_run(a.groups, a.loops)
        bev, bwall = bare_run(ev)
        r, b = ev / wall, bev / bwall
        print(
            f"rcusim: {ev:>10,} events in {wall:6.2f} s = {r:>10,.0f} ev/s | bare SimPy: {bev:>10,} events in {bwall:6.2f} s = {b:>10,.0f} ev/s | ratio {r / b:.2f}"
        )
        best = max(best or 0.0, r / b)
    print(f"best ratio rcusim/bare: {best:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
