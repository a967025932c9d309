"""rcusim sweep: a parameter grid x replications, locally or on a Dask cluster (see calibration/sweep.py)."""

from __future__ import annotations

import argparse
import sys

from calibration import prescreen
from calibration import sweep as sw
from sim import scenario as sc
from sim.errors import ConfigError

from ..common import parse_sets
from .compare import CountBar

VERB = "sweep"
SUMMARY = """run a scenario over a grid of knob values x replications, in local
processes or on a Dask cluster; rows go to a CSV/Parquet file as they
finish, and an interrupted sweep resumes where it stopped"""


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "sweep",
        help="a grid of knob values x replications, to a CSV or Parquet file",
        description="Run SCENARIO at every point of the grid (the cartesian product of the --grid values), "
        "--replications times each (seeds from SeedSequence of the scenario's seed, the same at every point), "
        "in local worker processes (all cores) or on a Dask cluster (--scheduler or $DASK_SCHEDULER_ADDRESS). "
        "Rows are appended to --out as runs finish; run the same command again to resume an interrupted sweep.",
    )
    s.add_argument("scenario", help="a scenario .toml file or a bundled name")
    s.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="a knob and its values, e.g. --grid kernel.rcu.nocb=none,all --grid machine.cpus=1,2,4 (repeatable)",
    )
    s.add_argument("-n", "--replications", type=int, default=1, help="runs per grid point (default 1)")
    s.add_argument("--seed", type=int, help="base seed of the replications' seeds (default: scenario.seed)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario value at every point")
    s.add_argument("--out", metavar="FILE", help="FILE.csv or FILE.parquet (default: print a table, keep nothing)")
    s.add_argument("--workers", type=int, help="local worker processes (default: all cores)")
    s.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS, else local)")
    s.add_argument(
        "--metric", action="append", metavar="NAME", help="columns to show in the printed table and --plot (default: a few)"
    )
    s.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the metrics against the first --grid key, a line per value of the others (.png, .svg or .pdf)",
    )
    s.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    s.set_defaults(fn=cmd_sweep)


def metric_columns(summary: sw.SweepSummary, axes: list[sw.Axis]) -> list[str]:
    """The metric columns of a sweep's rows (every column but the grid keys, the replication,
    seed and definition columns, and the error)."""
    lead = {a.key for a in axes} | set(sw.KEY_COLUMNS) | set(sw.DEFINITION_COLUMNS) | {sw.ERROR_COLUMN}
    return [c for c in summary.header if c not in lead]


def check_metrics(summary: sw.SweepSummary, axes: list[sw.Axis], metrics: list[str] | None) -> None:
    """``--metric`` names must be metrics the sweep reports: the rule (and the suggestion of a
    close name) of ``rcusim compare --metric``. Not checked when every run failed: then no
    run reported any metric, and the table shows the errors."""
    if not metrics or all(r.get(sw.ERROR_COLUMN) for r in summary.rows):
        return
    try:
        prescreen._check_metrics(metrics, metric_columns(summary, axes))
    except ConfigError as exc:
        raise ConfigError(exc.field, "is not a metric this sweep reports", exc.fix) from None


def shown_metrics(summary: sw.SweepSummary, axes: list[sw.Axis], metrics: list[str] | None) -> list[str]:
    """The metrics the table and the plot show: those asked for, else a few usual ones."""
    present = metric_columns(summary, axes)
    if metrics:
        return [m for m in metrics if m in present]
    preferred = ("time_s", "messages_per_s", "cpu_utilisation", "context_switches")
    return [m for m in preferred if m in present][:4] or present[:4]


def print_table(summary: sw.SweepSummary, axes: list[sw.Axis], metrics: list[str] | None, out) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    grid_cols = [a.key for a in axes]
    show = shown_metrics(summary, axes, metrics)
    t = Table(title_justify="left")
    for c in (*grid_cols, "replication", *show):
        t.add_column(c, justify="left" if c in grid_cols else "right")
    if any(r.get(sw.ERROR_COLUMN) for r in summary.rows):
        t.add_column("error")
    for r in summary.rows:
        cells = [r.get(c, "") for c in (*grid_cols, "replication")]
        for m in show:
            v = r.get(m, "")
            try:
                cells.append(f"{float(v):.6g}")
            except ValueError:
                cells.append(v)
        if any(x.get(sw.ERROR_COLUMN) for x in summary.rows):
            cells.append(r.get(sw.ERROR_COLUMN, ""))
        t.add_row(*cells)
    Console(file=out, width=160).print(t)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..common import resolve_scenario

    if args.metric and args.out and not args.plot:
        raise ConfigError(
            "--metric",
            "chooses the printed table's (and --plot's) columns, and --out prints no table",
            "leave --metric out: the file has every metric; or add --plot FILE",
        )
    axes = sw.parse_grid(args.grid)
    if args.plot is not None:
        from ..common import check_outputs
        from ..plots import check_plot_path

        check_plot_path("--plot", args.plot)
        check_outputs([("--plot", args.plot)], [resolve_scenario(args.scenario), args.out])
    data = sc.load(resolve_scenario(args.scenario), parse_sets(args.set or []))
    bar = CountBar("sweep", not args.no_progress)
    try:
        summary = sw.sweep(
            data,
            axes,
            replications=args.replications,
            out=args.out,
            workers=args.workers,
            scheduler=sw.scheduler_address(args.scheduler),
            base_seed=args.seed,
            progress=bar,
        )
    except KeyboardInterrupt:
        bar.close()
        where = (
            f"the finished rows are in {args.out}; run the same command again to resume"
            if args.out
            else "nothing was kept (use --out FILE)"
        )
        print(f"rcusim: interrupted: {where}", file=sys.stderr)
        return 130
    finally:
        bar.close()
    if args.plot is not None or not args.out:  # the metrics the plot or the table shows
        check_metrics(summary, axes, args.metric)
    drawn = args.plot is not None and _plot(summary, axes, args.metric, args.plot)
    if args.out:
        what = f"{summary.ran} run(s)" + (f", {summary.skipped} already done" if summary.skipped else "")
        fail = f", {summary.failed} failed (see the error column)" if summary.failed else ""
        print(f"{args.out}: {len(summary.rows)} rows ({what}{fail})")
    else:
        print_table(summary, axes, args.metric, sys.stdout)
    if drawn:
        print(f"plot: {args.plot}")
    elif args.plot is not None:
        print(f"no plot: no run reported a metric ({args.plot} not written)", file=sys.stderr)
    return 1 if summary.failed else 0


def _plot(summary: sw.SweepSummary, axes: list[sw.Axis], metrics: list[str] | None, path: str) -> bool:
    """Draw the sweep into ``path``; False when no run reported a metric (all failed)."""
    from ..plots import save, sweep_figure

    show = shown_metrics(summary, axes, metrics)
    if not show or all(r.get(sw.ERROR_COLUMN) for r in summary.rows):
        return False  # nothing to draw: the table or the file has the errors
    try:
        save(sweep_figure(summary.rows, axes, show, sw.ERROR_COLUMN), path)
    except OSError as exc:
        raise ConfigError("--plot", f"cannot write {path}: {exc.strerror}", "choose a writable path") from None
    return True
