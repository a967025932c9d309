"""The normal grace period per collection, machine against model: the README's
``membarrier(GLOBAL)`` tables (section RCU, "what makes an idle grace period slow").

python docs/notes/gp_table.py PROFILE [PROFILE ...]

For each profile (its ``-params.toml`` beside it, as ``rcusim calibrate`` writes it): the share of busy calls under 10 ms (the fast
mode) and of idle calls over 10 ms (the slow one), measured and in the model over 8 seeds of
200 calls, and the means, measured and as ``rcusim calibrate`` checks them (3 seeds of 300
calls). One column per profile (* when its calibration fails its own check), in markdown; a few
seconds a profile.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from calibration.fit import make_costs  # noqa: E402
from calibration.microbench import Target, gp_latency_run, mean_over_seeds  # noqa: E402
from calibration.params import load_params, sibling_params  # noqa: E402
from calibration.profile import load_profile  # noqa: E402

SPLIT_MS = 10.0  # between the two modes (about 7 and 15 ms, 2 jiffies apart at HZ 250)
SEEDS, CALLS = 8, 200


def header(path: Path) -> str:
    """The collection's time, * when its calibration fails its own check (a fitted anchor's
    warning in the fit report), and whether it is the bundled one."""
    name = load_profile(path).start_time[11:16]
    report = sibling_params(path).with_suffix(".fit.json")
    if report.exists() and any("fitted anchor" in w for w in json.loads(report.read_text())["warnings"]):
        name += "*"
    return name + (" (bundled)" if path.name == "default.json" else "")


def column(path: Path) -> list[str]:
    prof = load_profile(path)
    costs, target = make_costs(load_params(sibling_params(path)).costs), Target.of(prof)
    cells = []
    for busy, item, check in ((True, "membarrier_global_busy", "gp_busy_mean"), (False, "membarrier_global", "gp_idle_mean")):
        samples = prof.items[item].samples
        model = [
            r
            for s in range(1, SEEDS + 1)
            for r in gp_latency_run(costs, target, busy=busy, calls=CALLS, seed=s).series["latency"]
        ]
        total = sum(r["calls"] for r in model)
        if busy:
            measured = sum(v < SPLIT_MS * 1e6 for v in samples) / len(samples)
            sim = sum(r["calls"] for r in model if r["ms"] < SPLIT_MS) / total
        else:
            measured = sum(v > SPLIT_MS * 1e6 for v in samples) / len(samples)
            sim = sum(r["calls"] for r in model if r["ms"] > SPLIT_MS) / total
        cells.append(f"{100 * measured:.1f} % (model {100 * sim:.1f} %)")
        mean_m = sum(samples) / len(samples) / 1e6  # all the calls: the collector keeps every one
        mean_s = mean_over_seeds(check, costs, target, 3) / 1e6
        cells.append(f"{mean_m:.1f} / {mean_s:.1f} ms ({100 * (mean_s - mean_m) / mean_m:+.0f} %)")
    return cells


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    cols = []
    for a in argv:
        print(f"{a} ...", file=sys.stderr)
        cols.append(column(Path(a)))
    print("| `membarrier(GLOBAL)` | " + " | ".join(header(Path(a)) for a in argv) + " |")
    print("|---" * (len(argv) + 1) + "|")
    labels = ("busy: share of fast calls", "busy: mean", "idle: share of slow calls", "idle: mean")
    for i, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(c[i] for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
