"""rcusim calibrate: fit the model's cost parameters to a measurement profile."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from calibration.fit import HELD_BACK, Calibration, calibrate
from calibration.params import cost_unit, params_toml, sibling_params
from calibration.profile import load_profile
from sim.errors import ConfigError
from sim.scenario import VERSION

from ..common import Progress, check_outputs

VERB = "calibrate"
MIN_BOOTSTRAP = 40  # the fewest replicates with a draw below 2.5 % and one above 97.5 %
SUMMARY = """fit the model's costs to a profile (direct mappings and SciPy fits of
simulated microbenchmarks, bootstrap intervals); writes a params file
for 'rcusim run --params' and a JSON fit report"""


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("calibrate", help="fit parameters to a profile", description=SUMMARY)
    c.add_argument("profile", metavar="PROFILE", help="a JSON profile written by rcusim collect")
    c.add_argument("--out", metavar="PARAMS", help="params file to write (default: PROFILE-params.toml next to it)")
    c.add_argument("--report", metavar="FILE", help="JSON fit report (default: PARAMS with .fit.json)")
    c.add_argument("--seeds", type=int, default=3, help="seeds per simulated microbenchmark (default 3)")
    c.add_argument(
        "--bootstrap",
        type=int,
        default=400,
        help=f"bootstrap replicates for the intervals (default 400, at least {MIN_BOOTSTRAP}; 0: none)",
    )
    c.add_argument(
        "--other-gaps",
        action="store_true",
        help="also copy irq_cost.other_gaps (interruptions besides the tick) into costs.other_gaps; off by default: "
        "with them the model starts far more lock convoys than the machine has (docs/notes/bundled-profile.md, PI-futex notes)",
    )
    c.add_argument("--json", action="store_true", help="print the fit report as JSON instead of tables")
    c.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    c.set_defaults(fn=cmd_calibrate)


def default_report(params: Path) -> Path:
    return params.with_name(params.name.removesuffix(".toml") + ".fit.json")


def _fmt(name: str, v: float | None) -> str:
    if v is None:
        return "-"
    unit = cost_unit(name)
    return f"{v:,.0f}" if unit == "ns" else f"{v:.2f}" if unit == "/s" else f"{v:.3f}"


def print_report(cal: Calibration, out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(file=out, width=170)
    m = cal.machine
    con.print(
        f"profile {cal.profile_source}: {m.get('host')}, kernel {m.get('kernel')}, {m.get('cpu_model')}, "
        f"{m.get('cpus')} CPUs, HZ {m.get('hz')}, preempt {m.get('preempt')}"
    )
    t = Table(title="parameters (ns; *_per_s per second; jitter_cv a ratio)", title_justify="left")
    for col in ("parameter", "value", "95% CI", "method", "how"):
        t.add_column(col, justify="right" if col in ("value", "95% CI") else "left", overflow="fold")
    for name, e in cal.estimates.items():
        ci = "-" if e.low is None else f"{_fmt(name, e.low)}..{_fmt(name, e.high)}"
        t.add_row(name, _fmt(name, e.value), ci, e.method, e.formula)
    for kind, knobs in cal.workload.items():
        for name, e in knobs.items():
            ci = "-" if e.low is None else f"{_fmt(name, e.low)}..{_fmt(name, e.high)}"
            t.add_row(f"workload.{kind}.{name}", _fmt(name, e.value), ci, e.method, e.formula)
    tb = cal.tick_busy
    if tb.rows:
        t.add_row("tick_busy", f"{len(tb.rows)} rows", "-", "measured", tb.formula)
    og = cal.other_gaps
    if og.formula:
        t.add_row("other_gaps", f"{og.per_s}/s", "-", "measured", og.formula)
    con.print(t)
    o = Table(title="microbenchmarks: measured median vs simulated (fitted anchors and checks)", title_justify="left")
    for col in ("outcome", "item", "measured ns", "simulated ns", "error", "role", "note"):
        o.add_column(col, justify="right" if col in ("measured ns", "simulated ns", "error") else "left")
    for r in cal.outcomes:
        o.add_row(r.name, r.item, f"{r.measured:,.0f}", f"{r.simulated:,.0f}", f"{100 * r.rel_error:+.1f}%", r.role, r.note)
    con.print(o)
    con.print(f"held back (never fitted): {', '.join(sorted(HELD_BACK))}; check them with: rcusim validate --profile PROFILE")
    for w in cal.warnings:
        con.print(f"warning: {w}")


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise ConfigError("--seeds", f"{args.seeds} is below 1", "use at least one seed")
    profile = load_profile(args.profile)
    out = Path(args.out) if args.out else sibling_params(args.profile)
    report = Path(args.report) if args.report else default_report(out)
    if args.bootstrap < 0 or 0 < args.bootstrap < MIN_BOOTSTRAP:
        raise ConfigError(
            "--bootstrap",
            f"{args.bootstrap} replicates cannot place a 95% interval's ends (2.5 % and 97.5 % of them)",
            f"use 0 (no intervals) or at least {MIN_BOOTSTRAP}, e.g. 400",
        )
    if out.suffix != ".toml":
        raise ConfigError("--out", f"{out} is not a .toml file: the params file is TOML", "name it e.g. params.toml")
    check_outputs([("--out", out), ("--report", report)], [args.profile])
    prog = Progress("calibrate", not args.no_progress)
    try:
        cal = calibrate(
            profile, seeds=args.seeds, bootstrap=args.bootstrap, progress=lambda what, f: prog(f), other_gaps=args.other_gaps
        )
    finally:
        prog.close()
    command = "rcusim calibrate " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else f"rcusim calibrate {args.profile}"
    try:
        out.write_text(params_toml(cal, args.profile, command=command, version=VERSION), encoding="utf-8")
        report.write_text(json.dumps(cal.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(exc.filename or out), f"cannot write: {exc.strerror}") from None
    if args.json:
        json.dump(cal.to_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print_report(cal, sys.stdout)
        print(f"params: {out}  (use: rcusim run SCENARIO --params {out})\nreport: {report}")
    return 0
