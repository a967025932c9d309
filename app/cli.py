"""The ``rcusim`` command line.

Every user error (bad scenario, unknown knob, impossible run) is printed as one line
``rcusim: error: FIELD: problem (fix)`` with exit code 2; nothing user-caused prints a
traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim import scenario as sc
from sim.config import describe
from sim.errors import ConfigError, RcusimError
from sim.params import Costs, KernelConfig, MachineConfig
from sim.trace import Tracer

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_DIR = ROOT / "scenarios"

DESCRIPTION = """\
rcusim: a discrete-event simulator of the Linux mechanisms behind scalability
(scheduling, RCU, locks, timers), for what-if questions about kernel changes.

verbs:
  run SCENARIO     simulate a scenario (a .toml file or a bundled name) and print its
                   throughput, per-CPU utilisation, switches and latency percentiles;
                   --json for one JSON object, --trace FILE for a Perfetto trace
  list             the bundled scenarios, with their descriptions
  knobs            every configuration key (machine, kernel, costs, mechanisms,
                   workloads) with its default, meaning and source

Run 'rcusim VERB --help' for a verb's options.
"""


def _catalog() -> sc.Catalog:
    import models

    return models.catalog()


def resolve_scenario(name: str) -> Path:
    p = Path(name)
    if p.exists():
        return p
    bundled = SCENARIO_DIR / f"{name}.toml"
    if bundled.exists():
        return bundled
    known = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.toml")))
    raise ConfigError(name, "no such scenario file or bundled scenario", f"bundled: {known}")


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(item, "--set needs key=value", "e.g. --set machine.cpus=4")
        key, _, value = item.partition("=")
        out[key.strip()] = sc.parse_value(value.strip())
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:,.4f}".rstrip("0").rstrip(".")
    return str(v)


def print_result(res: sc.Result, out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(file=out, width=110)
    t = Table(title=f"{res.scenario} (seed {res.seed})", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in res.metrics.items():
        t.add_row(k, _fmt(v))
    con.print(t)
    c = Table(title="CPUs", title_justify="left")
    for col in ("cpu", "util %", "user %", "kernel %", "irq %", "softirq %", "switch %", "idle %", "switches", "ticks", "IPIs"):
        c.add_column(col, justify="right")
    total = res.sim_ns or 1
    for row in res.cpus:
        idle = row["idle_ns"] + row["idle_exit_ns"]
        c.add_row(
            str(row["cpu"]),
            f"{100 * row['utilisation']:.1f}",
            *(f"{100 * row[k] / total:.1f}" for k in ("user_ns", "kernel_ns", "irq_ns", "softirq_ns", "switch_ns")),
            f"{100 * idle / total:.1f}",
            str(row["switches"]),
            str(row["ticks"]),
            str(row["ipis"]),
        )
    con.print(c)
    lt = Table(title="latency percentiles (us)", title_justify="left")
    for col in ("latency", "count", "mean", "p50", "p90", "p99", "max"):
        lt.add_column(col, justify="right")
    for name, s in res.latency.items():
        lt.add_row(
            name, str(s["count"]), *(_fmt(s[k] / 1000.0) if s["count"] else "-" for k in ("mean", "p50", "p90", "p99", "max"))
        )
    con.print(lt)
    con.print(f"simulated {res.sim_ns / 1e9:.4g} s in {res.wall_s:.2f} s wall, {res.events:,} events, rcusim {res.version}")


class _Progress:
    """A progress bar on stderr for runs that take more than a moment (only on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._bar: Any = None
        self._task: Any = None
        import time

        self._t0 = time.perf_counter()
        self._time = time.perf_counter

    def __call__(self, frac: float) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            if self._time() - self._t0 < 0.5:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=1.0)
        self._bar.update(self._task, completed=frac)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def cmd_run(args: argparse.Namespace) -> int:
    cat = _catalog()
    overrides = parse_sets(args.set or [])
    if args.seed is not None:
        overrides["scenario.seed"] = args.seed
    data = sc.load(resolve_scenario(args.scenario), overrides)
    scn = sc.validate(data, cat)
    tracer = Tracer() if args.trace else None
    prog = _Progress(scn.meta.name, not args.no_progress)
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
    if args.json:
        json.dump(res.to_json(), sys.stdout, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print_result(res, sys.stdout)
        if tracer is not None:
            print(f"trace: {args.trace} ({len(tracer.events):,} events; open it at ui.perfetto.dev)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import tomllib

    for p in sorted(SCENARIO_DIR.glob("*.toml")):
        meta = tomllib.loads(p.read_text()).get("scenario", {})
        print(f"{p.stem:28s} {meta.get('description', '')}")
    return 0


def cmd_knobs(args: argparse.Namespace) -> int:
    cat = _catalog()
    groups: list[tuple[str, type]] = [
        ("scenario.", sc.ScenarioMeta),
        ("machine.", MachineConfig),
        ("kernel.", KernelConfig),
        ("costs.", Costs),
    ]
    groups += [(f"kernel.{n}.", m.config) for n, m in cat.mechanisms.items()]
    groups += [(f"workload ({k}): ", w.config) for k, w in cat.workloads.items()]
    for prefix, cls in groups:
        for key, tp, default, doc, source in describe(cls, prefix):
            src = f" [source: {source}]" if source else ""
            print(f"{key}  ({tp}, default {default})\n    {doc}{src}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rcusim", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    r = sub.add_parser(
        "run", help="simulate a scenario and print its results", description="Simulate a scenario and print its results."
    )
    r.add_argument("scenario", help="a scenario .toml file or the name of a bundled one (see 'rcusim list')")
    r.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a scenario value, e.g. --set machine.cpus=2 (repeatable)"
    )
    r.add_argument("--seed", type=int, help="seed of the run (overrides scenario.seed)")
    r.add_argument("--trace", metavar="FILE", help="write a Chrome trace-event JSON file (opens in Perfetto)")
    r.add_argument("--json", action="store_true", help="print the result as one JSON object")
    r.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    r.set_defaults(fn=cmd_run)
    ls = sub.add_parser("list", help="list the bundled scenarios", description="List the bundled scenarios.")
    ls.set_defaults(fn=cmd_list)
    k = sub.add_parser(
        "knobs", help="list every configuration key", description="List every configuration key with its default and source."
    )
    k.set_defaults(fn=cmd_knobs)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    try:
        return int(args.fn(args))
    except RcusimError as exc:
        print(f"rcusim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rcusim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
