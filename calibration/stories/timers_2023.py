"""timers-2023: the timer pull model replacing the push heuristic (seed 004_4966f5407572de7a.txt).

Published (cover letter of "timer: Move from a push remote at enqueue to a pull at expiry
model", v7 2023-05-24 <20230524070629.6377-1-anna-maria@linutronix.de> and v8 2023-10-04
<20231004123454.15691-1-anna-maria@linutronix.de>; merged for v6.9):

* Enqueue: a timer enqueued and dequeued 1000 times in a loop on an isolated CPU, a quarter
  of the other CPUs busy: 145 ns (push heuristic) -> 109 ns (pull model), about -25 %.
* dbench: X client/server pairs on a zen3 machine, base v6.6-rc1 timers/core, menu and teo
  governors: throughput changes between -8 % and +8 % over X = 1..1024 (table below).
* Idle: residency in deep idle states of an idle system "not downgraded"; on a mostly idle
  machine a ping pong: a process_timeout timer expired remotely on a non-idle CPU, the task
  woken back on the CPU it slept on, which re-arms the timer and goes idle again.

Fitted: one parameter, ``kernel.timers.timer_op`` (a cache-hot mod_timer / timer_delete), to
the push figure (145 ns); everything else is predicted from the mechanisms and the derived
costs of docs/kernel/timers.md. ``python -m calibration.stories.timers_2023 --fit`` redoes the
fit and rewrites ``calibration/fits/timers-2023.toml``.

How the rows are expressed: the issue commits to the *change* of the enqueue+dequeue cost
being predicted within 10 points. The contract's ``rel_error`` is relative to the reference,
so the change row has reference -24.83 (%) and target 10 / 24.83 = 0.403, which is exactly
"within 10 points"; the pull row carries the same commitment in ns (10 points of the 145 ns
push figure = 14.5 ns, 0.133 of 109 ns). The dbench table is compared by its sign pattern
(the issue: report agreement, no tuning): the reference is the 11 pair counts, the simulated
figure how many have the published sign, the target "more than half" (|error| < 0.46); a
second row per governor compares the largest change, to the same order (a factor of 2).
"""

from __future__ import annotations

import argparse
import datetime
import math
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from sim import scenario as sc

from ..sweep import pmap
from ..validation import Row, Story, StoryOptions

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
FIT_FILE = ROOT / "calibration" / "fits" / "timers-2023.toml"
SEED_FILE = "004_4966f5407572de7a.txt"
NAME = "timers-2023"

PUSH_NS, PULL_NS = 145.0, 109.0
CHANGE_PCT = 100.0 * (PULL_NS - PUSH_NS) / PUSH_NS  # -24.83 %

# X pairs: (timers/core throughput, pull-model throughput, published impact %)
DBENCH = {
    "menu": {
        1: (353.19, 353.45, 0.07),
        2: (700.10, 687.00, -1.87),
        4: (1329.37, 1282.91, -3.49),
        8: (2561.16, 2493.56, -2.64),
        16: (4959.96, 4914.59, -0.91),
        32: (9741.92, 8979.83, -7.82),
        64: (16535.40, 16388.47, -0.89),
        128: (22136.83, 23174.50, 4.69),
        256: (39256.77, 38994.00, -0.67),
        512: (36799.03, 38091.10, 3.51),
        1024: (32903.03, 35370.70, 7.50),
    },
    "teo": {
        1: (350.83, 352.45, 0.46),
        2: (699.52, 690.10, -1.35),
        4: (1339.53, 1294.71, -3.35),
        8: (2574.10, 2495.46, -3.06),
        16: (4898.50, 4783.06, -2.36),
        32: (9115.50, 9037.83, -0.85),
        64: (16663.90, 16042.00, -3.73),
        128: (25044.93, 23250.03, -7.17),
        256: (38059.53, 39658.57, 4.20),
        512: (36369.30, 38890.13, 6.93),
        1024: (33956.83, 35514.83, 4.59),
    },
}

REFERENCE: dict[str, Any] = {
    "source": SEED_FILE,
    "machine": "enqueue: unnamed test machine; dbench: a zen3 machine, tip timers/core on v6.6-rc1",
    "figures": {"enqueue_dequeue_ns": {"push": PUSH_NS, "pull": PULL_NS}, "dbench": DBENCH},
}

DBENCH_CPUS = 128  # the zen3 machine's size is not given; throughput saturates near 128-256 pairs
SIGN_TARGET = 0.46  # more than half of the 11 signs (6/11 -> |error| 0.4545)
MAGNITUDE_TARGET = 1.0  # the largest simulated change within a factor of 2 of the largest published


def _catalog() -> sc.Catalog:
    import models

    return models.catalog()


def load_fit() -> dict[str, Any]:
    if not FIT_FILE.exists():
        return {}
    return tomllib.loads(FIT_FILE.read_text())


def scenario(name: str, over: dict[str, Any], fitted: bool = True) -> sc.Scenario:
    o = dict(over)
    fit = load_fit().get("fitted", {})
    if fitted and "timer_op" in fit:
        o.setdefault("kernel.timers.timer_op", int(fit["timer_op"]))
    return sc.validate(sc.load(SCENARIOS / f"{name}.toml", o), _catalog())


def mean_metric(scn: sc.Scenario, key: str, seeds: int) -> float:
    cat = _catalog()
    vals = [sc.run(scn, cat, seed=s).metrics.get(key, math.nan) for s in range(1, seeds + 1)]
    return sum(vals) / len(vals)


def enqueue_ns(mode: str, seeds: int, extra: dict[str, Any] | None = None, fitted: bool = True) -> float:
    over = {"kernel.timers.timer_migration": mode, **(extra or {})}
    return mean_metric(scenario("timers-enqueue", over, fitted), "ns_per_enqueue_dequeue", seeds)


def dbench_over(pairs: int, mode: str, governor: str) -> dict[str, Any]:
    big = pairs >= DBENCH_CPUS
    return {
        "machine.cpus": DBENCH_CPUS,
        "workload.pairs": pairs,
        # the menu governor learns in ~50 idle periods per CPU: long enough where CPUs idle often
        "workload.warmup": "15 ms" if big else "40 ms",
        "workload.run_for": "8 ms" if big else "25 ms",
        "kernel.timers.timer_migration": mode,
        "kernel.timers.governor": governor,
    }


def _dbench_job(job: tuple[int, str, str, int]) -> float:
    pairs, mode, governor, seed = job
    scn = scenario("timers-dbench", dbench_over(pairs, mode, governor))
    return sc.run(scn, _catalog(), seed=seed).metrics["requests_per_s"]


def dbench_changes(governor: str, seeds: int, progress: Any = None, workers: int | None = None) -> dict[int, float]:
    """Simulated throughput change pull vs push (%) for each published pair count; the two
    runs of a pair count share their seeds (common random numbers). The independent runs go
    to ``workers`` processes (:func:`calibration.sweep.pmap`; default: every core);
    ``progress(label)`` is called once per pair count's worth of finished runs."""
    jobs = [
        (pairs, mode, governor, seed) for pairs in DBENCH[governor] for mode in ("push", "pull") for seed in range(1, seeds + 1)
    ]
    per_count = 2 * seeds

    def done(k: int, total: int) -> None:
        if progress is not None and k % per_count == 0:
            progress(f"dbench {governor}: {k // per_count} of {total // per_count} pair counts")

    results = dict(zip(jobs, pmap(_dbench_job, jobs, workers=workers, done=done), strict=True))
    out: dict[int, float] = {}
    for pairs in DBENCH[governor]:
        push = sum(results[(pairs, "push", governor, s)] for s in range(1, seeds + 1))
        pull = sum(results[(pairs, "pull", governor, s)] for s in range(1, seeds + 1))
        out[pairs] = 100.0 * (pull - push) / push
    return out


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def idle_metrics(mode: str, seeds: int) -> dict[str, float]:
    cat = _catalog()
    scn = scenario("timers-idle", {"kernel.timers.timer_migration": mode})
    keys = (
        "timers.idle_wakeups_per_s",
        "timers.remote_expiries",
        "timers.pingpong",
        "timers.deep_idle_fraction",
        "timers.timer_wakeups",
    )
    acc = {k: 0.0 for k in keys}
    for s in range(1, seeds + 1):
        met = sc.run(scn, cat, seed=s).metrics
        for k in keys:
            acc[k] += met.get(k, math.nan) / seeds
    return acc


def rows(opts: StoryOptions) -> list[Row]:
    n = opts.seeds
    total = 2 + 2 * len(DBENCH["menu"]) + 2
    done = [0]

    def step(label: str) -> None:
        done[0] += 1
        if opts.progress is not None:
            opts.progress(label, min(1.0, done[0] / total))

    fit = load_fit()
    fit_note = f"timer_op fitted to {fit.get('fitted', {}).get('timer_op', '?')} ns on {fit.get('date', '?')}"
    push = enqueue_ns("push", n)
    step("enqueue push")
    pull = enqueue_ns("pull", n)
    step("enqueue pull")
    change = 100.0 * (pull - push) / push
    out = [
        Row(
            NAME,
            "enqueue+dequeue",
            "push (v6.6), isolated CPU, 1/4 busy",
            PUSH_NS,
            push,
            "ns",
            "fitted",
            None,
            SEED_FILE,
            fit_note,
        ),
        Row(
            NAME,
            "enqueue+dequeue",
            "pull (v6.9 model)",
            PULL_NS,
            pull,
            "ns",
            "predicted",
            round(0.1 * PUSH_NS / PULL_NS, 3),
            SEED_FILE,
            "target: 10 points of the push figure (14.5 ns); the push walk's probes and domain steps are derived costs",
        ),
        Row(
            NAME,
            "enqueue+dequeue change",
            "push -> pull",
            CHANGE_PCT,
            change,
            "%",
            "predicted",
            round(10.0 / abs(CHANGE_PCT), 3),
            SEED_FILE,
            "target 0.403 = within 10 points of -24.8 %",
        ),
    ]
    for gov in ("menu", "teo"):
        ch = dbench_changes(gov, n, progress=lambda label: step(label), workers=opts.workers)
        pub = {x: v[2] for x, v in DBENCH[gov].items()}
        agree = sum(1 for x in pub if _sign(ch[x]) == _sign(pub[x]))
        detail = "; ".join(f"{x}: {pub[x]:+.2f}/{ch[x]:+.2f}" for x in pub)
        big_pub = max(abs(v) for v in pub.values())
        big_sim = max(abs(v) for v in ch.values())
        out.append(
            Row(
                NAME,
                "dbench largest |change|",
                f"{gov}, X = 1..1024 pairs, {DBENCH_CPUS} CPUs",
                big_pub,
                big_sim,
                "%",
                "predicted",
                MAGNITUDE_TARGET,
                SEED_FILE,
                "the sign rows say nothing of size: this one commits to the same order (within a factor of 2)",
            )
        )
        out.append(
            Row(
                NAME,
                "dbench sign agreement",
                f"{gov}, X = 1..1024 pairs, {DBENCH_CPUS} CPUs",
                float(len(pub)),
                float(agree),
                "pair counts",
                "predicted",
                SIGN_TARGET,
                SEED_FILE,
                f"X: published/simulated change %: {detail}",
            )
        )
    idle_push = idle_metrics("push", n)
    step("idle push")
    idle_pull = idle_metrics("pull", n)
    step("idle pull")
    deep = idle_pull["timers.deep_idle_fraction"] / idle_push["timers.deep_idle_fraction"]
    summary = (
        f"idle wakeups/s push {idle_push['timers.idle_wakeups_per_s']:.0f}, pull {idle_pull['timers.idle_wakeups_per_s']:.0f}; "
        f"remote expiries push {idle_push['timers.remote_expiries']:.0f}, pull {idle_pull['timers.remote_expiries']:.0f}; "
        f"ping pong rounds push {idle_push['timers.pingpong']:.0f}, pull {idle_pull['timers.pingpong']:.0f} (2 s, 8 CPUs)"
    )
    out.append(
        Row(
            NAME,
            "deep idle residency pull/push",
            "idle 8 CPUs, schedule_timeout sleepers",
            1.0,
            deep,
            "ratio",
            "predicted",
            0.05,
            SEED_FILE,
            f"seed: 'doesn't downgrade' (read as within 5 %); {summary}",
        )
    )
    out.append(
        Row(
            NAME,
            "remote-expiry ping pong observed",
            "pull, idle 8 CPUs",
            1.0,
            1.0 if idle_pull["timers.pingpong"] > 0 else 0.0,
            "yes/no",
            "predicted",
            0.0,
            SEED_FILE,
            summary,
        )
    )
    return out


STORY = Story(
    name=NAME,
    title="timer pull model vs push heuristic: enqueue cost, dbench, idle ping pong",
    seed_file=SEED_FILE,
    machine="32-CPU (enqueue), 128-CPU (dbench) and 8-CPU (idle) zen3-like machines at HZ=250",
    rows=rows,
    reference=REFERENCE,
)


# ---------------------------------------------------------------------------- the fit
def fit(seeds: int = 3) -> dict[str, Any]:
    """Fit timer_op so that the simulated push loop costs 145 ns (mean of ``seeds`` seeds).

    The loop's cost is 2 x timer_op plus the push walk, so one exact run without the op gives
    the walk; the integer nearest the analytic solution and its neighbours are then tried with
    the scenario's cost jitter and the best kept."""
    walk = enqueue_ns("push", 1, {"kernel.timers.timer_op": 0, "costs.jitter_cv": 0.0}, fitted=False)
    x0 = round((PUSH_NS - walk) / 2)
    best = None
    for x in (x0 - 1, x0, x0 + 1):
        v = enqueue_ns("push", seeds, {"kernel.timers.timer_op": x}, fitted=False)
        if best is None or abs(v - PUSH_NS) < abs(best[1] - PUSH_NS):
            best = (x, v)
    assert best is not None
    return {
        "story": NAME,
        "date": datetime.date.today().isoformat(),
        "method": f"analytic from an exact run (walk = {walk:.1f} ns), then the best of x0-1..x0+1 on the mean of {seeds} seeds",
        "anchors": ["push enqueue+dequeue loop = 145 ns (seed 004, 'plain v6')"],
        "residual_ns": best[1] - PUSH_NS,
        "fitted": {"timer_op": best[0]},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--fit", action="store_true", help="redo the fit and rewrite the fit file")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    if args.fit:
        res = fit(args.seeds)
        FIT_FILE.parent.mkdir(parents=True, exist_ok=True)
        FIT_FILE.write_text(tomli_w.dumps(res))
        print(tomli_w.dumps(res))  # noqa: T201 - a command-line entry point
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
