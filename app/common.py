"""Shared pieces of the CLI verbs: scenario lookup, --set parsing, tables, progress."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim import scenario as sc
from sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_DIR = ROOT / "scenarios"


def catalog() -> sc.Catalog:
    import models

    return models.catalog()


def resolve_scenario(name: str) -> Path:
    if not name.strip():
        raise ConfigError("SCENARIO", "is empty", "give a scenario .toml file or a bundled name (rcusim list)")
    p = Path(name)
    if p.is_dir():
        raise ConfigError(name, "is a directory, not a scenario file", "give a scenario .toml file or a bundled name")
    if p.exists():
        return p
    bundled = SCENARIO_DIR / f"{name}.toml"
    if bundled.exists():
        return bundled
    known = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.toml")))
    raise ConfigError(name, "no such scenario file or bundled scenario", f"bundled: {known}")


def check_outputs(outputs: Sequence[tuple[str, str | Path | None]], inputs: Sequence[str | Path | None] = ()) -> None:
    """Refuse, before any work, output paths (flag, path) that are empty, a directory, in a
    directory that does not exist, that cannot be written (tried by opening it for appending;
    a file that did not exist is removed again), the same file as one of ``inputs`` (a
    run would overwrite the profile, scenario or params it reads) or the same file as another
    output."""
    seen: dict[Path, str] = {}
    ins = {Path(p).resolve() for p in inputs if p is not None and str(p).strip() and Path(p).exists()}
    for flag, path in outputs:
        if path is None:
            continue
        if not str(path).strip():
            raise ConfigError(flag, "is an empty file name", f"give a file, e.g. {flag} out.json, or leave {flag} out")
        p = Path(path)
        if p.is_dir():
            raise ConfigError(flag, f"{p} is a directory", "give a file name")
        parent = p.parent if str(p.parent) else Path(".")
        if parent.exists() and not parent.is_dir():
            raise ConfigError(flag, f"{parent} is not a directory", "choose another path")
        if not parent.is_dir():
            raise ConfigError(flag, f"directory {parent} does not exist", "create it or choose another path")
        r = p.resolve()
        if r in ins:
            raise ConfigError(flag, f"{p} is also an input of this command: it would be overwritten", "write elsewhere")
        if r in seen:
            raise ConfigError(flag, f"{p} is also the file of {seen[r]}", "give the two outputs different files")
        seen[r] = flag
        existed = os.path.lexists(p)  # a dangling symlink counts: the probe must not remove the link
        try:  # a probe: what the OS refuses (permissions, /proc, a read-only mount) fails now, not after the work
            with open(p, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ConfigError(flag, f"cannot write {p}: {exc.strerror}", "choose a writable path") from None
        if not existed:
            os.unlink(p)


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
        # the key says its --json unit (ns); this table is in microseconds
        lt.add_row(
            name.removesuffix("_ns"),
            str(s["count"]),
            *(_fmt(s[k] / 1000.0) if s["count"] else "-" for k in ("mean", "p50", "p90", "p99", "max")),
        )
    con.print(lt)
    con.print(f"simulated {res.sim_ns / 1e9:.4g} s in {res.wall_s:.2f} s wall, {res.events:,} events, rcusim {res.version}")


class Progress:
    """A progress bar on stderr for runs that take more than a moment (only on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._bar: Any = None
        self._task: Any = None
        import time

        self._t0 = time.perf_counter()
        self._time = time.perf_counter

    def __call__(self, frac: float, label: str | None = None) -> None:
        """Show ``frac`` done (0..1), and ``label`` as the bar's text if given."""
        if not self.enabled:
            return
        if label is not None:
            self.label = label
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
        self._bar.update(self._task, completed=frac, description=self.label)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
