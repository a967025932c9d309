"""rcusim validate: the validation contract (see calibration/validation.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from calibration import stories
from calibration.validation import Row, Spread, Story, StoryOptions, spreads, summary
from sim.errors import ConfigError, RcusimError

from ..common import Progress

VERB = "validate"
SUMMARY = """compare simulated figures with published ones (seed stories) or
measured ones (a profile): one row per figure, fitted anchors and
predictions apart, with the relative error; --check fails on a miss"""


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("validate", help="simulated vs published/measured figures", description=SUMMARY)
    v.add_argument("names", nargs="*", metavar="NAME", help=f"stories: {', '.join(stories.NAMES)}")
    v.add_argument("--all", action="store_true", help="every story (and the profile given with --profile)")
    v.add_argument(
        "--profile",
        metavar="FILE",
        nargs="+",
        action="extend",
        help="also validate the held-back composite benchmarks of this measured profile; several "
        "(collections of one machine) add a table of each figure's spread over them "
        "(--all adds the bundled profile calibration/profiles/default.json)",
    )
    v.add_argument(
        "--params",
        metavar="FILE",
        help="calibrated parameters for a single --profile (default: PROFILE-params.toml, or calibrate now)",
    )
    v.add_argument("--seeds", type=int, default=3, help="replications per simulated figure (default 3)")
    v.add_argument(
        "--workers",
        type=int,
        help="local worker processes for the stories' independent runs and for several profiles (default: all cores; "
        "the rows are the same whatever the number)",
    )
    v.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    v.add_argument("--json", action="store_true", help='print {"rows": [...]}')
    v.add_argument(
        "--plot",
        metavar="FILE",
        help="draw every row's error against its target band (.png, .svg or .pdf)",
    )
    v.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a predicted row misses its target or a fitted row has drifted from its anchor (stale fit)",
    )
    v.set_defaults(fn=cmd_validate)


def collect_rows(names: list[str], seeds: int, workers: int | None = None, progress: bool = False) -> list[Row]:
    """The rows of the named stories; ``progress``: a bar on stderr (a terminal only) per story."""
    for name in names:
        if name not in stories.NAMES:
            raise ConfigError(name, "unknown story", f"stories are {', '.join(stories.NAMES)}")
        if stories.get(name) is None:
            raise RcusimError(f"{name}: {stories.pending(name)}")
    rows: list[Row] = []
    for name in names:
        story = stories.get(name)
        assert story is not None
        rows.extend(_story_rows(story, seeds, workers, progress))
    return rows


def _story_rows(story: Story, seeds: int, workers: int | None, progress: bool) -> list[Row]:
    bar = Progress(story.name, progress)
    try:
        return story.rows(StoryOptions(seeds=seeds, workers=workers, progress=lambda label, f: bar(f, f"{story.name}: {label}")))
    finally:
        bar.close()


def profile_rows(
    profile_path: str, params_path: str | None, seeds: int, progress: bool = False, workers: int | None = None
) -> tuple[list[Row], list[str]]:
    """The held-back composite rows of a measured profile (calibration/composites.py)."""
    from calibration import composites
    from calibration.params import resolve_params
    from calibration.profile import load_profile

    from ..common import catalog

    profile = load_profile(profile_path)
    short = Path(profile_path).name
    bar = Progress(short, progress)
    try:
        params = resolve_params(
            params_path, profile_path, seeds=seeds, progress=lambda what, f: bar(f, f"{short}: calibrating: {what}")
        )
        assert params is not None
        cat = catalog()
        rows = composites.profile_rows(profile, params, cat, seeds, lambda label, f: bar(f, f"{short}: {label}"), workers)
    finally:
        bar.close()
    if not rows and not composites.pending(profile, cat):
        raise ConfigError(
            f"{profile_path}: items.messaging",
            "is missing: the profile holds no composite benchmark",
            "collect one: rcusim collect --items messaging",
        )
    return rows, composites.pending(profile, cat)


def _profile_job(job: tuple[str, int]) -> tuple[list[Row], list[str]]:
    """:func:`profile_rows` of one of several profiles (each with its own params), in a worker."""
    path, seeds = job
    return profile_rows(path, None, seeds)


def print_rows(rows: list[Row], out) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    t = Table(title="validation", title_justify="left")
    for col in ("story", "metric", "config", "reference", "simulated", "unit", "role", "error", "95% interval", "target", "ok"):
        t.add_column(col, justify="right" if col in ("reference", "simulated", "error", "95% interval", "target") else "left")
    for r in rows:
        err = r.rel_error
        t.add_row(
            r.story,
            r.metric,
            r.config,
            f"{r.reference:.4g}",
            f"{r.simulated:.4g}",
            r.unit,
            r.role,
            "-" if err != err else f"{100 * err:+.1f}%",
            "-" if r.interval is None else f"{100 * r.interval[0]:+.0f}..{100 * r.interval[1]:+.0f}%",
            "-" if r.tolerance is None else f"±{100 * r.tolerance:.0f}%" + (" fit" if r.role == "fitted" else ""),
            "yes" if r.ok else "MISS",
        )
    Console(file=out, width=160).print(t)


def print_spreads(rows: list[Spread], out) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    t = Table(title="across the profiles (each calibrated by itself)", title_justify="left")
    for col in ("metric", "config", "profiles", "within target", "error: min", "median", "max", "measured"):
        t.add_column(col, justify="left" if col in ("metric", "config") else "right")
    for s in rows:
        t.add_row(
            s.metric,
            s.config,
            str(s.profiles),
            f"{s.within} (±{100 * s.target:.0f}%)",
            f"{100 * s.min_error:+.0f}%",
            f"{100 * s.median_error:+.0f}%",
            f"{100 * s.max_error:+.0f}%",
            f"{s.min_reference:.4g}..{s.max_reference:.4g} {s.unit}",
        )
    Console(file=out, width=160).print(t)


def cmd_validate(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise ConfigError("--seeds", f"{args.seeds} is below 1", "use at least one seed")
    names = list(stories.NAMES) if args.all else list(args.names)
    if args.all:
        names = [n for n in names if stories.get(n) is not None]
    profile_paths = list(args.profile or [])
    if not profile_paths and args.all:
        from calibration.profile import DEFAULT_PROFILE

        profile_paths = [str(DEFAULT_PROFILE)] if DEFAULT_PROFILE.is_file() else []
    if not names and not profile_paths:
        raise ConfigError("NAME", "no story given", f"name one of {', '.join(stories.NAMES)}, use --all or --profile FILE")
    if args.params and not profile_paths:
        raise ConfigError(
            "--params",
            "applies only with --profile (the stories use their own fitted values)",
            "add --profile FILE, or leave --params out",
        )
    for flag, given in (("NAME", names), ("--profile", [str(Path(p).resolve()) for p in profile_paths])):
        twice = sorted({n for n in given if given.count(n) > 1})
        if twice:
            raise ConfigError(flag, f"{twice[0]} is given twice", "name each once")
    if args.params and len(profile_paths) > 1:
        raise ConfigError(
            "--params",
            f"names one params file for {len(profile_paths)} profiles",
            "leave it out: each profile then uses its PROFILE-params.toml, or is calibrated",
        )
    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers", f"{args.workers} is below 1", "use at least one worker")
    if args.plot is not None:
        from ..common import check_outputs
        from ..plots import check_plot_path

        check_plot_path("--plot", args.plot)
        check_outputs([("--plot", args.plot)], [*profile_paths, args.params])
    show = not args.no_progress
    rows = collect_rows(names, args.seeds, args.workers, show)
    pending: list[str] = []
    if len(profile_paths) == 1:
        results = [profile_rows(profile_paths[0], args.params, args.seeds, show, args.workers)]
    elif profile_paths:
        # several collections: one worker process per profile at a time, rows in the order given
        from calibration.sweep import pmap

        def done(k: int, total: int) -> None:
            if show:
                print(f"profile {k}/{total} done", file=sys.stderr, flush=True)

        results = pmap(_profile_job, [(p, args.seeds) for p in profile_paths], workers=args.workers, done=done)
    else:
        results = []
    for rows_p, pending_p in results:
        rows += rows_p
        pending += [p for p in pending_p if p not in pending]
    spread = spreads(rows)
    if args.plot is not None and rows:
        from ..plots import save, validate_figure

        try:
            save(validate_figure(rows), args.plot)
        except OSError as exc:
            raise ConfigError("--plot", f"cannot write {args.plot}: {exc.strerror}", "choose a writable path") from None
    if args.json:
        doc: dict[str, object] = {"rows": [r.to_json() for r in rows], "pending": pending}
        if spread:
            doc["spread"] = [s.to_json() for s in spread]
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
    else:
        print_rows(rows, sys.stdout)
        for line in summary(rows):
            print(line)
        if spread:
            print_spreads(spread, sys.stdout)
        for p in pending:
            print(f"not yet validated: {p}")
        if args.plot is not None:
            print(f"plot: {args.plot}" if rows else f"no plot: no row to draw ({args.plot} not written)")
        for r in rows:
            if r.role == "fitted" and not r.ok:
                module = r.story.replace("-", "_")
                print(
                    f"stale fit: {r.story} '{r.metric}' ({r.config}) is {100 * r.rel_error:+.1f}% from its anchor; "
                    f"the model changed after the fit: refit with python -m calibration.stories.{module} --fit"
                )
    if args.check and not all(r.ok for r in rows):
        return 1
    return 0
