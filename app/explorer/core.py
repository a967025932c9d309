"""What the explorer's pages compute, without Streamlit.

* **Knob forms.** :func:`section_knobs` describes every field of a configuration dataclass
  (``sim.params``, each mechanism's ``[kernel.NAME]`` dataclass, each workload's) as a
  :class:`Knob`: its dotted key, the kind of widget that edits it, its choices, bounds, unit,
  documentation and source. A knob added to a dataclass in ``models/`` therefore appears in the
  app with no change here. :func:`to_widget` / :func:`from_widget` convert between scenario
  values and widget values.
* **Scenarios.** A page starts from a bundled scenario mapping (plus a story's fitted values or
  a profile's calibrated costs), applies the changed knobs as dotted overrides and validates
  with :func:`sim.scenario.validate`, so every error is the project's one-line ``ConfigError``.
  :func:`scenario_toml` writes the complete scenario (``sim.scenario.canonical``) so that
  ``rcusim run FILE`` reproduces exactly what the page showed.
* **Runs.** :func:`run_toml` runs a scenario given as TOML text (the cache key: scenario and
  seed) and returns the result as JSON-able data plus, optionally, the Chrome trace.
* **Tables and plots.** Metrics, series, latency percentiles and per-CPU figures as pandas
  frames; a timeline (CPUs, kernel threads, grace periods, lock tracks...) cut from the trace's
  events for a short window.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import fnmatch
import hashlib
import io
import json
import math
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import tomli_w

from sim import scenario as sc
from sim.config import set_path, to_mapping
from sim.errors import ConfigError
from sim.params import Costs, KernelConfig, MachineConfig
from sim.trace import CPU_PID, MODEL_PID, Tracer
from sim.units import MS, US, DurationError, parse_duration

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = ROOT / "scenarios"
FITS_DIR = ROOT / "calibration" / "fits"
DOCS_DIR = ROOT / "docs"

TRACE_LIMIT = 400_000  # events kept per run (the rest are counted as dropped in the file)
LIST_CHOICE = "list of CPUs"


def catalog() -> sc.Catalog:
    import models

    return models.catalog()


# ---------------------------------------------------------------------------------- knobs
@dataclass(frozen=True)
class Knob:
    """One configuration field, described for a form.

    ``kind``: ``bool``, ``choice`` (a Literal), ``choice_or_list`` (a Literal or a list, such as
    ``kernel.rcu.nocb``), ``int``, ``float``, ``duration`` (integer ns, written "2 us"),
    ``optional`` (may be left empty for the default, e.g. ``jiffies_till_first_fqs``),
    ``list`` (comma-separated values), ``table`` (a list of lists, such as the measured
    ``costs.tick_busy``: written as TOML, ``[[a, b], [c, d]]``; the pages show it read-only,
    :func:`read_only`) or ``text``.
    """

    key: str
    name: str
    kind: str
    doc: str
    source: str = ""
    choices: tuple[Any, ...] = ()
    unit: str | None = None
    lo: float | None = None
    hi: float | None = None

    @property
    def help(self) -> str:
        text = self.doc
        if self.source:
            text += f"  \nsource: {self.source}"
        return text


def _strip_none(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        optional = len(args) < len(get_args(tp))
        if len(args) == 1:
            return args[0], optional
        return typing.Union[tuple(args)], optional  # noqa: UP007 - rebuilt from parts
    return tp, False


def _knob_for(key: str, tp: Any, meta: Mapping[str, Any]) -> Knob:
    base: dict[str, Any] = {
        "key": key,
        "name": key.rsplit(".", 1)[-1],
        "doc": str(meta.get("doc", "")),
        "source": str(meta.get("source", "")),
        "unit": meta.get("unit"),
        "lo": meta.get("min"),
        "hi": meta.get("max"),
    }
    inner, optional = _strip_none(tp)
    origin = get_origin(inner)
    if origin in (typing.Union, types.UnionType):
        args = get_args(inner)
        lits = [a for a in args if get_origin(a) is Literal]
        lists = [a for a in args if get_origin(a) is tuple]
        if lits and lists:
            return Knob(kind="choice_or_list", choices=tuple(x for lit in lits for x in get_args(lit)), **base)
        return Knob(kind="text", **base)
    if optional:
        return Knob(kind="optional", **base)
    if origin is Literal:
        return Knob(kind="choice", choices=get_args(inner), **base)
    if origin is tuple:
        items = [a for a in get_args(inner) if a is not Ellipsis]
        if any(get_origin(_strip_none(a)[0]) in (tuple, list) for a in items):
            return Knob(kind="table", **base)
        return Knob(kind="list", **base)
    if meta.get("unit") == "ns":
        return Knob(kind="duration", **base)
    if inner is bool:
        return Knob(kind="bool", **base)
    if inner is int:
        return Knob(kind="int", **base)
    if inner is float:
        return Knob(kind="float", **base)
    return Knob(kind="text", **base)


def section_knobs(cls: type, prefix: str) -> list[Knob]:
    """Every init field of the configuration dataclass ``cls`` as a :class:`Knob` keyed
    ``prefix.field`` (nested dataclasses are flattened)."""
    hints = typing.get_type_hints(cls)
    out: list[Knob] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        key = f"{prefix}.{f.name}"
        if dataclasses.is_dataclass(tp):
            out.extend(section_knobs(typing.cast(type, tp), key))
            continue
        out.append(_knob_for(key, tp, f.metadata))
    return out


@dataclass(frozen=True)
class Section:
    """A group of knobs shown together (``[machine]``, ``[kernel.rcu]``, ``[workload]``...)."""

    key: str
    title: str
    doc: str
    knobs: tuple[Knob, ...]


def _first_line(text: str) -> str:
    """The first paragraph of a docstring, on one line, with reST ``code`` as Markdown `code`."""
    para: list[str] = []
    for line in (text or "").strip().splitlines():
        if not line.strip():
            if para:
                break
            continue
        para.append(line.strip())
    return " ".join(para).replace("``", "`")


def scenario_sections(scn: sc.Scenario, cat: sc.Catalog | None = None) -> list[Section]:
    """The knob sections of ``scn``: scenario, machine, kernel, each mechanism, workload, costs."""
    cat = cat if cat is not None else catalog()
    out = [
        Section(
            "scenario",
            "run",
            "seed and stop condition",
            tuple(k for k in section_knobs(sc.ScenarioMeta, "scenario") if k.name in ("seed", "duration", "max_time")),
        ),
        Section("machine", "machine", _first_line(MachineConfig.__doc__ or ""), tuple(section_knobs(MachineConfig, "machine"))),
        Section(
            "kernel", "kernel (scheduler)", _first_line(KernelConfig.__doc__ or ""), tuple(section_knobs(KernelConfig, "kernel"))
        ),
    ]
    for name, mech in cat.mechanisms.items():
        out.append(
            Section(
                f"kernel.{name}",
                f"kernel.{name}",
                _first_line(mech.doc or mech.config.__doc__ or ""),
                tuple(section_knobs(mech.config, f"kernel.{name}")),
            )
        )
    spec = cat.workloads[scn.workload_kind]
    out.append(
        Section(
            "workload",
            f"workload: {scn.workload_kind}",
            _first_line(spec.doc or spec.config.__doc__ or ""),
            tuple(section_knobs(spec.config, "workload")),
        )
    )
    out.append(Section("costs", "costs", _first_line(Costs.__doc__ or ""), tuple(section_knobs(Costs, "costs"))))
    return out


def all_knobs(scn: sc.Scenario, cat: sc.Catalog | None = None) -> dict[str, Knob]:
    return {k.key: k for s in scenario_sections(scn, cat) for k in s.knobs}


def fmt_duration(ns: int) -> str:
    """An exact, readable duration string: ``"2 us"``, ``"1.5 ms"``, ``"3536 ns"``; reading it
    back with :func:`sim.units.parse_duration` gives ``ns`` again."""
    for unit, name in ((1_000_000_000, "s"), (MS, "ms"), (US, "us")):
        if abs(ns) >= unit:
            text = f"{ns / unit:.9g} {name}"
            try:
                if parse_duration(text) == ns:
                    return text
            except DurationError:
                pass
    return f"{ns} ns"


def get_path(mapping: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def duration_text(v: Any) -> str:
    """A duration as a widget shows it: ns (an int, or a string with a unit such as a page's
    quick size ``"300 ms"``) as :func:`fmt_duration` writes it. A value that is no duration is
    shown as it is, so that the scenario's validation names it when the page runs it."""
    try:
        return fmt_duration(parse_duration(v))
    except DurationError:
        return "" if v is None else str(v)


def _fmt_item(v: Any, duration: bool) -> str:
    if duration and not isinstance(v, bool) and isinstance(v, (int, float, str)):
        return duration_text(v)
    return str(v)


LIST_EDIT_MAX = 64  # a longer list of costs (a profile's measured other_gaps) is shown read-only


def read_only(knob: Knob, value: Any) -> str | None:
    """Why the pages show ``value`` of ``knob`` read-only (None: it is edited in a widget).
    A table (``costs.tick_busy``, one measured row per jiffy) or a long measured list does not
    fit a text field; the page carries it through unchanged and says what it holds."""
    if knob.kind == "table":
        rows = list(value or ())
        if not rows:
            return "empty table (not measured)"
        widths = sorted({len(r) for r in rows if isinstance(r, (list, tuple))})
        per = f"{widths[0]}" if len(widths) == 1 else f"{widths[0]}-{widths[-1]}"
        return f"measured table, {len(rows):,} rows of {per} values"
    long = isinstance(value, (list, tuple)) and len(value) > LIST_EDIT_MAX
    if knob.kind == "list" and knob.key.startswith("costs.") and long:
        return f"measured list, {len(value):,} values"
    return None


def to_widget(knob: Knob, value: Any) -> Any:
    """The widget value showing ``value`` (a canonical scenario value, or an override such as
    ``"300 ms"``) for ``knob``."""
    dur = knob.unit == "ns"
    if knob.kind == "bool":
        return bool(value)
    if knob.kind in ("int",):
        return int(value)
    if knob.kind == "float":
        return float(value)
    if knob.kind == "choice":
        return value
    if knob.kind == "choice_or_list":
        return value if not isinstance(value, (list, tuple)) else ", ".join(_fmt_item(v, dur) for v in value)
    if knob.kind == "duration":
        return duration_text(value)
    if knob.kind == "table":
        from calibration.params import toml_value

        return toml_value(list(value or ()))
    if knob.kind == "list":
        return ", ".join(_fmt_item(v, dur) for v in (value or []))
    if knob.kind == "optional":
        return "" if value is None else _fmt_item(value, dur)
    return "" if value is None else str(value)


def value_text(knob: Knob | None, value: Any) -> str:
    """A scenario value as a caption writes it: as its widget shows it ("15.813 us" for a
    duration in ns, "300 ms" for a quick size), with its unit when it has another."""
    if knob is None:
        return str(value)
    fixed = read_only(knob, value)
    if fixed is not None:
        return fixed
    if knob.kind in ("duration", "list", "optional", "choice_or_list", "table") or knob.unit == "ns":
        return str(to_widget(knob, value))
    return f"{value} {knob.unit}" if knob.unit else str(value)


def parse_list(text: str) -> list[Any]:
    """``"1, 2, 3"`` or ``"[1, 2]"`` -> ``[1, 2, 3]``; items are TOML values or bare words."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1]
    return [sc.parse_value(x.strip()) for x in t.split(",") if x.strip()]


def from_widget(knob: Knob, value: Any) -> Any:
    """The scenario value a widget holds (``None``: leave the key out, i.e. the default).
    Values are passed on as typed; the scenario's validation names any problem."""
    if knob.kind == "choice_or_list":
        if isinstance(value, str) and value in knob.choices:
            return value
        return parse_list(str(value))
    if knob.kind == "table":
        # the whole text is one TOML value: splitting it on commas would cut the rows apart
        text = str(value).strip()
        return sc.parse_value(text) if text else []
    if knob.kind == "list":
        return parse_list(str(value))
    if knob.kind == "optional":
        text = str(value).strip()
        if not text:
            return None
        v = sc.parse_value(text)
        return v
    if knob.kind == "int":
        return int(value)
    if knob.kind == "duration":
        text = str(value).strip()
        v = sc.parse_value(text)
        return v if isinstance(v, int) and not isinstance(v, bool) else text
    return value


def _same(knob: Knob, new: Any, old: Any) -> bool:
    if knob.unit == "ns":

        def norm(v: Any) -> Any:
            if isinstance(v, (list, tuple)):  # a list, or a table's rows
                return [norm(x) for x in v]
            try:
                return parse_duration(v) if v is not None else None
            except DurationError:
                return ("unreadable", v)

        return norm(new) == norm(old)
    if isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
        return _lists(new) == _lists(old)
    return bool(new == old and type(new) is type(old)) or (
        isinstance(new, (int, float)) and isinstance(old, (int, float)) and not isinstance(new, bool) and new == old
    )


def _lists(v: Any) -> Any:
    """Nested tuples as nested lists (a table read back from TOML is lists, the canonical one tuples)."""
    return [_lists(x) for x in v] if isinstance(v, (list, tuple)) else v


def same_value(knob: Knob, new: Any, old: Any) -> bool:
    """Whether two scenario values of ``knob`` are the same setting ("2 us" and 2000 are)."""
    if new is None or old is None:
        return new is old
    return _same(knob, new, old)


def changed(knobs: Mapping[str, Knob], values: Mapping[str, Any], canon: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted overrides among ``values`` (key -> scenario value) that differ from the
    canonical scenario ``canon``."""
    out: dict[str, Any] = {}
    for key, new in values.items():
        old = get_path(canon, key)
        knob = knobs[key]
        if new is None:
            if old is not None:
                out[key] = None
            continue
        if not _same(knob, new, old):
            out[key] = new
    return out


def apply(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of the scenario mapping ``base`` with dotted ``overrides`` set (a ``None``
    value removes the key, restoring the default)."""
    data = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if value is None:
            parent = get_path(data, key.rsplit(".", 1)[0]) if "." in key else data
            if isinstance(parent, dict):
                parent.pop(key.rsplit(".", 1)[-1], None)
            continue
        set_path(data, key, value)
    return data


# ---------------------------------------------------------------------------------- scenarios
def bundled_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def scenario_path(name: str) -> Path:
    p = SCENARIO_DIR / f"{name}.toml"
    if not p.is_file():
        raise ConfigError(name, "no such bundled scenario", f"bundled: {', '.join(bundled_scenarios())}")
    return p


def load_bundled(name: str) -> dict[str, Any]:
    return sc.load(scenario_path(name))


def scenario_kind(name: str) -> str:
    try:
        wl = load_bundled(name).get("workload", {})
    except ConfigError:
        return ""
    return str(wl.get("kind", "")) if isinstance(wl, Mapping) else ""


def resolve_fitted(canon: Mapping[str, Any], names: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Fitted values named by their bare field name (a fit file's ``[fitted]`` table, e.g.
    ``mount_cost``) as dotted overrides: each name must match exactly one key of the canonical
    scenario. Returns (overrides, names that matched none or several keys)."""
    keys: dict[str, list[str]] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                walk(v, key + ".")
            else:
                keys.setdefault(k, []).append(key)

    walk(canon, "")
    out: dict[str, Any] = {}
    skipped: list[str] = []
    for name, value in names.items():
        if "." in name and get_path(canon, name) is not None:
            out[name] = value
            continue
        found = keys.get(name, [])
        if len(found) == 1:
            out[found[0]] = value
        else:
            skipped.append(name)
    return out, skipped


def story_fit(story: str) -> dict[str, Any]:
    """The ``[fitted]`` table of ``calibration/fits/STORY.toml`` (empty when there is none)."""
    p = FITS_DIR / f"{story}.toml"
    if not p.is_file():
        return {}
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    fitted = data.get("fitted", {})
    return dict(fitted) if isinstance(fitted, Mapping) else {}


def validate(data: Mapping[str, Any], cat: sc.Catalog | None = None) -> sc.Scenario:
    return sc.validate(data, cat if cat is not None else catalog())


def canonical(scn: sc.Scenario) -> dict[str, Any]:
    return sc.canonical(scn)


def scenario_toml(scn: sc.Scenario, header: str = "") -> str:
    """The complete scenario as TOML (every default written out): ``rcusim run FILE`` runs
    exactly this."""
    lines = [f"# {x}" for x in header.splitlines()] if header else []
    lines.append("# the complete scenario, every default written out: rcusim run THIS_FILE reproduces it")
    return "\n".join(lines) + "\n" + tomli_w.dumps(sc.canonical(scn))


def scenario_key(scn: sc.Scenario) -> str:
    """The cache key of a run: the canonical scenario (its seed included) as TOML."""
    return tomli_w.dumps(sc.canonical(scn))


# ---------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class RunOutput:
    """A run as the app keeps it: the result as JSON-able data and the trace, if recorded."""

    result: dict[str, Any]
    trace: bytes | None = None
    trace_events: int = 0
    trace_dropped: int = 0


def run_toml(
    toml_text: str, trace: bool = True, trace_limit: int = TRACE_LIMIT, progress: Callable[[float], None] | None = None
) -> RunOutput:
    """Run the scenario written as ``toml_text`` (its seed is in it)."""
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("scenario", f"not valid TOML: {exc}", "fix the syntax at the position shown") from None
    cat = catalog()
    scn = sc.validate(data, cat)
    tracer = Tracer(limit=trace_limit) if trace else None
    res = sc.run(scn, cat, tracer=tracer, progress=progress)
    if tracer is None:
        return RunOutput(res.to_json())
    buf = io.StringIO()
    tracer.write(buf)
    return RunOutput(res.to_json(), buf.getvalue().encode("utf-8"), len(tracer), tracer.dropped)


def run_figure_png(result: Mapping[str, Any]) -> bytes:
    """The run's figure as ``rcusim run --plot FILE.png`` draws it (app/plots.py)."""
    from app.plots import run_figure, save

    buf = io.BytesIO()
    save(run_figure(result), buf, fmt="png")
    return buf.getvalue()


# ---------------------------------------------------------------------------------- tables
def _num(v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    return math.nan


def pick_metrics(metrics: Mapping[str, Any], patterns: Sequence[str]) -> list[str]:
    """Metric names matching ``patterns`` (fnmatch), in pattern order then metric order."""
    out: list[str] = []
    for pat in patterns:
        for name in metrics:
            if fnmatch.fnmatchcase(name, pat) and name not in out:
                out.append(name)
    return out


def metrics_rows(runs: Sequence[tuple[str, Mapping[str, Any]]], names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per run: ``run`` label, seed and the metrics (``names`` or all)."""
    rows = []
    for label, res in runs:
        metrics = res.get("metrics", {})
        row: dict[str, Any] = {"run": label, "seed": res.get("seed")}
        for k in names if names is not None else metrics:
            row[k] = _num(metrics.get(k))
        rows.append(row)
    return rows


def flat_figures(res: Mapping[str, Any]) -> dict[str, float]:
    """A result's figures as one flat mapping (metrics, then latency statistics)."""
    out = {k: _num(v) for k, v in res.get("metrics", {}).items()}
    for name, s in res.get("latency", {}).items():
        if not s or not s.get("count"):
            continue
        for stat in ("mean", "p50", "p90", "p99", "max"):
            if s.get(stat) is not None:
                out[f"{name}.{stat}"] = _num(s[stat])
    return out


def results_csv(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Every run's figures as CSV: one row per run, columns run, scenario, seed, then every
    metric and latency statistic any run reports (empty where a run has none)."""
    flats = [(label, res, flat_figures(res)) for label, res in runs]
    cols: list[str] = []
    for _, _, f in flats:
        for k in f:
            if k not in cols:
                cols.append(k)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", "scenario", "seed", *cols])
    for label, res, f in flats:
        w.writerow([label, res.get("scenario", ""), res.get("seed", ""), *(_csv_cell(f.get(c)) for c in cols)])
    return buf.getvalue()


def _csv_cell(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return ""
    return repr(v)


def series_rows(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every run's series in long form: run, series, x name, x, y name, y. A series is a list
    of records; its first field is the x axis and every other numeric field a y."""
    rows = []
    for label, res in runs:
        for sname, records in (res.get("series") or {}).items():
            if not isinstance(records, list) or not records or not isinstance(records[0], Mapping):
                continue
            fields = list(records[0])
            xname = fields[0]
            for rec in records:
                for yname in fields[1:]:
                    y = rec.get(yname)
                    if isinstance(y, (int, float)) and not isinstance(y, bool):
                        rows.append(
                            {
                                "run": label,
                                "series": sname,
                                "x_name": xname,
                                "x": _num(rec.get(xname)),
                                "y_name": yname,
                                "y": float(y),
                            }
                        )
    return rows


def series_csv(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", "series", "x_name", "x", "y_name", "y"])
    for r in series_rows(runs):
        w.writerow([r["run"], r["series"], r["x_name"], _csv_cell(r["x"]), r["y_name"], _csv_cell(r["y"])])
    return buf.getvalue()


LATENCY_STATS = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("max", 100.0))


def latency_rows(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Latency percentiles (µs) of every run: run, latency, percentile, value_us, count."""
    rows = []
    for label, res in runs:
        for name, s in (res.get("latency") or {}).items():
            if not s or not s.get("count"):
                continue
            for stat, q in LATENCY_STATS:
                v = s.get(stat)
                if v is None:
                    continue
                rows.append(
                    {"run": label, "latency": name, "percentile": q, "stat": stat, "value_us": v / 1000.0, "count": s["count"]}
                )
    return rows


def cpu_rows(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-CPU shares of time (%) of one run, by state."""
    total = res.get("sim_ns") or 1
    out = []
    for c in res.get("cpus", []):
        row: dict[str, Any] = {"cpu": c.get("cpu")}
        for k in ("user_ns", "kernel_ns", "irq_ns", "softirq_ns", "switch_ns", "idle_exit_ns", "idle_ns"):
            if k in c:
                row[k[:-3]] = 100.0 * c[k] / total
        row["switches"] = c.get("switches")
        row["ipis"] = c.get("ipis")
        out.append(row)
    return out


def run_label(overrides: Mapping[str, Any], focus: Sequence[str], canon: Mapping[str, Any]) -> str:
    """A short label for a run: the focus knobs' values, then the other changed keys."""
    parts = []
    for key in focus[:3]:
        v = get_path(canon, key)
        if v is not None:
            parts.append(f"{key.rsplit('.', 1)[-1]}={_short(v)}")
    for key, v in overrides.items():
        if key not in focus[:3] and not key.startswith("scenario."):
            parts.append(f"{key.rsplit('.', 1)[-1]}={_short(v)}")
    seed = get_path(canon, "scenario.seed")
    if seed is not None:
        parts.append(f"seed={seed}")
    return " ".join(parts) or "as bundled"


def _short(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(str(x) for x in v) + "]"
    return str(v)


# ---------------------------------------------------------------------------------- trace
KTHREAD_PATTERNS = ("rcu_*", "rcuo*", "ksoftirqd/*", "softirq-*", "kworker*", "migration/*", "busy/*")


def parse_trace(data: bytes | str) -> dict[str, Any]:
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ConfigError("trace", "is not a Chrome trace-event document", "expected an object with traceEvents")
    return doc


@dataclass(frozen=True)
class Track:
    pid: int
    tid: int
    name: str
    sort: int


def trace_tracks(doc: Mapping[str, Any]) -> list[Track]:
    names: dict[tuple[int, int], str] = {}
    sorts: dict[tuple[int, int], int] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "M":
            continue
        key = (e.get("pid", 0), e.get("tid", 0))
        if e.get("name") == "thread_name":
            names[key] = str(e["args"]["name"])
        elif e.get("name") == "thread_sort_index":
            sorts[key] = int(e["args"]["sort_index"])
    return sorted((Track(p, t, n, sorts.get((p, t), t)) for (p, t), n in names.items()), key=lambda tr: (tr.pid, tr.sort, tr.tid))


def task_names(doc: Mapping[str, Any]) -> list[str]:
    """Names of the tasks that ran on CPUs (user and kernel spans), in order of first run."""
    seen: dict[str, None] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("pid") == CPU_PID and e.get("cat") in ("user", "kernel"):
            seen.setdefault(str(e["name"]), None)
    return list(seen)


def kthread_names(doc: Mapping[str, Any]) -> list[str]:
    """Tasks whose names are kernel threads (``KTHREAD_PATTERNS``: rcu_sched, rcuog/0, rcuoc/1,
    ksoftirqd/0, softirq-timer/2, kworker...)."""
    return [n for n in task_names(doc) if any(fnmatch.fnmatchcase(n, p) for p in KTHREAD_PATTERNS)]


def trace_extent_us(doc: Mapping[str, Any]) -> tuple[float, float]:
    lo, hi = math.inf, 0.0
    for e in doc["traceEvents"]:
        ts = e.get("ts")
        if ts is None or e.get("ph") == "M":
            continue
        lo = min(lo, ts)
        hi = max(hi, ts + e.get("dur", 0.0))
    return (0.0, 0.0) if lo == math.inf else (lo, hi)


def default_window_us(doc: Mapping[str, Any], length_us: float = 20_000.0) -> tuple[float, float]:
    """A short window worth looking at: from the start of the first model span (a grace period,
    a lock hold...) or else of the first CPU span, ``length_us`` long."""
    lo, hi = trace_extent_us(doc)
    first_model = min((e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("pid") == MODEL_PID), default=None)
    start = first_model if first_model is not None else lo
    start = max(lo, start - length_us * 0.1)
    return start, min(hi, start + length_us) if hi > start else start + length_us


LOCK_TRACK_PREFIX = "lock "  # models/locks names a lock's ownership track "lock <lock name>"
LOCK_KINDS = {"lock": "lock owner", "lock_pending": "lock pending owner"}


def lock_tracks(doc: Mapping[str, Any]) -> list[str]:
    """The lock-ownership tracks of a trace (one per lock that was taken while tracing)."""
    return [tr.name for tr in trace_tracks(doc) if tr.pid == MODEL_PID and tr.name.startswith(LOCK_TRACK_PREFIX)]


def busiest_lock_tracks(doc: Mapping[str, Any], t0_us: float, t1_us: float, n: int = 6) -> list[str]:
    """The ``n`` lock tracks most worth showing in the window [t0, t1]: most time reserved for
    a pending owner first (the strict-handoff convoy), then most time owned."""
    label = {(tr.pid, tr.tid): tr.name for tr in trace_tracks(doc)}
    score: dict[str, list[float]] = {}
    for e in doc["traceEvents"]:
        cat = e.get("cat")
        if e.get("ph") != "X" or e.get("pid") != MODEL_PID or cat not in LOCK_KINDS:
            continue
        ts = e["ts"]
        end = ts + e.get("dur", 0.0)
        if end < t0_us or ts > t1_us:
            continue
        row = label.get((MODEL_PID, e.get("tid", 0)), "")
        s = score.setdefault(row, [0.0, 0.0])
        s[0 if cat == "lock_pending" else 1] += min(end, t1_us) - max(ts, t0_us)
    return [r for r, _ in sorted(score.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:n]]


def timeline_rows(
    doc: Mapping[str, Any],
    t0_us: float,
    t1_us: float,
    tasks: Iterable[str] = (),
    max_spans: int = 6000,
    locks: Iterable[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """The spans and instants of the window [t0, t1] (ms on the axis), one row per track:
    every CPU, then each task of ``tasks`` (its spans gathered from all CPUs, e.g. the rcuo
    kthreads), then every model track (grace periods, timers, locks...). A hackbench run has
    thousands of locks: with ``locks`` given, only those lock tracks are kept (kind "lock
    owner" from acquisition to release, "lock pending owner" from a handoff until the woken
    owner runs). Returns (spans, instants, truncated)."""
    label = {(tr.pid, tr.tid): tr.name for tr in trace_tracks(doc)}
    follow = set(tasks)
    keep_locks = None if locks is None else set(locks)
    spans: list[dict[str, Any]] = []
    instants: list[dict[str, Any]] = []
    truncated = False
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        if ph not in ("X", "i"):
            continue
        ts = e["ts"]
        end = ts + e.get("dur", 0.0)
        if end < t0_us or ts > t1_us:
            continue
        row = label.get((e.get("pid", 0), e.get("tid", 0)), f"track {e.get('tid')}")
        if keep_locks is not None and row.startswith(LOCK_TRACK_PREFIX) and row not in keep_locks:
            continue
        if ph == "i":
            if len(instants) < max_spans:
                instants.append({"row": row, "t_ms": ts / 1000.0, "name": str(e.get("name", ""))})
            continue
        cat = str(e.get("cat", ""))
        kind = (LOCK_KINDS.get(cat, "model")) if e.get("pid") == MODEL_PID else cat
        rec = {
            "row": row,
            "start_ms": max(ts, t0_us) / 1000.0,
            "end_ms": min(end, t1_us) / 1000.0,
            "name": str(e.get("name", "")),
            "kind": kind,
            "cpu": row if e.get("pid") == CPU_PID else "",
            "dur_us": e.get("dur", 0.0),
        }
        if len(spans) >= max_spans:
            truncated = True
            break
        spans.append(rec)
        if e.get("pid") == CPU_PID and cat in ("user", "kernel") and rec["name"] in follow:
            spans.append({**rec, "row": f"task {rec['name']}"})
    return spans, instants, truncated


def row_order(rows: Iterable[str]) -> list[str]:
    """Timeline rows top to bottom: CPUs by number, followed tasks, then model tracks."""

    def key(r: str) -> tuple[int, int, str]:
        if r.startswith("CPU "):
            m = re.match(r"CPU (\d+)", r)
            return (0, int(m.group(1)) if m else 0, r)
        if r.startswith("task "):
            return (1, 0, r)
        return (2, 0, r)

    return sorted(set(rows), key=key)


def model_span_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Durations (ms) of every span on a model track (grace periods, lock holds...): the
    distributions the timeline's tracks summarise. Lock spans are grouped by lock class and
    kind ("lock owner unix_state", "lock pending owner slab"), not by lock."""
    label = {(tr.pid, tr.tid): tr.name for tr in trace_tracks(doc)}
    rows = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid") != MODEL_PID:
            continue
        kind = LOCK_KINDS.get(str(e.get("cat", "")))
        if kind is not None:
            track = f"{kind} {(e.get('args') or {}).get('class', '?')}"
        else:
            track = label.get((e.get("pid", 0), e.get("tid", 0)), "?")
        rows.append({"track": track, "dur_ms": e.get("dur", 0.0) / 1000.0})
    return rows


def model_span_histogram(doc: Mapping[str, Any], bins: int = 40) -> list[dict[str, Any]]:
    """:func:`model_span_rows` binned here (a hackbench trace has hundreds of thousands of
    lock spans, too many to send to the browser): per track, the count of spans whose
    duration falls in each of ``bins`` equal bins over the whole range."""
    rows = model_span_rows(doc)
    if not rows:
        return []
    hi = max(r["dur_ms"] for r in rows)
    width = hi / bins if hi > 0 else 1.0
    counts: dict[tuple[str, int], int] = {}
    for r in rows:
        b = min(bins - 1, int(r["dur_ms"] / width))
        counts[(r["track"], b)] = counts.get((r["track"], b), 0) + 1
    return [{"track": tr, "from_ms": b * width, "to_ms": (b + 1) * width, "spans": n} for (tr, b), n in sorted(counts.items())]


# ---------------------------------------------------------------------------------- profiles
@dataclass(frozen=True)
class MachineProfile:
    """What a profile gives a scenario: calibrated costs, mechanism parameters and the
    measured machine's CPU count and HZ."""

    label: str
    costs: dict[str, Any]
    kernel: dict[str, Any]
    cpus: int | None
    hz: int | None
    note: str = ""


# ---------------------------------------------------------------------------------- this machine
@dataclass(frozen=True)
class MachineReport:
    """A measured machine as the "This machine" page shows it: the profile, its calibration
    report (the ``PARAMS.fit.json`` of ``rcusim calibrate``) and the parameters."""

    label: str
    profile: Any  # calibration.profile.Profile
    report: dict[str, Any]
    params: Any  # calibration.params.Params
    note: str = ""


def bundled_report() -> MachineReport:
    """The bundled profile with the calibration and report ``rcusim calibrate`` wrote beside it."""
    from calibration.params import load_params
    from calibration.profile import DEFAULT_PARAMS, DEFAULT_PROFILE, load_profile

    prof = load_profile(DEFAULT_PROFILE)
    report_path = DEFAULT_PARAMS.with_name(DEFAULT_PARAMS.stem + ".fit.json")
    report = json.loads(report_path.read_text())
    return MachineReport(
        f"bundled: {DEFAULT_PROFILE.name}",
        prof,
        report,
        load_params(DEFAULT_PARAMS),
        f"calibrated by rcusim calibrate ({DEFAULT_PARAMS.name}, {report.get('seeds')} seeds, "
        f"{report.get('bootstrap')} bootstrap replicates)",
    )


def report_from_json(data: bytes, name: str, progress: Callable[[str, float], None] | None = None) -> MachineReport:
    """A collector profile uploaded as JSON: validated (``calibration.profile``), then
    calibrated now (``calibration.fit.calibrate``, one seed, no bootstrap intervals)."""
    from calibration.fit import calibrate
    from calibration.params import params_from_calibration
    from calibration.profile import validate_profile

    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise ConfigError(name, "is empty", "upload a JSON profile written by rcusim collect")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            name, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "upload the file rcusim collect wrote"
        ) from None
    prof = validate_profile(raw, name)
    cal = calibrate(prof, seeds=1, bootstrap=0, progress=progress)
    report = cal.to_json()
    return MachineReport(f"uploaded: {name}", prof, report, params_from_calibration(cal, name), uploaded_note(report))


def uploaded_note(report: Mapping[str, Any]) -> str:
    """What a calibration made on the page (one seed, no bootstrap) gives: intervals only where
    an estimate has one without the bootstrap (rates counted directly: Poisson intervals)."""
    params = report.get("parameters", [])
    with_ci = [e["param"] for e in params if e.get("ci95")]
    if not with_ci:
        ci = "no 95% intervals"
    elif len(with_ci) == len(params):
        ci = "every cost has its 95% interval"
    else:
        ci = (
            f"95% intervals only for the {len(with_ci)} rates counted directly ({', '.join(with_ci)}: Poisson "
            "intervals of their counts), none for the other costs"
        )
    return f"costs calibrated now (one seed, no bootstrap): {ci}; rcusim calibrate (seeds and bootstrap) gives the measured and fitted costs theirs"


def bundled_profile() -> MachineProfile:
    """The bundled profile of the development machine, with the parameters ``rcusim
    calibrate`` fitted to it (``calibration/profiles/default-params.toml``)."""
    return profile_of(bundled_report())


def profile_from_json(data: bytes, name: str, progress: Callable[[str, float], None] | None = None) -> MachineProfile:
    """A collector profile uploaded as JSON, calibrated now (:func:`report_from_json`)."""
    return profile_of(report_from_json(data, name, progress))


def profile_of(rep: MachineReport) -> MachineProfile:
    """What a measured machine gives a scenario: its calibrated costs and kernel parameters, its
    CPU count and HZ."""
    p = rep.profile
    return MachineProfile(
        f"{rep.label} ({p.machine.cpu_model or 'unknown CPU'}, {p.cpus} CPUs, HZ {p.hz})",
        dict(rep.params.costs),
        {k: dict(v) for k, v in rep.params.kernel.items()},
        p.cpus,
        p.hz,
        rep.note,
    )


def machine_facts(rep: MachineReport) -> list[dict[str, Any]]:
    """What the profile says the machine is, as table rows."""
    p = rep.profile
    m = p.machine
    facts = {
        "host": p.uname.nodename,
        "kernel": m.kernel_release,
        "CPU": m.cpu_model or "unknown",
        "CPUs": p.cpus,
        "HZ": p.hz,
        "preemption": p.preempt,
        "virtual machine": {True: "yes", False: "no"}.get(m.hypervisor_flag, "unknown"),
        "timer wheel (model)": p.timer_wheel,
        "NO_HZ blocked-load kick (model)": "yes" if p.nohz_stats_kick else "no",
        "collected": f"{p.start_time} by {p.collector.name} {p.collector.version}",
        "other work on the CPUs": f"{100 * float(p.load.other_cpu_share or 0):.1f} %" if p.load is not None else "not recorded",
    }
    return [{"fact": k, "value": str(v)} for k, v in facts.items()]


def _cost_text(name: str, v: float) -> str:
    """A calibrated cost as its params file has it: whole ns, a rate per second to two
    decimals, jitter_cv to three."""
    from calibration.params import cost_unit

    unit = cost_unit(name)
    return f"{v:,.0f} ns" if unit == "ns" else f"{v:.2f} /s" if unit == "/s" else f"{v:.3f}"


def parameter_rows(rep: MachineReport) -> list[dict[str, Any]]:
    """The calibrated costs: value, 95 % interval, method and where it comes from."""
    rows = []
    for e in rep.report.get("parameters", []):
        ci = e.get("ci95")
        name = e["param"]
        rows.append(
            {
                "parameter": name,
                "value": _cost_text(name, e["value"]),
                "95% interval": f"{_cost_text(name, ci[0])} .. {_cost_text(name, ci[1])}" if ci else "-",
                "method": e["method"],
                "from": e["formula"],
            }
        )
    return rows


def outcome_rows(rep: MachineReport) -> list[dict[str, Any]]:
    """The microbenchmarks the fit matched (fitted) and those it predicts (check): measured and
    simulated medians (or means) and the error in %."""
    return [
        {
            "outcome": o["name"],
            "item": o["item"],
            "role": o["role"],
            "measured": o["measured_ns"],
            "simulated": o["simulated_ns"],
            "error %": 100 * (o["simulated_ns"] - o["measured_ns"]) / o["measured_ns"] if o["measured_ns"] else math.nan,
            "note": o.get("note", ""),
        }
        for o in rep.report.get("outcomes", [])
    ]


GP_ITEMS = {False: "membarrier_global", True: "membarrier_global_busy"}


def gp_distribution_rows(
    rep: MachineReport, busy: bool, calls: int = 300, seeds: int = 4, bin_ms: float = 0.25
) -> list[dict[str, Any]]:
    """The normal grace period's latency as the machine measured it (``membarrier_global``,
    ``membarrier_global_busy``) and as the calibrated model gives it (the calibration's replica,
    ``calibration.microbench.gp_latency_run``, its ``calls`` spread over ``seeds`` seeds: each
    seed puts the machine's other processes, ``Costs.idle_task_wakeups_per_s``, on a CPU of its
    own drawing, and that decides how often an idle call is slow): the share of calls per
    ``bin_ms`` bin, one row per (source, bin). Empty when the profile lacks the item."""
    from calibration.fit import make_costs
    from calibration.microbench import Target, gp_latency_run

    item = rep.profile.items.get(GP_ITEMS[busy])
    if item is None or item.status != "ok" or not item.samples:
        return []
    counts: dict[tuple[str, float], float] = {}

    def add(source: str, ms: float, n: float, total: float) -> None:
        key = (source, round(math.floor(ms / bin_ms) * bin_ms + bin_ms / 2, 6))
        counts[key] = counts.get(key, 0.0) + n / total

    for v in item.samples:
        add("measured", v / MS, 1.0, len(item.samples))
    costs, target = make_costs(rep.params.costs), Target.of(rep.profile)
    model = [
        r
        for seed in range(1, seeds + 1)
        for r in gp_latency_run(costs, target, busy=busy, calls=max(1, calls // seeds), seed=seed).series["latency"]
    ]
    total = sum(r["calls"] for r in model)
    for r in model:
        add("model", r["ms"], r["calls"], total)
    return [{"source": src, "ms": ms, "share": share} for (src, ms), share in sorted(counts.items())]


def composite_rows(rep: MachineReport, seeds: int, progress: Callable[[str, float], None] | None = None) -> list[dict[str, Any]]:
    """The held-back composites of the profile (never fitted), measured and predicted, as
    ``rcusim validate --profile`` gives them."""
    from calibration import composites

    rows = composites.profile_rows(rep.profile, rep.params, catalog(), seeds, progress)
    return [r.to_json() for r in rows]


def apply_profile(data: Mapping[str, Any], prof: MachineProfile | None, cpus: int | None, hz: int | None) -> dict[str, Any]:
    """``data`` with the profile's costs and mechanism parameters merged, and the CPU count and
    HZ set (hand-set values win over the profile's)."""
    out = copy.deepcopy(dict(data))
    if prof is not None:
        from calibration.params import Params, apply_params

        apply_params(out, Params(prof.label, dict(prof.costs), dict(prof.kernel)))
    if cpus is not None:
        set_path(out, "machine.cpus", int(cpus))
    if hz is not None:
        set_path(out, "kernel.hz", int(hz))
    return out


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------- A/B
def ab_effect_rows(comparison: Any) -> list[dict[str, Any]]:
    """The effects of a :class:`calibration.prescreen.Comparison` as table rows (effects and
    their interval in %)."""
    rows = []
    for e in comparison.effects:
        rows.append(
            {
                "metric": e.metric,
                "better": e.direction or "?",
                "A mean": e.base_mean,
                "B mean": e.patch_mean,
                "effect %": 100 * e.effect if math.isfinite(e.effect) else math.nan,
                "CI low %": 100 * e.ci_low if math.isfinite(e.ci_low) else math.nan,
                "CI high %": 100 * e.ci_high if math.isfinite(e.ci_high) else math.nan,
                "verdict": e.verdict,
                "worth a lab run": e.lab_run,
            }
        )
    return rows


def ab_run_rows(comparison: Any, metric: str) -> list[dict[str, Any]]:
    rows = []
    for arm, runs in (("A", comparison.base_runs), ("B", comparison.patch_runs)):
        for i, r in enumerate(runs):
            if metric in r:
                rows.append({"arm": arm, "replication": i, "seed": comparison.seeds[i], metric: r[metric]})
    return rows


def ab_runs_csv(comparison: Any) -> str:
    metrics: list[str] = []
    for r in comparison.base_runs + comparison.patch_runs:
        for k in r:
            if k not in metrics:
                metrics.append(k)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["arm", "replication", "seed", *metrics])
    for arm, runs in (("A", comparison.base_runs), ("B", comparison.patch_runs)):
        for i, r in enumerate(runs):
            w.writerow([arm, i, comparison.seeds[i], *(_csv_cell(r.get(m)) for m in metrics)])
    return buf.getvalue()


def effect_chart_rows(comparison: Any) -> tuple[list[dict[str, Any]], float | None, tuple[float, float]]:
    """The effects to draw on the "difference B vs A" chart, the limit (%) beyond which they are
    cut (None: every interval fits) and the axis domain. One huge effect (+55,000 %) would
    flatten every other bar, so the axis reaches at most about three times the typical (75th
    percentile) extent, rounded up to 1, 2 or 5 x 10^k; an effect beyond it is drawn at the
    edge, its row marked ``clipped`` ("+55,466 %" written beside it) and its true figures kept
    in the other columns."""
    rows = [r for r in ab_effect_rows(comparison) if math.isfinite(r["effect %"])]
    extents = sorted(max(abs(r["effect %"]), abs(_finite(r["CI low %"])), abs(_finite(r["CI high %"]))) for r in rows)
    limit = None
    if extents:
        typical = extents[int(0.75 * (len(extents) - 1))]
        bound = _nice_ceil(max(3.0 * typical, 10.0))
        limit = bound if extents[-1] > bound else None
    for r in rows:
        lim = limit if limit is not None else math.inf
        for col in ("effect %", "CI low %", "CI high %"):
            v = _finite(r[col], r["effect %"])
            r[f"{col} (drawn)"] = min(max(v, -lim), lim)
        beyond = abs(r["effect %"]) > lim
        r["clipped"] = f"{r['effect %']:+,.0f}% (off the axis)" if beyond else ""
    drawn = [r[c] for r in rows for c in ("effect % (drawn)", "CI low % (drawn)", "CI high % (drawn)")]
    lo, hi = min([0.0, *drawn]), max([0.0, *drawn])
    pad = 0.05 * (hi - lo) if hi > lo else 1.0
    domain = (lo - pad if limit is None or lo > -limit else lo, hi + pad if limit is None or hi < limit else hi)
    return rows, limit, domain


def validation_chart_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """Validation rows (``Row.to_json()``) as the error chart draws them: the error and its
    tolerance in %, whether the row is a miss, and the axis limit
    (:func:`app.plots.error_axis_limit`), beyond which an error is drawn at the edge with its
    value written beside it (``clipped``)."""
    from app.plots import error_axis_limit

    limit = error_axis_limit([100.0 * r["tolerance"] for r in rows if isinstance(r.get("tolerance"), (int, float))])
    out = []
    for r in rows:
        err = r.get("rel_error")
        if not isinstance(err, (int, float)) or not math.isfinite(err):
            continue
        e = 100.0 * err
        tol = r.get("tolerance")
        label = f"{r['metric']} ({r['config']})" if r.get("config") else str(r["metric"])
        out.append(
            {
                "row": label,
                "role": r.get("role", ""),
                "error %": e,
                "error % (drawn)": min(max(e, -limit), limit),
                "tolerance %": 100.0 * tol if isinstance(tol, (int, float)) else None,
                "minus tolerance %": -100.0 * tol if isinstance(tol, (int, float)) else None,
                "within": "yes" if r.get("ok") else "MISS",
                "clipped": f"{e:+,.0f}%" if abs(e) > limit else "",
            }
        )
    return out, limit


def _finite(v: float, default: float = 0.0) -> float:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else default


def _nice_ceil(x: float) -> float:
    """The smallest 1, 2 or 5 x 10^k that is at least ``x`` (> 0)."""
    k = math.floor(math.log10(x))
    for step in (1.0, 2.0, 5.0, 10.0):
        if step * 10.0**k >= x:
            return step * 10.0**k
    return 10.0 ** (k + 1)


def pct_text(frac: float) -> str:
    """A relative change (0.25 -> "+25.0%") short enough for a metric box: one decimal below
    1,000 %, none above."""
    if not math.isfinite(frac):
        return "-"
    v = 100 * frac
    return f"{v:+,.0f}%" if abs(v) >= 1000 else f"{v:+.1f}%"


ENTERED_ERROR = "entered on the page"  # ModelError.source of an error the user typed in


def error_words(err: Any) -> str:
    """What the error a verdict is judged against is: a validated error of the model, or a
    number the user entered (then it is not called validated)."""
    pct = f" ({100 * err.value:.0f}%)" if err.value is not None else ""
    if err.source == ENTERED_ERROR:
        return f"the model error you entered{pct}"
    return f"the model's validated error{pct}"


def _named(effects: Sequence[Any], n: int = 4) -> str:
    text = ", ".join(f"{e.metric} ({pct_text(e.effect)})" for e in effects[:n])
    return text + (f" and {len(effects) - n} more" if len(effects) > n else "")


def overall_verdict(comparison: Any) -> str:
    """One sentence over every metric, naming the metrics each judgement is about, so that it
    agrees with :func:`plain_verdict` of any one metric (``Comparison.verdict`` names three
    metrics but judges "worth a lab run" over all of them)."""
    conf = f"{100 * comparison.confidence:.0f}%"
    judged = [e for e in comparison.effects if e.verdict in ("improves", "regresses")]
    moved = [e for e in comparison.effects if e.verdict == "changes"]
    if not judged and not moved:
        return f"no detectable effect on any metric at {conf} confidence: not worth a lab run"
    counts = []
    for verdict, plural in (("improves", "improve"), ("regresses", "regress")):
        n = sum(e.verdict == verdict for e in judged)
        if n:
            counts.append(f"1 metric {verdict}" if n == 1 else f"{n} metrics {plural}")
    if moved:
        counts.append(f"{len(moved)} {'changes' if len(moved) == 1 else 'change'} with no better direction known")
    effects = judged + moved
    words = error_words(comparison.model_error)
    parts = [", ".join(counts) + f" at {conf} confidence"]
    worth = [e for e in effects if e.lab_run == "yes"]
    within = [e for e in effects if e.lab_run == "no"]
    unknown = [e for e in effects if e.lab_run == "unknown"]
    if worth:
        parts.append(f"beyond {words}, worth a lab run: {_named(worth)}")
    if within:
        parts.append(f"within {words}, not worth a lab run on this evidence: {_named(within)}")
    if unknown:
        parts.append(f"with no model error to judge against, a lab run would have to decide: {_named(unknown)}")
    return "; ".join(parts)


def plain_verdict(comparison: Any, metric: str) -> str:
    """One sentence for a student: what B does to ``metric`` compared with A."""
    e = next((x for x in comparison.effects if x.metric == metric), None)
    if e is None:
        return f"{metric} was not reported by both configurations."
    conf = f"{100 * comparison.confidence:.0f}%"
    if e.verdict == "not compared":
        return f"{metric}: not compared ({e.note})."
    span = f"between {100 * e.ci_low:+.1f}% and {100 * e.ci_high:+.1f}%"
    if e.verdict == "no detectable effect":
        return (
            f"Over {comparison.replications} paired runs, B changes {metric} by {100 * e.effect:+.1f}% on average, but the "
            f"{conf} interval ({span}) includes zero: no detectable difference."
        )
    word = {"improves": "better", "regresses": "worse", "changes": "different"}[e.verdict]
    words = error_words(comparison.model_error)
    lab = {
        "yes": f" The effect is larger than {words}: worth a lab run.",
        "no": f" It lies within {words}: not worth a lab run on this evidence.",
        "unknown": "",
    }[e.lab_run]
    return (
        f"B makes {metric} {word}: {100 * e.effect:+.1f}% on average over {comparison.replications} paired runs; "
        f"with {conf} confidence the change is {span}.{lab}"
    )


def to_plain(obj: Any) -> Any:
    """Frozen configuration objects as plain mappings (for display)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_mapping(obj)
    return obj
