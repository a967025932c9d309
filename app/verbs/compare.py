"""rcusim compare: pre-screen a kernel patch (see calibration/prescreen.py)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from calibration import prescreen, sweep
from sim.errors import ConfigError

from ..common import check_outputs, parse_sets

VERB = "compare"
SUMMARY = """pre-screen a patch: run the baseline and the patched scenario over
N seeds with common random numbers; effect per metric with a bootstrap
confidence interval, a verdict, and whether it is worth a lab run"""


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "compare",
        help="baseline vs patch: effects with confidence intervals and a verdict",
        description="Compare a baseline with a patch (or two scenarios) over N seeds with common random numbers.\n\n"
        "  rcusim compare PATCH.toml              the patch's baseline against the patched baseline\n"
        "  rcusim compare SCENARIO PATCH.toml     that scenario against it with the patch applied\n"
        "  rcusim compare SCENARIO_A SCENARIO_B   two scenarios\n\n"
        "A patch file names its baseline and the changes as dotted keys ([set], [scale]); see scenarios/patches/.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("base", metavar="BASE", help="a patch file, or the baseline scenario (a .toml path or a bundled name)")
    c.add_argument("patch", metavar="PATCH", nargs="?", help="a patch file, or a second scenario")
    c.add_argument("-n", "--replications", type=int, default=10, help="seeds per arm (default 10)")
    c.add_argument("--seed", type=int, help="base seed of the replications' seeds (default: the baseline's scenario.seed)")
    c.add_argument(
        "--metric",
        action="append",
        metavar="NAME[:lower|higher]",
        help="judge only this metric (repeatable); ':higher' or ':lower' says which way is better",
    )
    c.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    c.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a value in both arms, e.g. --set workload.loops=20"
    )
    c.add_argument("--story", help="the validation story whose error applies (default: the one named like the baseline)")
    c.add_argument(
        "--model-error",
        type=float,
        metavar="FRACTION",
        help="the model's validated error to use (e.g. 0.15), instead of the story's",
    )
    c.add_argument(
        "--validation",
        metavar="FILE",
        help="read the story's error from this 'rcusim validate --json' output instead of running it",
    )
    c.add_argument("--workers", type=int, help="local worker processes (default: all cores)")
    c.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on this Dask scheduler (default: $DASK_SCHEDULER_ADDRESS, else locally)"
    )
    c.add_argument(
        "--plot",
        metavar="FILE",
        help="draw each metric's effect with its interval against the model's error (.png, .svg or .pdf)",
    )
    c.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    c.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    c.set_defaults(fn=cmd_compare)


def _metrics(items: list[str] | None) -> tuple[list[str] | None, dict[str, str]]:
    if not items:
        return None, {}
    names, declared = [], {}
    for item in items:
        name, colon, d = item.partition(":")
        if colon:
            if d not in ("lower", "higher"):
                raise ConfigError(f"--metric {item}", f"{d!r} is not 'lower' or 'higher'", "write NAME:lower or NAME:higher")
            declared[name] = d
        names.append(name)
    return names, declared


def _model_error(args: argparse.Namespace, story: str | None) -> prescreen.ModelError:
    if args.model_error is not None:
        if not 0 <= args.model_error < 10 or not math.isfinite(args.model_error):
            raise ConfigError("--model-error", f"{args.model_error} is not a fraction", "write e.g. 0.15 for 15%")
        return prescreen.ModelError(story, args.model_error, "given with --model-error")
    rows = None
    if args.validation:
        try:
            doc = json.loads(Path(args.validation).read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
                raise ValueError('expected an object {"rows": [...]}')
            rows = doc["rows"]
        except FileNotFoundError:
            raise ConfigError(
                "--validation", f"{args.validation}: no such file", "write it with rcusim validate --json > FILE"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                "--validation",
                f"{args.validation}: not the JSON of rcusim validate ({exc})",
                "write it with rcusim validate --json > FILE",
            ) from None
    return prescreen.model_error(story, rows)


class CountBar:
    """A rich progress bar on stderr, only on a terminal."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                transient=True,
                auto_refresh=False,  # no refresh thread: the sweep's worker processes fork from here
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=total, refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:+.2f}%"


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.4g}"
    return f"{x:,.4f}".rstrip("0").rstrip(".")


def print_comparison(cmp: prescreen.Comparison, out) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    con = Console(file=out, width=140)
    con.print(
        f"[bold]{cmp.baseline}[/bold] vs [bold]{cmp.patch}[/bold]: {cmp.replications} replications each, "
        f"common random numbers, {100 * cmp.confidence:g}% confidence"
    )
    for ch in cmp.changes:
        con.print(f"  change: {ch}")
    me = cmp.model_error
    con.print(f"  model error: {'none known' if me.value is None else f'{100 * me.value:.1f}%'} ({me.source})")
    t = Table(title_justify="left")
    for col, j in (
        ("metric", "left"),
        ("better", "left"),
        ("baseline", "right"),
        ("patch", "right"),
        ("effect", "right"),
        (f"{100 * cmp.confidence:g}% CI", "right"),
        ("verdict", "left"),
        ("lab run?", "left"),
    ):
        t.add_column(col, justify=j, no_wrap=col in ("metric", "effect"))  # type: ignore[arg-type]
    for e in cmp.effects:
        ci = "-" if not math.isfinite(e.ci_low) else f"[{_pct(e.ci_low)}, {_pct(e.ci_high)}]"
        lab = e.lab_run if e.note == "no validated error known" else f"{e.lab_run} ({e.note})" if e.note else e.lab_run
        t.add_row(e.metric, e.direction or "?", _num(e.base_mean), _num(e.patch_mean), _pct(e.effect), ci, e.verdict, lab)
    con.print(t)
    con.print(f"[bold]verdict:[/bold] {cmp.verdict}")


def cmd_compare(args: argparse.Namespace) -> int:
    metrics, declared = _metrics(args.metric)
    if args.plot is not None:
        from ..plots import check_plot_path

        check_plot_path("--plot", args.plot)
        check_outputs([("--plot", args.plot)], [args.base, args.patch, args.validation])
    cat = sweep.catalog()
    arms = prescreen.prepare(args.base, args.patch, parse_sets(args.set or []), cat)
    if args.story:
        from calibration import stories

        if args.story not in stories.NAMES:
            raise ConfigError("--story", f"unknown story {args.story!r}", f"stories are {', '.join(stories.NAMES)}")
    story = args.story or arms.story
    error = _model_error(args, story)
    bar = CountBar("compare", not args.no_progress)
    try:
        cmp = prescreen.compare(
            arms.base,
            arms.patched,
            baseline_label=arms.baseline_label,
            patch_label=arms.patch_label,
            changes=arms.changes,
            replications=args.replications,
            base_seed=args.seed,
            metrics=metrics,
            declared={**arms.declared, **declared},
            confidence=args.confidence,
            error=error,
            workers=args.workers,
            scheduler=sweep.scheduler_address(args.scheduler),
            progress=bar,
        )
    finally:
        bar.close()
    if args.plot is not None:
        from ..plots import compare_figure, save

        try:
            save(compare_figure(cmp), args.plot)
        except OSError as exc:
            raise ConfigError("--plot", f"cannot write {args.plot}: {exc.strerror}", "choose a writable path") from None
    if args.json:
        json.dump(cmp.to_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print_comparison(cmp, sys.stdout)
        if args.plot is not None:
            print(f"plot: {args.plot}")
    return 0
