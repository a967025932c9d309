"""Bit-exactness guard for speed work: record every bundled scenario's result (and a few
variants and a trace), then check that a changed engine reproduces them exactly.

    python benchmarks/exact.py record DIR [--quick]   # before a change
    python benchmarks/exact.py check DIR [--quick]    # after it: prints the first difference

Each case is ``rcusim run SCENARIO --set ...`` at the scenario's own seed; the result is
compared as JSON without ``wall_s``; a parameter key only in the new result (a knob added since
the recording, at its default) is not a difference. ``--quick`` runs the three largest stories smaller (netns at
300 routers, hackbench-rt at 10 groups, urcu at 2 s) so a check takes about 15 s, not 1-2 min. The trace case compares the
Chrome trace of a short run byte for byte. Not a test (it runs for a while); the committed
tests pin exact logs of hand-checked timelines (tests/test_engine_exact.py).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from sim import scenario as sc  # noqa: E402
from sim.trace import Tracer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# (case name, scenario, overrides); every bundled scenario as it is, then variants that take
# other paths through the engine and the models.
VARIANTS: list[tuple[str, str, dict[str, object]]] = [
    ("netns-nocb-all", "netns-2014", {"kernel.rcu.nocb": "all"}),
    ("netns-v6", "netns-2014", {"kernel.rcu.era": "v6", "workload.paths": "v3.15", "kernel.rcu.nocb": "all"}),
    ("netns-1cpu", "netns-2014", {"machine.cpus": 1}),
    ("hackbench-vanilla", "hackbench-rt-2008", {"kernel.preempt": "voluntary", "kernel.locks.preempt_rt": False}),
    ("hackbench-lateral", "hackbench-rt-2008", {"kernel.locks.policy": "lateral"}),
    ("hackbench-adaptive", "hackbench-rt-2008", {"kernel.locks.policy": "adaptive"}),
    ("messaging-full", "messaging-demo", {"kernel.preempt": "full"}),
    ("messaging-tick", "messaging-demo", {"kernel.nohz_idle": False, "machine.cpus": 2}),
    # the 6.x rules the composites of the bundled profile run under (EEVDF, the measured guest's
    # placement) and a measured-tick table (Costs.tick_busy), which no bundled scenario uses
    (
        "messaging-6x",
        "messaging-demo",
        {
            "machine.cpus": 2,
            "kernel.sched": "eevdf",
            "kernel.wake_affine": "pack",
            "kernel.fork_balance": "pack",
            "costs.tick_busy": [[17_000, 18_500], [15_000, 21_000], [19_000, 16_000]],
        },
    ),
    ("gp-busy", "gp-latency", {"workload.busy": True}),
    ("gp-expedited", "gp-latency", {"workload.primitive": "expedited"}),
    ("urcu-private", "urcu-membarrier-2020", {"workload.membarrier": "private_expedited"}),
    ("urcu-bp", "urcu-membarrier-2020", {"workload.flavor": "bp", "workload.membarrier": "none"}),
    ("rcu-sync-normal", "rcu-sync-2015", {"kernel.percpu_rwsem.writer_sync": "normal"}),
    ("rcu-sync-rcu_sync", "rcu-sync-2015", {"kernel.percpu_rwsem.writer_sync": "rcu_sync"}),
    ("timers-idle-push", "timers-idle", {"kernel.timers.timer_migration": "push"}),
    ("timers-dbench-push", "timers-dbench", {"kernel.timers.timer_migration": "push"}),
]
QUICK = {
    "netns-2014": {"workload.routers": 300},
    "hackbench-rt-2008": {"workload.groups": 10},
    "urcu-membarrier-2020": {"workload.duration": "2 s"},
}
TRACE_CASE = ("trace-netns", "netns-2014", {"workload.routers": 20, "kernel.rcu.nocb": "all"})


def cases(quick: bool) -> list[tuple[str, str, dict[str, object]]]:
    out: list[tuple[str, str, dict[str, object]]] = [(p.stem, p.stem, {}) for p in sorted((ROOT / "scenarios").glob("*.toml"))]
    out += VARIANTS
    if quick:
        out = [(n, s, {**QUICK.get(s, {}), **o}) for n, s, o in out]
    return out


def run_case(scenario: str, overrides: dict[str, object], trace: bool = False) -> tuple[dict, float]:
    cat = models.catalog()
    data = sc.load(ROOT / "scenarios" / f"{scenario}.toml", overrides)
    scn = sc.validate(data, cat)
    tracer = Tracer() if trace else None
    t0 = time.perf_counter()
    res = sc.run(scn, cat, tracer=tracer)
    wall = time.perf_counter() - t0
    out = res.to_json()
    out.pop("wall_s")
    if tracer is not None:
        buf = io.StringIO()
        tracer.write(buf)
        out = {"result": out, "trace_sha256": hashlib.sha256(buf.getvalue().encode()).hexdigest()}
    return json.loads(json.dumps(out)), wall


def first_diff(a: object, b: object, path: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        assert isinstance(b, dict)
        for k in sorted(set(a) | set(b)):
            if k not in a and ".params." in f"{path}.":
                continue  # a knob added since the recording: its default must change nothing else
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'recorded' if k in a else 'new'}"
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        assert isinstance(b, list)
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: recorded {a!r}, now {b!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("record", "check"))
    ap.add_argument("dir", type=Path)
    ap.add_argument("--quick", action="store_true", help="the two largest stories at a smaller size")
    ap.add_argument("--only", nargs="*", default=None, metavar="CASE", help="run only these cases")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    todo = [(*c, False) for c in cases(a.quick)] + [(*TRACE_CASE, True)]
    bad = 0
    total = 0.0
    for name, scenario, overrides, trace in todo:
        if a.only is not None and name not in a.only:
            continue
        got, wall = run_case(scenario, overrides, trace)
        total += wall
        f = a.dir / f"{name}.json"
        if a.mode == "record":
            f.write_text(json.dumps(got, sort_keys=True))
            print(f"{name:24s} recorded  {wall:6.2f} s", flush=True)
            continue
        want = json.loads(f.read_text())
        d = first_diff(want, got)
        bad += d is not None
        print(f"{name:24s} {'SAME' if d is None else 'DIFFERS'}  {wall:6.2f} s{'  ' + d if d else ''}", flush=True)
    print(f"total {total:.1f} s; {bad} case(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
