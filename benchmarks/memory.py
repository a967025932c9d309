"""Memory: how much a run adds to the process, and whether that grows with the run's length.

Every bundled scenario runs twice, at a base size and at ``--scale`` times it (the workload knob
that sets its length: messages, routers, grace periods, simulated seconds), each in a fresh
child process. A run's memory is the peak resident set during the run minus the resident set
just before it (after the imports and the scenario's elaboration), read from
``ru_maxrss`` and ``/proc/self/status``. A run whose memory stays the same at ``--scale``
times the length keeps only what its statistics need (streaming histograms, counters): the
ratio ``long / base`` should be near 1 whatever the scale. A ratio near the scale means
something is kept per event or per task, which ``--top`` finds (tracemalloc's largest live
allocation sites at the end of the long run, on the plain-Python engine: slow, and
``RCUSIM_PURE=1`` so that the allocations have Python frames; a third run, so that the two
measured ones stay alike).

A traced run (``rcusim run --trace``) keeps every span by design; ``--trace`` also prints what
one trace event costs.

Prints figures only; nothing here is a test.

    python benchmarks/memory.py [NAME ...] [--scale K] [--trace] [--top]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# scenario -> (workload knob that sets the run's length, its base value, how to scale it)
SIZES: dict[str, tuple[str, object]] = {
    "messaging-demo": ("loops", 50),
    "netns-2014": ("routers", 250),
    "gp-latency": ("calls", 200),
    "hackbench-rt-2008": ("loops", 5),
    "rcu-sync-2015": ("pairs", 250),
    "urcu-membarrier-2020": ("duration", "2 s"),
    "timers-idle": ("run_for", "2 s"),
    "timers-enqueue": ("repetitions", 5),
    "timers-dbench": ("run_for", "50 ms"),
}


def scaled(value: object, k: int) -> object:
    if isinstance(value, str):
        num, unit = value.split()
        return f"{float(num) * k:g} {unit}"
    assert isinstance(value, int)
    return value * k


def child(name: str, knob: str, value: object, trace: bool, top: int) -> dict:
    """One run in this process (called in a fresh child): its memory figures as a dict."""
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    import models
    from sim import scenario as sc
    from sim.trace import Tracer

    def rss_kib() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/self/status")

    cat = models.catalog()
    data = sc.load(ROOT / "scenarios" / f"{name}.toml")
    data["workload"][knob] = value
    if "max_time" in data["scenario"]:
        data["scenario"]["max_time"] = "100000 s"  # the long run must not hit the bundled limit
    scn = sc.validate(data, cat)
    tracer = Tracer() if trace else None
    if top:
        import tracemalloc

        tracemalloc.start(10)
    before = rss_kib()
    t0 = time.perf_counter()
    res = sc.run(scn, cat, tracer=tracer)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "events": res.events,
        "sim_s": res.sim_ns / 1e9,
        "wall_s": wall,
        "before_kib": before,
        "peak_kib": peak,
        "trace_events": len(tracer) if tracer is not None else 0,
        "top": [],
    }
    if top:
        snap = tracemalloc.take_snapshot()
        for st in snap.statistics("traceback")[:top]:
            frames = [f"{fr.filename.replace(str(ROOT) + os.sep, '')}:{fr.lineno}" for fr in st.traceback][-4:]
            out["top"].append({"bytes": st.size, "blocks": st.count, "where": " <- ".join(reversed(frames))})
    return out


def measure(name: str, knob: str, value: object, trace: bool = False, top: int = 0) -> dict:
    env = dict(os.environ)
    if top:
        env["RCUSIM_PURE"] = "1"
    args = [sys.executable, __file__, "--child", json.dumps([name, knob, value, trace, top])]
    p = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise SystemExit(f"{name} {knob}={value}: the child run failed:\n{p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"scenarios (default all): {', '.join(SIZES)}")
    ap.add_argument("--scale", type=int, default=4, help="length of the long run over the base run (default 4)")
    ap.add_argument("--trace", action="store_true", help="also run each base size traced: bytes per trace event")
    ap.add_argument("--top", type=int, default=0, metavar="N", help="list the N largest allocation sites of the long run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        name, knob, value, trace, top = json.loads(a.child)
        print(json.dumps(child(name, knob, value, trace, top)))
        return 0
    unknown = [n for n in a.names if n not in SIZES]
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    if a.scale < 2:
        ap.error("--scale must be at least 2")
    sys.path.insert(0, str(ROOT))
    from sim import compiled

    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"engine: {compiled.status()[1]}")
    print("memory of a run = peak resident set during it - resident set before it (MiB); long run = base x scale")
    worst = 0.0
    for name in a.names or list(SIZES):
        knob, base = SIZES[name]
        long_value = scaled(base, a.scale)
        r1 = measure(name, knob, base)
        r2 = measure(name, knob, long_value)
        m1 = max(0, r1["peak_kib"] - r1["before_kib"]) / 1024
        m2 = max(0, r2["peak_kib"] - r2["before_kib"]) / 1024
        ratio = m2 / m1 if m1 > 0 else (1.0 if m2 == 0 else math.inf)
        worst = max(worst, ratio)
        print(
            f"{name:22s} {knob}={base!s:>6} -> {long_value!s:>7}: events {r1['events']:>9,} -> {r2['events']:>10,}, "
            f"memory {m1:6.1f} -> {m2:6.1f} MiB (x{ratio:.2f} for x{r2['events'] / max(1, r1['events']):.1f} events), "
            f"{m2 * 2**20 / max(1, r2['events']):6.1f} B/event at the long size"
        )
        # the allocation sites come from a third run, plain Python under tracemalloc (slower and
        # larger), so that the two runs above compare like with like
        for site in measure(name, knob, long_value, top=a.top)["top"] if a.top else []:
            print(f"{'':24s}{site['bytes'] / 2**20:6.2f} MiB in {site['blocks']:,} blocks: {site['where']}")
        if a.trace:
            rt = measure(name, knob, base, trace=True)
            mt = max(0, rt["peak_kib"] - rt["before_kib"]) / 1024
            n = max(1, rt["trace_events"])
            print(
                f"{'':24s}traced base run: {mt:6.1f} MiB, {rt['trace_events']:,} trace events, {(mt - m1) * 2**20 / n:6.0f} B per trace event"
            )
    print(f"largest growth long/base: x{worst:.2f} (near 1: memory does not grow with the run's length)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
