"""Figures the CLI writes with ``--plot FILE`` (PNG, SVG or PDF, by the file's suffix).

``run``: where each CPU's time went, the workload's series (the netns story's rate against
routers created, the GP-latency distribution) and the latency percentiles. ``validate``: each
row's error against its target band, fitted anchors and predictions apart. ``compare``: each
metric's effect with its confidence interval against the band of the model's validated error.
``sweep``: each metric against the first grid key, a line per value of the others.

Drawn with matplotlib's Agg backend (no display needed). The files are reproducible: the same
result gives the same bytes (SVG ids come from a fixed salt, and no file carries a date).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sim.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from calibration.prescreen import Comparison
    from calibration.validation import Row

FORMATS = (".png", ".svg", ".pdf")

# CPU states in the order of the run table's columns, with the colours of the explorer's chart
STATES = (
    ("user_ns", "user", "#4c78a8"),
    ("kernel_ns", "kernel", "#f58518"),
    ("irq_ns", "irq", "#e45756"),
    ("softirq_ns", "softirq", "#72b7b2"),
    ("switch_ns", "switch", "#b279a2"),
)
IDLE_COLOUR = "#dddddd"


def check_plot_path(flag: str, path: str | None) -> None:
    """Refuse a ``--plot`` file whose suffix names no format, before any work."""
    if path is None:
        return
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        got = f"'{suffix}'" if suffix else "no suffix"
        raise ConfigError(flag, f"{path} has {got}, which names no figure format", f"end the file name in {', '.join(FORMATS)}")


def _figure(heights: Sequence[float], width: float = 9.0) -> tuple[Figure, list[Any]]:
    """A figure of panels stacked top to bottom, ``heights`` in inches."""
    from matplotlib.figure import Figure  # the Agg canvas: no display, no pyplot state

    fig = Figure(figsize=(width, sum(heights) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(heights), 1, height_ratios=list(heights))
    axes = [fig.add_subplot(grid[i, 0]) for i in range(len(heights))]
    return fig, axes


def _plain_log_labels(axis: Any) -> None:
    """Tick labels of a log axis as plain numbers (20, 50, 100), not powers of ten."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def save(fig: Figure, target: str | Path | IO[bytes], fmt: str | None = None) -> None:
    """Write ``fig`` reproducibly to ``target``, a path in the format its suffix names, or a
    binary file object in format ``fmt`` ("png", "svg" or "pdf")."""
    import matplotlib

    if fmt is None:
        assert isinstance(target, (str, Path)), "a file object needs fmt"
        fmt = Path(target).suffix.lower()[1:]
    kind = fmt
    meta: dict[str, Any] = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}[
        kind
    ]
    with matplotlib.rc_context({"svg.hashsalt": "rcusim", "svg.fonttype": "none"}):
        fig.savefig(target, format=kind, metadata=meta, dpi=110)


def error_axis_limit(tolerances_pct: Sequence[float]) -> float:
    """Where an axis of relative errors (%) is cut: three times the widest tolerance, at least
    30 %; an error beyond it is drawn at the edge with its value, so that one huge miss (the
    timers story's +1,044 %) does not flatten every other row. Used by :func:`validate_figure`
    and the explorer's validation chart."""
    return 3.0 * max([*tolerances_pct, 10.0])


# ------------------------------------------------------------------------------------ run
def run_figure(res: Mapping[str, Any]) -> Figure:
    """The figure of one run (``Result.to_json()``): CPU time, series, latency percentiles."""
    series = {name: pts for name, pts in (res.get("series") or {}).items() if pts}
    latency = {name: s for name, s in (res.get("latency") or {}).items() if s.get("count")}
    heights = [min(8.0, 0.3 * len(res["cpus"])) + 1.0] + [2.6] * len(series)
    if latency:
        heights.append(0.4 * len(latency) + 1.1)
    fig, axes = _figure(heights)
    fig.suptitle(f"{res['scenario']} (seed {res['seed']}): {res['sim_ns'] / 1e9:.4g} s simulated", fontsize=11)
    _cpu_panel(axes[0], res)
    for ax, (name, pts) in zip(axes[1:], series.items(), strict=False):
        _series_panel(ax, name, pts)
    if latency:
        _latency_panel(axes[-1], latency)
    return fig


def _cpu_panel(ax: Any, res: Mapping[str, Any]) -> None:
    total = res["sim_ns"] or 1
    cpus = res["cpus"]
    labels = [f"CPU {c['cpu']}" for c in cpus]
    left = [0.0] * len(cpus)
    for key, label, colour in STATES:
        widths = [100.0 * c[key] / total for c in cpus]
        ax.barh(labels, widths, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    idle = [100.0 - x for x in left]
    ax.barh(labels, idle, left=left, color=IDLE_COLOUR, label="idle")
    ax.set_xlim(0, 100)
    if len(cpus) > 32:  # label every 8th CPU of a large machine
        ax.set_yticks(range(0, len(cpus), 8), labels[::8])
    ax.invert_yaxis()
    ax.set_xlabel("% of the run")
    ax.set_title("where each CPU's time went", fontsize=10, loc="left")
    ax.legend(ncols=6, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.12), frameon=False)


def _series_panel(ax: Any, name: str, pts: Sequence[Mapping[str, float]]) -> None:
    xkey, ykey = list(pts[0])[:2]
    xs = [p[xkey] for p in pts]
    ys = [p[ykey] for p in pts]
    if name == "latency":  # a distribution: calls per histogram bucket
        ax.vlines(xs, 0, ys, color="#4c78a8", linewidth=2)
        if min(xs) > 0 and max(xs) / min(xs) > 20:
            ax.set_xscale("log")
            _plain_log_labels(ax.xaxis)
    else:
        ax.plot(xs, ys, marker="o", color="#4c78a8")
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xkey)
    ax.set_ylabel(ykey)
    ax.grid(alpha=0.3)
    ax.set_title(f"{name}: {ykey} against {xkey}", fontsize=10, loc="left")


def _latency_panel(ax: Any, latency: Mapping[str, Mapping[str, float]]) -> None:
    names = list(latency)
    marks = (("p50", "o", "#4c78a8"), ("p90", "s", "#f58518"), ("p99", "^", "#e45756"), ("max", "x", "#555555"))
    for key, marker, colour in marks:
        # a log axis: a zero percentile (a latency below the clock's resolution) is left out
        pts = [(latency[n][key] / 1000.0, i) for i, n in enumerate(names) if (latency[n].get(key) or 0) > 0]
        ax.scatter([x for x, _ in pts], [i for _, i in pts], marker=marker, color=colour, label=key, zorder=3)
    ax.set_xscale("log")
    _plain_log_labels(ax.xaxis)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_yticks(range(len(names)), [n.removesuffix("_ns") for n in names])
    ax.set_xlabel("latency (us, log scale)")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(ncols=4, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.02), frameon=False)
    ax.set_title("latency percentiles", fontsize=10, loc="left", pad=18)


# ------------------------------------------------------------------------------- validate
def validate_figure(rows: Sequence[Row]) -> Figure:
    """Each row's relative error (dot), its 95 % interval where it has one (bar) and its
    tolerance (band): a dot outside its band is a miss. Fitted rows are hollow."""
    n = len(rows)
    fig, (ax,) = _figure([max(2.0, 0.3 * n + 0.8)], width=10.0)
    labels = [f"{r.story}: {r.metric} ({r.config})" if r.config else f"{r.story}: {r.metric}" for r in rows]
    labels = [lab if len(lab) <= 70 else lab[:67] + "..." for lab in labels]
    errs = [100.0 * r.rel_error for r in rows]
    finite = [abs(e) for e in errs if math.isfinite(e)]
    tols = [100.0 * r.tolerance for r in rows if r.tolerance is not None]
    clip = min(max([*finite, *tols, 10.0]), error_axis_limit(tols))
    for i, r in enumerate(rows):
        if r.tolerance is not None:
            t = 100.0 * r.tolerance
            ax.fill_betweenx([i - 0.4, i + 0.4], -t, t, color="#d8ecd8" if r.role == "predicted" else "#e8e8e8", zorder=1)
        if r.interval is not None:
            lo, hi = (100.0 * v for v in r.interval)
            ax.hlines(i, max(lo, -clip), min(hi, clip), color="#888888", linewidth=1.5, zorder=2)
        e = errs[i]
        if not math.isfinite(e):
            ax.text(0, i, "no figure", ha="center", va="center", fontsize=8, color="#e45756")
            continue
        colour = "#4c78a8" if r.ok else "#e45756"
        shown = max(-clip, min(clip, e))
        face = "none" if r.role == "fitted" else colour
        ax.scatter([shown], [i], s=36, facecolors=face, edgecolors=colour, zorder=3)
        if shown != e:
            ax.annotate(
                f"{e:+.0f}%",
                (shown, i),
                xytext=(4 if e > 0 else -4, 0),
                textcoords="offset points",
                ha="left" if e > 0 else "right",
                va="center",
                fontsize=8,
                color=colour,
            )
    ax.axvline(0, color="#555555", linewidth=0.8)
    ax.set_xlim(-clip * 1.15, clip * 1.15)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.set_xlabel("simulated vs reference (%)")
    within = sum(r.ok for r in rows)
    ax.set_title(
        f"{within} of {n} rows within tolerance\n"
        "dot: error (hollow: a fitted anchor), band: tolerance, bar: 95 % interval, red: a miss",
        fontsize=9,
        loc="left",
    )
    ax.grid(alpha=0.3, axis="x")
    return fig


# -------------------------------------------------------------------------------- compare
VERDICT_COLOURS = {"improves": "#54a24b", "regresses": "#e45756", "changes": "#f58518"}


def compare_figure(cmp: Comparison) -> Figure:
    """Each compared metric's effect of the patch (dot) with its confidence interval (bar),
    against the band of the model's validated error, inside which a simulated effect does not
    justify a lab run by itself. Green improves, red regresses, orange changes (no better
    direction known), grey no detectable effect."""
    effects = [e for e in cmp.effects if math.isfinite(e.effect)]
    n = max(1, len(effects))
    fig, (ax,) = _figure([max(2.0, 0.3 * n + 1.0)], width=9.5)
    me = cmp.model_error.value
    if me is not None:
        ax.axvspan(-100.0 * me, 100.0 * me, color="#eeeeee", zorder=0)
    for i, e in enumerate(effects):
        colour = VERDICT_COLOURS.get(e.verdict, "#888888")
        if math.isfinite(e.ci_low) and math.isfinite(e.ci_high):
            ax.hlines(i, 100.0 * e.ci_low, 100.0 * e.ci_high, color=colour, linewidth=2, zorder=2)
        ax.scatter([100.0 * e.effect], [i], color=colour, zorder=3)
    ax.axvline(0, color="#555555", linewidth=0.8)
    from matplotlib.lines import Line2D

    shown = {e.verdict for e in effects}
    legend = [
        Line2D([], [], marker="o", color=VERDICT_COLOURS.get(v, "#888888"), label=v)
        for v in ("improves", "regresses", "changes", "no detectable effect")
        if v in shown
    ]
    if legend:
        ax.legend(handles=legend, fontsize=8, loc="best")
    ax.set_yticks(range(len(effects)), [e.metric for e in effects], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel("patch vs baseline (%)")
    band = "no model error known" if me is None else f"band: the model's error, {100 * me:.0f}% ({cmp.model_error.source})"
    ax.set_title(
        f"{cmp.patch} vs {cmp.baseline}, {cmp.replications} seeds each: effect with its {100 * cmp.confidence:g}% interval; "
        f"{band}",
        fontsize=9,
        loc="left",
        wrap=True,
    )
    ax.grid(alpha=0.3, axis="x")
    return fig


# ---------------------------------------------------------------------------------- sweep
def sweep_figure(rows: Sequence[Mapping[str, str]], axes: Sequence[Any], metrics: Sequence[str], error_column: str) -> Figure:
    """Each metric against the first grid axis, one line per combination of the other axes:
    the mean over the replications, with their range as a bar when there are several.
    ``rows`` are the sweep's rows (text, as in its file); failed runs are left out."""
    from collections import defaultdict

    first, rest = axes[0], list(axes[1:])
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in first.values)
    xs_of = {t: (float(v) if numeric else float(i)) for i, (t, v) in enumerate(zip(first.texts, first.values, strict=True))}
    ok = [r for r in rows if not r.get(error_column)]
    fig, axs = _figure([2.8] * len(metrics))
    for ax, metric in zip(axs, metrics, strict=True):
        lines: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in ok:
            try:
                v = float(r[metric])
            except (KeyError, ValueError):
                continue
            if math.isfinite(v):
                lines[tuple(r.get(a.key, "") for a in rest)][r.get(first.key, "")].append(v)
        for label, points in lines.items():
            order = sorted((t for t in first.texts if t in points), key=xs_of.__getitem__)  # by x, not as typed
            x = [xs_of[t] for t in order]
            mean = [sum(points[t]) / len(points[t]) for t in order]
            name = ", ".join(f"{a.key}={v}" for a, v in zip(rest, label, strict=True)) or None
            line = ax.plot(x, mean, marker="o", label=name)[0]
            spread = [(min(points[t]), max(points[t])) for t in order]
            if any(hi > lo for lo, hi in spread):
                ax.vlines(x, [lo for lo, _ in spread], [hi for _, hi in spread], color=line.get_color(), alpha=0.6)
        if not numeric:
            ax.set_xticks(range(len(first.texts)), list(first.texts))
        elif len(first.values) <= 12:
            ax.set_xticks(sorted(xs_of.values()), [t for _, t in sorted((x, t) for t, x in xs_of.items())])
        ax.set_xlabel(first.key)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        if rest and lines:
            ax.legend(fontsize=8)
    reps = max((int(r.get("replication", "0") or 0) for r in ok), default=0) + 1
    axs[0].set_title(
        f"mean of {reps} replication(s) per point" + (", bar: their range" if reps > 1 else ""), fontsize=9, loc="left"
    )
    return fig
