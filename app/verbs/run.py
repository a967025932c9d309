"""rcusim run: simulate one scenario."""

from __future__ import annotations

import argparse
import json
import sys

from sim import scenario as sc
from sim.config import set_path
from sim.errors import ConfigError
from sim.trace import TRACE_LIMIT, Tracer

from ..common import Progress, catalog, check_outputs, parse_sets, print_result, resolve_scenario
from ..plots import check_plot_path

VERB = "run"
SUMMARY = """simulate a scenario (a .toml file or a bundled name) and print its
throughput, per-CPU utilisation, switches and latency percentiles;
--json for one JSON object, --plot FILE for a figure, --trace FILE for a
Perfetto trace"""


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "run", help="simulate a scenario and print its results", description="Simulate a scenario and print its results."
    )
    r.add_argument("scenario", help="a scenario .toml file or the name of a bundled one (see 'rcusim list')")
    r.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a scenario value, e.g. --set machine.cpus=2 (repeatable)"
    )
    r.add_argument("--seed", type=int, help="seed of the run (overrides scenario.seed)")
    cal = r.add_mutually_exclusive_group()
    cal.add_argument("--params", metavar="FILE", help="calibrated parameters (rcusim calibrate) merged into [costs] before --set")
    cal.add_argument(
        "--profile",
        metavar="FILE",
        help="a measured profile: use the params file calibrated from it (PROFILE-params.toml), or calibrate now",
    )
    r.add_argument("--trace", metavar="FILE", help="write a Chrome trace-event JSON file (opens in Perfetto)")
    r.add_argument(
        "--trace-limit",
        type=int,
        metavar="N",
        help=f"trace events kept, the first N (default {TRACE_LIMIT:,}: about 1 GiB of memory while the run lasts); "
        "later ones are counted, not kept",
    )
    r.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the run (.png, .svg or .pdf): where each CPU's time went, the workload's series, latency percentiles",
    )
    r.add_argument("--json", action="store_true", help="print the result as one JSON object")
    r.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    r.set_defaults(fn=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    cat = catalog()
    overrides = parse_sets(args.set or [])
    if args.seed is not None:
        overrides["scenario.seed"] = args.seed
    path = resolve_scenario(args.scenario)
    if args.trace_limit is not None:
        if args.trace is None:
            raise ConfigError("--trace-limit", "given without --trace", "add --trace FILE, or leave --trace-limit out")
        if args.trace_limit < 1:
            raise ConfigError(
                "--trace-limit", f"must be at least 1, got {args.trace_limit}", "give the number of trace events to keep"
            )
    check_plot_path("--plot", args.plot)
    if args.trace is not None or args.plot is not None:
        from calibration.params import sibling_params

        inputs = [path, args.params, args.profile, sibling_params(args.profile) if args.profile else None]
        check_outputs([("--trace", args.trace), ("--plot", args.plot)], inputs)
    data = sc.load(path)
    params = None
    if args.params or args.profile:
        from calibration.params import apply_params, resolve_params

        params = resolve_params(args.params, args.profile)
        if params is not None:
            apply_params(data, params)  # scenario file < params < --set
    for key, value in overrides.items():
        set_path(data, key, value)
    try:
        scn = sc.validate(data, cat)
    except ConfigError as exc:
        if params is not None and exc.field not in overrides and params.holds(exc.field):
            raise ConfigError(f"{params.source}: {exc.field}", exc.problem, exc.fix) from None
        raise
    tracer = Tracer(limit=args.trace_limit or TRACE_LIMIT) if args.trace else None
    prog = Progress(scn.meta.name, not args.no_progress)
    try:
        res = sc.run(scn, cat, tracer=tracer, progress=prog)
    finally:
        prog.close()
    if tracer is not None:
        try:
            with open(args.trace, "w", encoding="utf-8") as fp:
                tracer.write(fp)
        except OSError as exc:
            raise ConfigError("--trace", f"cannot write {args.trace}: {exc.strerror}") from None
    if args.plot is not None:
        from ..plots import run_figure, save

        try:
            save(run_figure(res.to_json()), args.plot)
        except OSError as exc:
            raise ConfigError("--plot", f"cannot write {args.plot}: {exc.strerror}", "choose a writable path") from None
    if args.json:
        json.dump(res.to_json(), sys.stdout, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print_result(res, sys.stdout)
        if tracer is not None:
            print(f"trace: {args.trace} ({len(tracer):,} events; open it at ui.perfetto.dev)")
        if args.plot is not None:
            print(f"plot: {args.plot}")
    if tracer is not None and tracer.dropped:
        print(
            f"trace: kept the first {len(tracer):,} events and dropped {tracer.dropped:,} later ones; "
            f"--trace-limit {len(tracer) + tracer.dropped} keeps them all",
            file=sys.stderr,
        )
    return 0
