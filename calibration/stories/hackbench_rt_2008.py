"""hackbench-rt-2008: ``hackbench 50`` on a 4-way box, 2.6.24.7 vanilla vs 2.6.24.7-rt6 (strict
handoff), + lateral lock stealing, + adaptive spinning (= 2.6.24.7-rt7).

Seed 001 (Steven Rostedt, "2.6.24.7-rt7", LKML, 19 May 2008): ten runs of each kernel; the
medians are the references (vanilla has one figure, 3.9 s). The scenario is
``scenarios/hackbench-rt-2008.toml`` at two fifths of the size (40 loops instead of 100, all 2000
tasks); the reported figure is the time per message times hackbench 50's
2,000,000 messages (``time_s_at_100_loops``), which ``tests/test_locks_hackbench.py`` checks is
linear in the size.

One value is fitted (``calibration/fits/hackbench-rt-2008.toml``, by :func:`fit`): the message
path's cost scale, to vanilla 3.9 s. The second anchor the story allows, rt6 17.1 s, is *not*
fitted: no -rt parameter reaches it at a plausible value (on earlier models the rt-mutex slow
path needed about 14.6 us, twenty times its prior, and rt6 then jumped between 17 and 40 s with
tiny changes; an effective context-switch cost of 13.5 us reached it but broke the linear scaling
in size and sent both predictions 45-140 % off; the fit file keeps both attempts). A third attempt, on
today's model (2.6.24's placement, balancing and fork), fitted the slow path by the method of
:func:`fit` and was rejected too: it lands at 2.75 us (three to nine times the prior), rt6 is
jagged there (16.0 s at 2711 ns, 18.2 s at 2787 ns; 1.4 s spread over three seeds), and it
makes both predictions miss: rt7-lateral -27 % and rt7-adaptive +22 %, where unfitted they are
-40 % and -1 %; a per-handoff cost is not what the model lacks (docs/kernel/rtmutex-hackbench.md
§13). So rt6, rt7-lateral
and rt7-adaptive are predictions (target 20 %), and so is the order of the four kernels.

Refit with ``python -m calibration.stories.hackbench_rt_2008 --fit`` (30-60 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import tomllib
from pathlib import Path
from typing import Any

from ..sweep import pmap
from ..validation import Row, Story, StoryOptions

NAME = "hackbench-rt-2008"
SEED_FILE = "001_7a77242d456273ec.txt"
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "hackbench-rt-2008.toml"
FIT_FILE = ROOT / "calibration" / "fits" / "hackbench-rt-2008.toml"
FIT_KEYS = ("workload.cost_scale",)
LOOPS = 40  # the scenario's size: hackbench 50 with 40 loops instead of 100 (a factor 2.5)

RUNS = {  # seed 001: "Time:" of each of the ten runs
    "rt6": [16.651, 16.773, 16.500, 17.437, 16.267, 18.296, 16.524, 17.452, 18.595, 18.357],
    "rt7-lateral": [7.853, 8.219, 7.967, 8.118, 8.195, 8.349, 8.122, 8.146, 8.197, 8.026],
    "rt7-adaptive": [4.752, 4.830, 4.896, 4.858, 4.801, 4.885, 4.794, 4.883, 4.852, 4.911],
}
REFERENCE = {
    "vanilla": 3.9,  # "Vanilla 2.6.24.7 on this same box runs at 3.9 secs" (one figure)
    **{k: statistics.median(v) for k, v in RUNS.items()},
}
ROLES = {"vanilla": "fitted", "rt6": "predicted", "rt7-lateral": "predicted", "rt7-adaptive": "predicted"}
TARGET = 0.20
ORDER = ("vanilla", "rt7-adaptive", "rt7-lateral", "rt6")  # fastest first


def configs() -> dict[str, dict[str, Any]]:
    from models.locks import CONFIGS

    return CONFIGS


def load_fit(path: Path = FIT_FILE) -> dict[str, Any]:
    """The fitted values and their provenance."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    values = data.get("values", {})
    missing = [k for k in FIT_KEYS if k not in values]
    if missing:
        raise ValueError(f"{path}: [values] lacks {', '.join(missing)}")
    return data


def simulate(
    config: str, seed: int, loops: int = LOOPS, values: dict[str, Any] | None = None, groups: int = 50
) -> dict[str, float]:
    """One run of the scenario on ``config`` (a key of CONFIGS) with the fitted values."""
    import models
    from sim import scenario as sc

    over: dict[str, Any] = dict(configs()[config])
    over.update(load_fit()["values"] if values is None else values)
    over["workload.loops"] = loops
    over["workload.groups"] = groups
    cat = models.catalog()
    scn = sc.validate(sc.load(SCENARIO, over), cat)
    return sc.run(scn, cat, seed=seed).metrics


def _simulate_run(run: tuple[str, int, int, dict[str, Any] | None]) -> dict[str, float]:
    """:func:`simulate` of one (config, seed, loops, values), for a worker process."""
    return simulate(*run)


def mean_time(config: str, seeds: list[int], values: dict[str, Any] | None = None, loops: int = LOOPS) -> float:
    """The mean hackbench-50 time over ``seeds``, run in worker processes (the fit's evaluations)."""
    runs = pmap(_simulate_run, [(config, s, loops, values) for s in seeds])
    return statistics.fmean(r["time_s_at_100_loops"] for r in runs)


def rows(opts: StoryOptions, loops: int = LOOPS) -> list[Row]:
    fitdata = load_fit()
    values = fitdata["values"]
    seeds = list(range(1, opts.seeds + 1))
    names = list(ROLES)
    runs = [(name, s, loops, values) for name in names for s in seeds]

    def done(k: int, total: int) -> None:
        if opts.progress is not None:
            opts.progress(f"{k} of {total} runs", k / total)

    metrics = iter(pmap(_simulate_run, runs, workers=opts.workers, done=done))
    results = {name: [next(metrics) for _ in seeds] for name in names}
    out: list[Row] = []
    times: dict[str, float] = {}
    for name in names:
        rs = results[name]
        t = statistics.fmean(r["time_s_at_100_loops"] for r in rs)
        times[name] = t

        def avg(key: str, rs: list[dict[str, float]] = rs) -> float:
            return statistics.fmean(r[key] for r in rs)

        note = (
            f"per message: {avg('switches_per_message'):.2f} switches, {avg('lock_sleeps_per_message'):.3f} lock sleeps, "
            f"{avg('lock_handoffs_per_message'):.3f} handoffs, {avg('lock_steals_per_message'):.3f} steals, "
            f"{avg('lock_spins_per_message'):.3f} spins; {avg('busy_cpus'):.2f} CPUs busy; "
            f"{len(seeds)} seed(s), {loops} of 100 loops scaled x{100 / loops:g}"
        )
        if len(rs) > 1:
            sd = statistics.stdev(r["time_s_at_100_loops"] for r in rs)
            note += f"; run-to-run sd {sd:.2f} s"
        role = ROLES[name]
        out.append(
            Row(
                story=NAME,
                metric="hackbench 50 time",
                config=name,
                reference=REFERENCE[name],
                simulated=t,
                unit="s",
                role=role,  # type: ignore[arg-type]
                target=None if role == "fitted" else TARGET,
                source=SEED_FILE + ("" if name == "vanilla" else " (median of 10 runs)"),
                note=note if role == "predicted" else f"fitted ({fitdata.get('fit', {}).get('date', '?')}); {note}",
            )
        )
    ordered = all(times[a] < times[b] for a, b in zip(ORDER, ORDER[1:], strict=False))
    out.append(
        Row(
            story=NAME,
            metric="order vanilla < adaptive < lateral < rt6",
            config="all",
            reference=1.0,
            simulated=1.0 if ordered else 0.0,
            unit="holds",
            role="predicted",
            target=0.0,
            source=SEED_FILE,
            note=" < ".join(f"{n} {times[n]:.2f} s" for n in sorted(times, key=times.__getitem__)),
        )
    )
    return out


STORY = Story(
    name=NAME,
    title="hackbench 50 on 2.6.24.7 vs -rt6 (strict handoff), lateral stealing, adaptive spinning",
    seed_file=SEED_FILE,
    machine="4-way 2008 box (seed 001)",
    rows=rows,
    reference={"times_s": REFERENCE, "runs_s": RUNS, "fit_file": str(FIT_FILE.relative_to(ROOT))},
)


# ------------------------------------------------------------------ fitting
def fit(seeds: list[int], loops: int = LOOPS, log: Any = print) -> dict[str, Any]:
    """Fit the message-path cost scale to vanilla by Brent's method on the mean over ``seeds``
    (the same seeds at every point: common random numbers)."""
    from scipy.optimize import brentq

    values: dict[str, Any] = dict(load_fit()["values"]) if FIT_FILE.exists() else {}
    evals: list[tuple[str, float, float]] = []

    def van(scale: float) -> float:
        v = dict(values, **{"workload.cost_scale": round(scale, 3)})
        t = mean_time("vanilla", seeds, v, loops)
        evals.append(("vanilla", scale, t))
        log(f"  vanilla cost_scale={scale:.3f}: {t:.3f} s")
        return t - REFERENCE["vanilla"]

    values["workload.cost_scale"] = round(brentq(van, 4.0, 9.0, xtol=0.02, rtol=0.003), 3)
    anchors = {"vanilla": {"reference": REFERENCE["vanilla"], "simulated": mean_time("vanilla", seeds, values, loops)}}
    return {"values": values, "anchors": anchors, "evaluations": evals}


REJECTED_RT6_FITS = """
# The rt6 anchor (17.105 s) is not fitted. Three attempts, kept for the record (1 and 2: loops 20,
# seeds 1-2, the then-current model; mean hackbench-50 time per evaluation):
# 1. kernel.locks.rt_slowpath with workload.cost_scale = 6.37 (fitted to vanilla first):
#      100 ns 5.84 s | 5378 ns 12.38 s | 8526 ns 14.48 s | 12233 ns 13.93 s | 14087 ns 16.43 s
#      14533 ns 17.02 s | 14593 ns 19.80 s | 14560 ns 40.58 s | 15940 ns 39.65 s | 30000 ns 27.10 s
#    -> about 14.6 us, twenty times the prior (300-800 ns), and not a function: rt6 jumps
#       between 17 and 40 s within 60 ns of slow path (convoy regimes switch).
# 2. costs.context_switch jointly with workload.cost_scale (vanilla, rt6, vanilla):
#      -> cost_scale 5.928, context_switch 13520 ns: rt6 = 11.8 / 12.2 / 17.9 / 18.6 s for seeds
#         1-4 (bimodal); rt7-lateral 11.8 s (+45 %), rt7-adaptive 11.7 s (+140 %), order wrong;
#         and vanilla's time per message then grows 11 % from 20 to 40 loops (senders wait for
#         send-buffer space more often in longer runs, and each of those switches costs 13.5 us),
#         so the scaled runs no longer stand for hackbench 50.
# 3. (session 7, today's model: 2.6.24 placement, balancing and fork; loops 40, seeds 1-2)
#    kernel.locks.rt_slowpath by brentq with cost_scale 6.688:
#      1000 ns 11.58 s | 2543 ns 16.71 s | 2679 ns 17.03 s | 2711 ns 16.02 s | 2748 ns 16.87 s
#      2765 ns 18.14 s | 2787 ns 18.23 s | 2864 ns 17.86 s | 3016 ns 18.08 s | 4000 ns 19.80 s
#    -> 2748 ns (three to nine times the prior). Validated with seeds 1-3: rt6 17.16 s (sd 1.41 s),
#       rt7-lateral 5.97 s (-27 %), rt7-adaptive 5.92 s (+22 %), order holding by 0.8 %: both
#       predictions miss, where unfitted they are -40 % and -1 %.
"""


def write_fit(result: dict[str, Any], seeds: list[int], loops: int, path: Path = FIT_FILE) -> None:
    v = result["values"]
    a = result["anchors"]
    lines = [
        "# Fitted parameters of the hackbench-rt-2008 story (seed 001). Written by",
        "#   python -m calibration.stories.hackbench_rt_2008 --fit",
        "# and read by calibration/stories/hackbench_rt_2008.py; scenarios/hackbench-rt-2008.toml",
        "# carries the same value (tests/test_locks_hackbench.py keeps them equal).",
        "",
        "[fit]",
        f'story = "{NAME}"',
        f'date = "{datetime.date.today().isoformat()}"',
        'method = "scipy.optimize.brentq on the mean hackbench-50 time of vanilla over the seeds (the same seeds at '
        'every point: common random numbers); the other parameters keep their sourced values"',
        f"seeds = {list(seeds)}",
        f"loops = {loops}",
        'anchors_source = "shared/seeds/001_7a77242d456273ec.txt: vanilla 3.9 s (one figure)"',
        "",
        "[values]",
        f'"workload.cost_scale" = {v["workload.cost_scale"]}',
        "",
        "[anchors]",
        f"vanilla = {{ reference = {a['vanilla']['reference']}, simulated = {a['vanilla']['simulated']:.4f} }}",
        "",
        "# every evaluation of the fit: [config, parameter value, mean simulated time (s)]",
        "evaluations = [",
    ]
    for name, x, t in result["evaluations"]:
        lines.append(f'  ["{name}", {x:.4f}, {t:.4f}],')
    lines.append("]")
    lines.append(REJECTED_RT6_FITS)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else NAME)
    p.add_argument("--fit", action="store_true", help="refit the two anchors and rewrite the fit file")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--loops", type=int, default=LOOPS)
    args = p.parse_args(argv)
    if args.fit:
        seeds = list(range(1, args.seeds + 1))
        res = fit(seeds, args.loops)
        write_fit(res, seeds, args.loops)
        print(f"wrote {FIT_FILE}: {res['values']}")  # noqa: T201
        return 0
    for r in rows(StoryOptions(seeds=args.seeds), args.loops):
        e = r.rel_error
        err = "" if math.isnan(e) else f"{100 * e:+.1f}%"
        print(f"{r.config:14s} {r.reference:8.3f} {r.simulated:8.3f} {err} {r.role} {r.note}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
