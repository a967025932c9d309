"""Streamlit drawing for the explorer's pages: knob forms, cached runs with progress, results,
plots (altair, Streamlit's own charting dependency), the timeline and downloads.

Every user error (:class:`sim.errors.RcusimError`: a bad knob value, a corrupt profile, a
scenario that cannot finish) is shown with ``st.error`` as the project's one-line message; a
page never shows a traceback. Runs are cached with ``st.cache_data`` by (scenario, seed): the
key is the complete canonical scenario, whose seed is part of it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from sim.errors import RcusimError

from . import content, core

log = logging.getLogger("rcusim.explorer")

MAX_RUNS = 8  # runs kept per page (oldest dropped)
LOCK_CHOICES = 40  # lock tracks offered in the timeline: the busiest in its window
SAFE_INT = 2**53 - 1  # the browser's number widgets are doubles
BAR_PX = 30  # height per bar of a horizontal bar chart: room for every label


# ---------------------------------------------------------------------------------- errors
@contextlib.contextmanager
def guard(where: str = "") -> Iterator[None]:
    """Show a user error as one clear message; never a traceback on the page."""
    try:
        yield
    except RcusimError as exc:
        st.error(f"{where}{exc}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the page must stay usable; details go to the log
        log.exception("explorer: unexpected error")
        st.error(
            f"{where}rcusim failed unexpectedly: {type(exc).__name__}: {exc}. This is a bug; the server log has the details.",
            icon=":material/bug_report:",
        )


# ---------------------------------------------------------------------------------- knob widgets
def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:,.4f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _fmt_figure(v: Any) -> str:
    """A measured or simulated figure, the same way whichever it is (an int or a float): whole
    numbers from 100 up, four significant digits below."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.4g}"


def _init(key: str, value: Any) -> None:
    if key not in st.session_state:
        st.session_state[key] = value


def knob_widget(knob: core.Knob, current: Any, key: str) -> Any:
    """Draw the widget for ``knob`` showing ``current`` (the scenario's value) and return the
    scenario value it now holds."""
    label = knob.key
    help_text = knob.help or None
    kind = knob.kind
    fixed = core.read_only(knob, current)
    if fixed is not None:
        # a measured table (costs.tick_busy) does not fit a text field: it is carried through as it is
        st.caption(f"`{label}`: {fixed}, used as it is (edit it in the downloaded scenario TOML)", help=help_text)
        return current
    if kind == "bool":
        _init(key, bool(current))
        return st.checkbox(label, key=key, help=help_text)
    if kind == "choice":
        opts = list(knob.choices)
        _init(key, current if current in opts else opts[0])
        return st.selectbox(label, opts, key=key, help=help_text)
    if kind == "choice_or_list":
        opts = [*knob.choices, core.LIST_CHOICE]
        is_list = isinstance(current, (list, tuple))
        _init(key, core.LIST_CHOICE if is_list else (current if current in opts else opts[0]))
        _init(key + "|list", core.to_widget(knob, current) if is_list else "")
        mode = st.selectbox(label, opts, key=key, help=help_text)
        if mode != core.LIST_CHOICE:
            return mode
        text = st.text_input(f"{label}: CPUs (comma-separated)", key=key + "|list", placeholder="e.g. 1, 2, 3")
        return core.from_widget(knob, text)
    if kind == "int":
        lo = int(max(knob.lo, -SAFE_INT)) if knob.lo is not None else -SAFE_INT
        hi = int(min(knob.hi, SAFE_INT)) if knob.hi is not None else SAFE_INT
        _init(key, int(min(max(int(current), lo), hi)))
        return int(st.number_input(label, min_value=lo, max_value=hi, step=1, key=key, help=help_text))
    if kind == "float":
        lo_f = float(knob.lo) if knob.lo is not None else None
        hi_f = float(knob.hi) if knob.hi is not None else None
        _init(key, float(current))
        return float(st.number_input(label, min_value=lo_f, max_value=hi_f, key=key, help=help_text, format="%g"))
    # text-like: durations ("2 us"), lists, optional values
    _init(key, core.to_widget(knob, current))
    placeholder = {"duration": "e.g. 2 us", "list": "comma-separated", "optional": "empty = the kernel's default"}.get(kind)
    text = st.text_input(label, key=key, help=help_text, placeholder=placeholder)
    return core.from_widget(knob, text)


def knob_grid(knobs: Sequence[core.Knob], canon: Mapping[str, Any], prefix: str, columns: int = 3) -> dict[str, Any]:
    """Widgets for ``knobs`` in a grid; returns dotted key -> scenario value."""
    out: dict[str, Any] = {}
    if not knobs:
        return out
    cols = st.columns(columns)
    for i, knob in enumerate(knobs):
        with cols[i % columns]:
            out[knob.key] = knob_widget(knob, core.get_path(canon, knob.key), f"{prefix}|{knob.key}")
    return out


def section_forms(
    sections: Sequence[core.Section],
    canon: Mapping[str, Any],
    prefix: str,
    skip: Sequence[str] = (),
    expanded: Sequence[str] = (),
) -> dict[str, Any]:
    """One expander per section (``[machine]``, ``[kernel.rcu]``, ``[workload]``...) with every
    knob not in ``skip``."""
    out: dict[str, Any] = {}
    for s in sections:
        knobs = [k for k in s.knobs if k.key not in skip]
        if not knobs:
            continue
        with st.expander(f"{s.title} ({len(knobs)} knobs)", expanded=s.key in expanded):
            if s.doc:
                st.caption(s.doc)
            out.update(knob_grid(knobs, canon, prefix))
    return out


def match_keys(knobs: Mapping[str, core.Knob], patterns: Sequence[str]) -> list[str]:
    import fnmatch

    out: list[str] = []
    for pat in patterns:
        for key in knobs:
            if fnmatch.fnmatchcase(key, pat) and key not in out:
                out.append(key)
    return out


def set_widgets(prefix: str, values: Mapping[str, Any], knobs: Mapping[str, core.Knob]) -> None:
    """Put ``values`` (dotted key -> scenario value) into the widgets of ``prefix`` (used by the
    named-configuration buttons, as an on_click callback)."""
    for key, value in values.items():
        knob = knobs.get(key)
        if knob is None or knob.kind == "table":  # a table has no widget (shown read-only)
            continue
        wkey = f"{prefix}|{key}"
        if knob.kind == "choice_or_list":
            if isinstance(value, (list, tuple)):
                st.session_state[wkey] = core.LIST_CHOICE
                st.session_state[wkey + "|list"] = core.to_widget(knob, value)
            else:
                st.session_state[wkey] = value
        else:
            st.session_state[wkey] = core.to_widget(knob, value)


# ---------------------------------------------------------------------------------- cached work
class _Bar:
    """A progress bar updated at most every 2 %, created lazily inside a cached function (so a
    cache hit replays nothing visible: the bar is emptied at the end)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.bar = st.progress(0.0, text=text)
        self.last = -1.0

    def __call__(self, frac: float, label: str = "") -> None:
        frac = min(1.0, max(0.0, float(frac)))
        if frac - self.last >= 0.02 or frac >= 1.0:
            self.last = frac
            self.bar.progress(frac, text=f"{self.text} {label} {100 * frac:.0f}%".replace("  ", " "))

    def close(self) -> None:
        self.bar.empty()


@st.cache_data(show_spinner=False, max_entries=48)
def cached_run(toml_text: str, trace: bool) -> core.RunOutput:
    """One simulation, cached by its complete scenario (seed included) and whether it traces."""
    bar = _Bar("simulating…")
    try:
        return core.run_toml(toml_text, trace=trace, progress=bar)
    finally:
        bar.close()


@st.cache_data(show_spinner=False, max_entries=8)
def cached_story_rows(story: str, seeds: int) -> list[dict[str, Any]]:
    """The validation rows of a story (``rcusim validate STORY --seeds N``), cached."""
    from calibration import stories
    from calibration.validation import StoryOptions

    st_obj = stories.get(story)
    if st_obj is None:
        return []
    bar = _Bar("validating…")
    try:
        rows = st_obj.rows(StoryOptions(seeds=seeds, progress=lambda label, frac: bar(frac, label)))
    finally:
        bar.close()
    return [r.to_json() for r in rows]


def cached_bundled_profile() -> core.MachineProfile:
    return core.profile_of(cached_bundled_report())


@st.cache_data(show_spinner=False, max_entries=16)
def cached_compare(
    toml_a: str, toml_b: str, replications: int, confidence: float, error: float | None, error_source: str, story: str | None
) -> Any:
    from calibration import prescreen

    a = tomllib.loads(toml_a)
    b = tomllib.loads(toml_b)
    err = prescreen.ModelError(story, error, error_source)
    bar = _Bar("A/B runs…")
    try:
        return prescreen.compare(
            a,
            b,
            baseline_label="A",
            patch_label="B",
            replications=replications,
            confidence=confidence,
            error=err,
            workers=1,
            progress=lambda k, n: bar(k / max(n, 1), f"({k}/{n} runs)"),
        )
    finally:
        bar.close()


@st.cache_data(show_spinner=False, max_entries=4)
def cached_model_error(story: str) -> tuple[float | None, str]:
    from calibration import prescreen

    bar = _Bar(f"validating {story} for its model error…")
    try:
        e = prescreen.model_error(story, seeds=1)
    finally:
        bar.close()
    return e.value, e.source


# ---------------------------------------------------------------------------------- runs
def runs_of(prefix: str) -> list[dict[str, Any]]:
    return st.session_state.setdefault(f"{prefix}|runs", [])


def add_run(prefix: str, label: str, toml_text: str, out: core.RunOutput) -> None:
    runs = runs_of(prefix)
    n = st.session_state.get(f"{prefix}|run_counter", 0) + 1
    st.session_state[f"{prefix}|run_counter"] = n
    # the same scenario run again replaces its earlier entry
    runs[:] = [r for r in runs if r["toml"] != toml_text]
    runs.append({"id": n, "label": f"#{n} {label}", "toml": toml_text, "out": out})
    del runs[:-MAX_RUNS]


def run_button(prefix: str, data: Mapping[str, Any], label: str, trace: bool) -> None:
    """Validate ``data``, run it (cached) and record the run on the page."""
    scn = core.validate(data)
    toml_text = core.scenario_key(scn)
    out = cached_run(toml_text, trace)
    add_run(prefix, label, toml_text, out)


def _frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def show_runs(prefix: str, metric_patterns: Sequence[str], title: str = "Runs on this page") -> None:
    """The runs table, the plots, the timeline and the downloads."""
    runs = runs_of(prefix)
    if not runs:
        st.info("No run yet: set the knobs and press **Run**.")
        return
    pairs = [(r["label"], r["out"].result) for r in runs]
    all_metrics: list[str] = []
    for _, res in pairs:
        for k in res.get("metrics", {}):
            if k not in all_metrics:
                all_metrics.append(k)
    head = core.pick_metrics(dict.fromkeys(all_metrics), metric_patterns) or all_metrics[:6]
    head = head[:8]
    st.subheader(title)
    table = pd.DataFrame(core.metrics_rows(pairs, head))
    shown = table.copy()
    for c in head:
        shown[c] = [_fmt(v) for v in table[c]]
    st.table(shown.set_index("run"))
    c1, c2 = st.columns([1, 5])
    if c1.button("Clear runs", key=f"{prefix}|clear"):
        runs.clear()
        st.rerun()
    c2.caption("Each run keeps its label: the knobs that matter here, the other changed knobs, and the seed.")
    with st.expander("All figures of every run"):
        full = pd.DataFrame([{"run": label, **core.flat_figures(res)} for label, res in pairs]).set_index("run").T
        st.dataframe(full, width="stretch")
    plots(pairs, head)
    latest = runs[-1]
    choice = st.selectbox(
        "Run to inspect (per-CPU time, timeline, downloads)",
        [r["label"] for r in reversed(runs)],
        key=f"{prefix}|inspect|{st.session_state.get(f'{prefix}|run_counter', 0)}",  # a new run: inspect it
    )
    run = next((r for r in runs if r["label"] == choice), latest)
    inspect_run(prefix, run, pairs)


def plots(pairs: Sequence[tuple[str, Mapping[str, Any]]], head: Sequence[str]) -> None:
    series = core.series_rows(pairs)
    if series:
        st.markdown("**Throughput against the swept variable** (one line per run)")
        df = _frame(series)
        for (sname, yname), part in df.groupby(["series", "y_name"], sort=False):
            xname = str(part["x_name"].iloc[0])
            chart = (
                alt.Chart(part)
                .mark_line(point=True)
                .encode(
                    x=alt.X("x:Q", title=xname),
                    y=alt.Y("y:Q", title=f"{sname}: {yname}"),
                    color=alt.Color("run:N", title="run"),
                    tooltip=["run", alt.Tooltip("x:Q", title=xname), alt.Tooltip("y:Q", title=str(yname), format=".4g")],
                )
                .properties(height=280)
            )
            st.altair_chart(chart, width="stretch")
    if head:
        metric = head[0]
        vals = [
            {"run": label.split(" ", 1)[0], "label": label, metric: core._num(res.get("metrics", {}).get(metric))}
            for label, res in pairs
        ]
        df = _frame(vals)
        st.markdown(f"**{metric}** by run")
        chart = (
            alt.Chart(df)
            .mark_bar()
            .encode(
                x=alt.X("run:N", sort=None, title=None, axis=alt.Axis(labelAngle=0)),
                y=alt.Y(f"{metric}:Q", title=metric),
                color=alt.Color("label:N", title="run", legend=None),
                tooltip=["label", alt.Tooltip(f"{metric}:Q", format=".4g")],
            )
            .properties(height=240)
        )
        st.altair_chart(chart, width="stretch")
    lat = core.latency_rows(pairs)
    if lat:
        st.markdown("**Latency distributions** (percentiles, log scale)")
        df = _frame(lat)
        chart = (
            alt.Chart(df)
            .mark_line(point=True)
            .encode(
                x=alt.X("percentile:Q", title="percentile", scale=alt.Scale(domain=[50, 100])),
                y=alt.Y("value_us:Q", title="µs", scale=alt.Scale(type="log")),
                color=alt.Color("run:N"),
                strokeDash=alt.StrokeDash("latency:N"),
                tooltip=["run", "latency", "stat", alt.Tooltip("value_us:Q", format=".4g"), "count"],
            )
            .properties(height=260)
        )
        st.altair_chart(chart, width="stretch")


def inspect_run(prefix: str, run: Mapping[str, Any], pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    out: core.RunOutput = run["out"]
    res = out.result
    st.caption(
        f"simulated {res.get('sim_ns', 0) / 1e9:.4g} s in {res.get('wall_s', 0):.2f} s of computing, "
        f"{res.get('events', 0):,} events, rcusim {res.get('version', '')}"
    )
    with st.expander("Per-CPU time (%)"):
        st.dataframe(_frame(core.cpu_rows(res)).set_index("cpu"), width="stretch")
    downloads(prefix, run, pairs)
    if out.trace is None:
        st.caption("No trace recorded for this run (tick 'record a trace' before running to see the timeline).")
        return
    timeline(prefix, run)


def downloads(prefix: str, run: Mapping[str, Any], pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    out: core.RunOutput = run["out"]
    name = out.result.get("scenario", "scenario")
    c = st.columns(5)
    scn_text = "# " + run["label"] + "\n# rcusim run THIS_FILE reproduces the run\n" + run["toml"]
    c[0].download_button(
        "Scenario (TOML)", scn_text, file_name=f"{name}.toml", mime="application/toml", key=f"{prefix}|dl_toml", on_click="ignore"
    )
    c[1].download_button(
        "Results (CSV)",
        core.results_csv(pairs),
        file_name=f"{name}-results.csv",
        mime="text/csv",
        key=f"{prefix}|dl_csv",
        on_click="ignore",
    )
    if core.series_rows(pairs):
        c[2].download_button(
            "Series (CSV)",
            core.series_csv(pairs),
            file_name=f"{name}-series.csv",
            mime="text/csv",
            key=f"{prefix}|dl_series",
            on_click="ignore",
        )
    if out.trace is not None:
        c[3].download_button(
            "Trace (Chrome JSON)",
            out.trace,
            file_name=f"{name}.trace.json",
            mime="application/json",
            key=f"{prefix}|dl_trace",
            on_click="ignore",
            help="open it at ui.perfetto.dev or chrome://tracing",
        )
        if out.trace_dropped:
            st.caption(f"The trace kept the first {out.trace_events:,} events; {out.trace_dropped:,} later ones were dropped.")
    figures = st.session_state.setdefault("_run_figures", {})  # drawn once per run (about 0.3 s)
    png = figures.get(run["toml"])
    if png is None:
        png = figures[run["toml"]] = core.run_figure_png(out.result)
        while len(figures) > 2 * MAX_RUNS:  # the oldest runs' figures go (dicts keep insertion order)
            figures.pop(next(iter(figures)))
    c[4].download_button(
        "Figure (PNG)",
        png,
        file_name=f"{name}.png",
        mime="image/png",
        key=f"{prefix}|dl_png",
        on_click="ignore",
        help="where each CPU's time went, the series and the latency percentiles (as rcusim run --plot draws them)",
    )


def _doc(run: Mapping[str, Any]) -> dict[str, Any]:
    cache = st.session_state.setdefault("_trace_docs", {})
    key = run["toml"]
    doc = cache.get(key)
    if doc is None:
        doc = core.parse_trace(run["out"].trace)
        cache.clear()  # keep one parsed trace: they are large
        cache[key] = doc
        st.session_state["_trace_derived"] = {}
    return doc


def _derived(fn: Callable[..., Any], doc: Mapping[str, Any], *args: Any) -> Any:
    """``fn(doc, *args)`` for the one parsed trace kept, computed once: each scans every event
    of a trace of up to tens of MB, and the page reruns on every widget change."""
    memo = st.session_state.setdefault("_trace_derived", {})
    key = (fn.__name__, id(doc), args)
    if key not in memo:
        memo[key] = fn(doc, *args)
    return memo[key]


def timeline(prefix: str, run: Mapping[str, Any]) -> None:
    """CPUs, followed tasks (kthreads by default), grace periods and other model tracks for a
    short window of the trace."""
    doc = _doc(run)
    lo, hi = _derived(core.trace_extent_us, doc)
    if hi <= lo:
        st.caption("The trace is empty.")
        return
    st.markdown("**Timeline** (a short window of the trace; hover for names, download the trace for Perfetto)")
    d0, d1 = _derived(core.default_window_us, doc)
    k = f"{prefix}|tl|{run['id']}"
    c1, c2, c3 = st.columns([2, 1, 3])
    start = c1.number_input(
        "window start (ms)", min_value=lo / 1000.0, max_value=hi / 1000.0, value=d0 / 1000.0, key=k + "|start", format="%.3f"
    )
    length = c2.number_input(
        "length (ms)",
        min_value=0.01,
        max_value=max(0.01, (hi - lo) / 1000.0),
        value=max(0.01, (d1 - d0) / 1000.0),
        key=k + "|len",
    )
    names = _derived(core.task_names, doc)
    kthreads = _derived(core.kthread_names, doc)
    follow = c3.multiselect("tasks to follow (rows of their own)", names, default=kthreads[:8], key=k + "|tasks")
    t0 = start * 1000.0
    t1 = t0 + length * 1000.0
    shown_locks = None
    if _derived(core.lock_tracks, doc):
        # the busiest 40: a traced hackbench has hundreds of socket locks, and a list that long
        # slows every rerun of the page
        in_window = _derived(core.busiest_lock_tracks, doc, t0, t1, LOCK_CHOICES)
        shown_locks = st.multiselect(
            f"locks to show (who owns each lock; the {LOCK_CHOICES} busiest in the window, pending-owner time first)",
            in_window,
            default=in_window[:6],
            key=k + f"|locks|{start}|{length}",
        )
    spans, instants, truncated = core.timeline_rows(doc, t0, t1, follow, locks=shown_locks)
    if not spans:
        st.caption("Nothing ran in this window.")
        return
    df = _frame(spans)
    rows = core.row_order(df["row"])
    bars = (
        alt.Chart(df)
        .mark_bar(height=alt.RelativeBandSize(0.8))
        .encode(
            x=alt.X("start_ms:Q", title="time (ms)", scale=alt.Scale(domain=[t0 / 1000.0, t1 / 1000.0])),
            x2="end_ms:Q",
            y=alt.Y("row:N", sort=rows, title=None),
            color=alt.Color("kind:N", title="what"),
            tooltip=[
                "row",
                "name",
                "kind",
                alt.Tooltip("start_ms:Q", format=".4f"),
                alt.Tooltip("dur_us:Q", title="µs", format=".4g"),
            ],
        )
    )
    layers: list[Any] = [bars]
    if instants:
        idf = _frame(instants)
        idf = idf[idf["row"].isin(rows)]
        if not idf.empty:
            layers.append(
                alt.Chart(idf)
                .mark_tick(color="black", thickness=1, opacity=0.5)
                .encode(x="t_ms:Q", y=alt.Y("row:N", sort=rows), tooltip=["row", "name", alt.Tooltip("t_ms:Q", format=".4f")])
            )
    chart = alt.layer(*layers).properties(height=max(220, 34 * len(rows)))
    st.altair_chart(chart, width="stretch")
    if truncated:
        st.caption("Only the first spans of this window are drawn: shorten the window to see everything.")
    spans_all = core.model_span_histogram(doc)
    if spans_all:
        sdf = _frame(spans_all)
        st.markdown("**Distribution of model spans** (grace-period lengths, lock ownership by lock class) over the whole trace")
        hist = (
            alt.Chart(sdf)
            .mark_bar()
            .encode(
                x=alt.X("from_ms:Q", title="duration (ms)"),
                x2="to_ms:Q",
                y=alt.Y("sum(spans):Q", title="spans"),
                color=alt.Color("track:N"),
                tooltip=["track", alt.Tooltip("from_ms:Q", format=".4g"), alt.Tooltip("to_ms:Q", format=".4g"), "spans"],
            )
            .properties(height=200)
        )
        st.altair_chart(hist, width="stretch")


# ---------------------------------------------------------------------------------- stories
def story_page(story: str) -> None:
    page = content.STORY_PAGES[story]
    prefix = f"story:{story}"
    st.title(page.title)
    st.markdown(f"*{page.headline}*")
    st.caption(f"Seed story `{story}` (shared/seeds/{page.seed_file})")
    from calibration import stories

    story_obj = stories.get(story)
    tab_how, tab_try, tab_val = st.tabs(["How it works", "Try it", "Published vs simulated"])
    with tab_how:
        st.markdown(page.explanation)
        st.markdown("**What to try next**")
        st.markdown("\n".join(f"* {x}" for x in page.try_next))
        notes = sorted({str(p.relative_to(core.ROOT)) for pat in page.further for p in core.ROOT.glob(pat)})
        if notes:
            st.caption("Further reading, with kernel sources: " + ", ".join(f"`{n}`" for n in notes))
    with tab_val:
        validation_tab(story, page, story_obj)
    with tab_try:
        if story_obj is None:
            st.info(f"The `{story}` story is not modelled yet: {stories.pending(story)}")
        available = [s for s in page.scenarios if (core.SCENARIO_DIR / f"{s}.toml").is_file()]
        if not available:
            st.warning("No scenario of this story is bundled yet; the workload lab runs every scenario that exists.")
            return
        with guard():
            try_it(prefix, page, available)


def validation_tab(story: str, page: content.StoryPage, story_obj: Any) -> None:
    st.markdown("**Published** (from the seed document)")
    st.markdown(page.published)
    if story_obj is None:
        from calibration import stories

        st.info(f"Simulated figures will appear here once the story is modelled ({stories.pending(story)}).")
        return
    figs = story_obj.reference.get("figures") if isinstance(story_obj.reference, Mapping) else None
    if figs:
        with st.expander("Reference figures as the validation uses them"):
            st.table(pd.DataFrame([{"figure": k, "value": str(v)} for k, v in figs.items()]).set_index("figure"))
    st.markdown(
        "**Simulated**: the story's validation (`rcusim validate " + story + "`). *Fitted* rows are the anchors a "
        "parameter was fitted to; *predicted* rows were not used in any fit, and their error is the model's honest error."
    )
    c1, c2 = st.columns([1, 3])
    seeds = int(c1.number_input("seeds per figure", min_value=1, max_value=10, value=1, key=f"val|{story}|seeds"))
    go = c2.button("Run the validation", key=f"val|{story}|run", help="runs every configuration of the story; can take minutes")
    if go:
        st.session_state[f"val|{story}|asked"] = seeds
    asked = st.session_state.get(f"val|{story}|asked")
    if asked is None:
        return
    with guard():
        rows = cached_story_rows(story, int(asked))
        if not rows:
            st.info("The story produced no rows.")
            return
        df = pd.DataFrame(rows)
        cols = ["metric", "config", "reference", "simulated", "unit", "role", "rel_error", "tolerance", "ok", "note"]
        df = df[[c for c in cols if c in df.columns]]
        shown = df.copy()
        for c in ("reference", "simulated"):
            shown[c] = [_fmt(v) if v is not None else "-" for v in df[c]]
        shown["rel_error"] = [f"{100 * v:+.1f}%" if isinstance(v, (int, float)) else "-" for v in df["rel_error"]]
        shown["tolerance"] = [f"±{100 * v:.0f}%" if isinstance(v, (int, float)) else "-" for v in df["tolerance"]]
        st.table(shown)
        validation_chart(rows)
        stale = [r for r in rows if r.get("role") == "fitted" and not r.get("ok")]
        if stale:
            st.warning(
                f"{len(stale)} fitted anchor(s) drifted from their published figure: the model changed after the "
                f"fit; refit with python -m calibration.stories.{story.replace('-', '_')} --fit."
            )
        misses = [r for r in rows if r.get("role") == "predicted" and not r.get("ok")]
        if misses:
            st.warning(f"{len(misses)} predicted figure(s) miss their target: the model does not reproduce them yet.")
        else:
            st.success("Every predicted figure is within its target.")


def validation_chart(rows: Sequence[Mapping[str, Any]]) -> None:
    """Each row's error (dot: blue within its tolerance, red a miss; hollow for a fitted anchor)
    on its tolerance band, the axis cut at :func:`core.validation_chart_rows`' limit."""
    data, limit = core.validation_chart_rows(rows)
    if not data:
        return
    frame = _frame(data)
    axis = alt.Axis(labelLimit=0, labelOverlap=False)
    base = alt.Chart(frame).encode(y=alt.Y("row:N", sort=None, title=None, axis=axis))
    scale = alt.Scale(domain=[-1.1 * limit, 1.1 * limit], nice=False)
    band = base.mark_bar(opacity=0.25, color="#54a24b", height=14).encode(
        x=alt.X("minus tolerance %:Q", scale=scale, title="simulated vs reference (%)"), x2="tolerance %:Q"
    )
    colour = alt.Color("within:N", scale=alt.Scale(domain=["yes", "MISS"], range=["#4c78a8", "#e45756"]), title="within")
    tips = ["row", "role", alt.Tooltip("error %:Q", format="+,.1f"), alt.Tooltip("tolerance %:Q", format=".0f"), "within"]
    dots = base.mark_point(size=70, strokeWidth=2).encode(
        x="error % (drawn):Q",
        color=colour,
        fill=alt.condition(alt.datum.role == "fitted", alt.value("white"), colour),
        tooltip=tips,
    )
    cut = base.transform_filter(alt.datum.clipped != "").mark_text(align="right", dx=-10, fontWeight="bold")
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black", strokeDash=[3, 3]).encode(x="x:Q")
    chart = alt.layer(band, zero, dots, cut.encode(x="error % (drawn):Q", text="clipped:N"))
    st.altair_chart(chart.properties(height=alt.Step(BAR_PX)), width="stretch")
    st.caption(
        "Each row's error against its tolerance (green band); red: a miss, hollow: a fitted anchor"
        + (f"; errors beyond ±{limit:.0f}% are drawn at the edge with their value." if any(d["clipped"] for d in data) else ".")
    )


def try_it(prefix: str, page: content.StoryPage, available: Sequence[str]) -> None:
    scenario = available[0]
    if len(available) > 1:
        scenario = st.selectbox("Scenario", available, key=f"{prefix}|scenario")
    cat = core.catalog()
    base = core.load_bundled(scenario)
    canon0 = core.canonical(core.validate(base, cat))
    fit, skipped = core.resolve_fitted(canon0, core.story_fit(page.story))
    quick = page.quick.get(scenario, {})
    base = core.apply(base, {**fit, **quick})
    scn = core.validate(base, cat)
    canon = core.canonical(scn)
    sections = core.scenario_sections(scn, cat)
    knobs = {k.key: k for s in sections for k in s.knobs}

    def shown(over: Mapping[str, Any]) -> str:  # with the unit, as the widgets show them
        return ", ".join(f"{k} = {core.value_text(knobs.get(k), v)}" for k, v in over.items())

    notes = []
    if fit:
        notes.append(f"fitted values of calibration/fits/{page.story}.toml: {shown(fit)}")
    if quick:
        notes.append(f"a quicker size than the story's: {shown(quick)}")
    if notes:
        st.caption("Starting from scenarios/" + scenario + ".toml with " + "; ".join(notes) + ".")
    focus = match_keys(knobs, page.focus)[:9]
    wprefix = f"{prefix}|{scenario}"
    configs = {n: c for n, c in content.named_configs(page).items() if all(k in knobs for k in c)}
    if configs:
        st.markdown("**Named configurations** (set the knobs; then press Run)")
        cols = st.columns(min(len(configs), 4))
        for i, (name, over) in enumerate(configs.items()):
            cols[i % len(cols)].button(
                name, key=f"{wprefix}|cfg|{name}", on_click=set_widgets, args=(wprefix, over, knobs), help=str(over)
            )
    st.markdown("**The knobs that matter here**")
    values = knob_grid([knobs[k] for k in focus], canon, wprefix)
    values.update(section_forms(sections, canon, wprefix, skip=focus))
    c1, c2 = st.columns([1, 3])
    trace = c2.checkbox("record a trace (timeline and Perfetto download)", value=True, key=f"{wprefix}|trace")
    if c1.button("Run", type="primary", key=f"{prefix}|run"):
        with guard():
            over = core.changed(knobs, values, canon)
            data = core.apply(base, over)
            scn_new = core.validate(data, cat)
            label = core.run_label(over, focus, core.canonical(scn_new))
            if len(available) > 1:  # the page's runs share one table: say which scenario each ran
                label = f"{scenario} {label}"
            run_button(prefix, data, label, trace)
    show_runs(prefix, page.metrics)


# ---------------------------------------------------------------------------------- profiles
HAND_KEYS = ("machine.cpus", "kernel.hz")  # what "hand-set CPUs and HZ" sets instead of the forms


def profile_picker(prefix: str) -> tuple[core.MachineProfile | None, bool, str, Any, Any]:
    """The machine: the bundled profile, an uploaded one or the scenario's own costs, and
    whether CPUs and HZ are hand-set. Returns (profile, hand-set, identity for widget keys, and
    the two places where :func:`hand_set` draws the CPU and HZ boxes once the scenario is known)."""
    st.markdown("**Machine profile**")
    rep, ident = report_picker(prefix, "costs from", own=True)
    prof = core.profile_of(rep) if rep is not None else None
    if prof is not None:
        st.caption(f"{prof.label}; {prof.note}")
    c1, c2, c3 = st.columns([1, 1, 1])
    hand = c1.checkbox(
        "hand-set CPUs and HZ",
        key=f"{prefix}|hand",
        help="set machine.cpus and kernel.hz here, in place of the machine and kernel sections below",
    )
    return prof, hand, ident, c2, c3


def hand_set(prefix: str, wprefix: str, canon: Mapping[str, Any], places: Sequence[Any]) -> tuple[int, int]:
    """The hand-set CPU count and HZ. They start from the values in effect (the form's, if it
    was edited, else the scenario's with the profile's), so ticking the box changes nothing by
    itself; while it is ticked the forms do not show machine.cpus and kernel.hz."""
    out = []
    for (key, label, lo, hi), place in zip(
        (("machine.cpus", "CPUs", 1, 1024), ("kernel.hz", "HZ", 24, 10000)), places, strict=True
    ):
        wkey = f"{prefix}|{key.rsplit('.', 1)[-1]}"
        if wkey not in st.session_state:
            now = st.session_state.get(f"{wprefix}|{key}", core.get_path(canon, key))
            st.session_state[wkey] = min(max(int(now), lo), hi)
        out.append(int(place.number_input(label, min_value=lo, max_value=hi, step=1, key=wkey, help=f"sets {key}")))
    return out[0], out[1]


def lab_page() -> None:
    prefix = "lab"
    st.title("Workload lab")
    st.markdown(
        "Any workload rcusim knows, on any machine, with every kernel knob. The forms are built from the "
        "models' configuration classes, so a knob a model adds appears here by itself; hover a knob's question mark for "
        "its meaning and the source of its default."
    )
    with guard():
        cat = core.catalog()
        prof, hand, ident, c_cpus, c_hz = profile_picker(prefix)
        kinds = sorted(cat.workloads)
        bundled = core.bundled_scenarios()
        by_kind: dict[str, list[str]] = {}
        for name in bundled:
            by_kind.setdefault(core.scenario_kind(name), []).append(name)
        st.markdown("**Workload**")
        c1, c2 = st.columns(2)
        default_kind = kinds.index("messaging") if "messaging" in kinds else 0
        kind = c1.selectbox(
            "workload", kinds, index=default_kind, key=f"{prefix}|kind", help=_first(cat.workloads[kinds[default_kind]].doc)
        )
        starts = [*by_kind.get(kind, []), "(defaults only)"]
        start = c2.selectbox(
            "start from", starts, key=f"{prefix}|start|{kind}", help="a bundled scenario of this workload, or only defaults"
        )
        st.caption(_first(cat.workloads[kind].doc))
        bare = (
            core.load_bundled(start)
            if start != "(defaults only)"
            else {"scenario": {"name": f"lab-{kind}"}, "workload": {"kind": kind}}
        )
        # the keys name the scenario and the profile, never the CPU count or HZ: changing those keeps every edit
        wprefix = f"{prefix}|{start}|{kind}|{ident}"
        base = core.apply_profile(bare, prof, prof.cpus if prof else None, prof.hz if prof else None)
        skip: tuple[str, ...] = ()
        if hand:
            cpus, hz = hand_set(prefix, wprefix, core.canonical(core.validate(base, cat)), (c_cpus, c_hz))
            base = core.apply_profile(bare, prof, cpus, hz)
            skip = HAND_KEYS
        else:
            for key in HAND_KEYS:
                # unticking keeps the hand-set values: the forms take them over
                hand_value = st.session_state.get(f"{prefix}|{key.rsplit('.', 1)[-1]}")
                if hand_value is not None and f"{wprefix}|{key}" not in st.session_state:
                    st.session_state[f"{wprefix}|{key}"] = int(hand_value)
            where = "the profile" if prof is not None else "the scenario"
            c_cpus.caption(f"CPUs and HZ from {where}: change them in the machine and kernel sections below.")
        scn = core.validate(base, cat)
        canon = core.canonical(scn)
        sections = core.scenario_sections(scn, cat)
        knobs = {k.key: k for s in sections for k in s.knobs}
        st.markdown("**Size and knobs**")
        if hand:
            st.caption("machine.cpus and kernel.hz are hand-set above; the forms leave them out.")
        values = section_forms(sections, canon, wprefix, skip=skip, expanded=("workload",))
        c1, c2 = st.columns([1, 3])
        trace = c2.checkbox("record a trace (timeline and Perfetto download)", value=True, key=f"{prefix}|trace")
        if c1.button("Run", type="primary", key=f"{prefix}|run"):
            with guard():
                over = core.changed(knobs, values, canon)
                data = core.apply(base, over)
                scn_new = core.validate(data, cat)
                focus = [k for k in HAND_KEYS if k in knobs]
                label = f"{kind} " + core.run_label(over, focus, core.canonical(scn_new))
                run_button(prefix, data, label, trace)
    show_runs(prefix, ("*per_s", "time_s*", "*latency*", "ns_per_*", "cpu_utilisation"))


def _first(text: str) -> str:
    return core._first_line(text)


# ---------------------------------------------------------------------------------- A/B
def ab_page() -> None:
    prefix = "ab"
    st.title("A/B mode")
    st.markdown(
        "Two configurations of one scenario, each run over the same seeds (common random numbers: "
        "replication *i* of A and of B draw the same random numbers wherever B does not change what "
        "happens). The difference of B from A is shown with a paired bootstrap confidence interval "
        "(`calibration.prescreen`, the engine of `rcusim compare`) and a verdict in plain words."
    )
    with guard():
        cat = core.catalog()
        bundled = core.bundled_scenarios()
        default = bundled.index("netns-2014") if "netns-2014" in bundled else 0
        name = st.selectbox("scenario", bundled, index=default, key=f"{prefix}|scenario")
        page = next((p for p in content.STORY_PAGES.values() if name in p.scenarios), None)
        base = core.load_bundled(name)
        canon0 = core.canonical(core.validate(base, cat))
        fit = core.resolve_fitted(canon0, core.story_fit(page.story))[0] if page else {}
        base = core.apply(base, fit)
        scn = core.validate(base, cat)
        canon = core.canonical(scn)
        knobs = core.all_knobs(scn, cat)
        # the base seed box sets the seeds (replication i of A and of B run the same seed, derived
        # from it), so scenario.seed is no knob here; a measured table cannot be edited on a page
        keys = [x for x in knobs if x != "scenario.seed" and knobs[x].kind != "table"]
        quick = dict(page.quick.get(name, {})) if page else {}
        focus = match_keys(knobs, page.focus) if page else []
        ab_sides = page.ab if page and page.ab else ({}, {})
        differ_default = [x for x in ab_sides[0] if x in knobs] or focus[:1]
        configs = list(ab_sides)
        k = f"{prefix}|{name}"
        c1, c2 = st.columns(2)
        differ = c1.multiselect("knobs that differ between A and B", keys, default=differ_default, key=k + "|differ")
        common = c2.multiselect(
            "knobs changed for both (size...)",
            [x for x in keys if x not in differ],
            default=[q for q in quick if q in knobs],
            key=k + "|common",
        )
        values_common: dict[str, Any] = {}
        if common:
            st.markdown("**Both**")
            shown = {**canon}
            for key, v in quick.items():
                if key in knobs:
                    shown = core.apply(shown, {key: v})
            values_common = knob_grid([knobs[x] for x in common], shown, k + "|both")
        ca, cb = st.columns(2)
        with ca:
            st.markdown("**A**")
            a_vals = {x: knob_widget(knobs[x], core.get_path(_cfg(canon, configs, 0), x), f"{k}|A|{x}") for x in differ}
        with cb:
            st.markdown("**B**")
            b_vals = {x: knob_widget(knobs[x], core.get_path(_cfg(canon, configs, 1), x), f"{k}|B|{x}") for x in differ}
        if all(core.same_value(knobs[x], a_vals[x], b_vals[x]) for x in differ):
            st.warning(
                "A and B are identical: the run would compare A with itself. Choose a knob under "
                "'knobs that differ between A and B' and give B another value.",
                icon=":material/warning:",
            )
        c1, c2, c3, c4 = st.columns(4)
        reps = int(c1.number_input("replications (seeds)", min_value=2, max_value=100, value=5, key=f"{prefix}|reps"))
        conf = float(c2.selectbox("confidence", [0.9, 0.95, 0.99], index=1, key=f"{prefix}|conf"))
        seed = int(
            c3.number_input(
                "base seed",
                min_value=0,
                max_value=SAFE_INT,
                value=int(canon["scenario"]["seed"]),
                key=f"{prefix}|seed",
                help="the seeds of both sides: replication i of A and of B run the same seed, derived from this one",
            )
        )
        err_mode = c4.selectbox(
            "'worth a lab run?' judged against",
            ["nothing", "a model error I enter", "the story's validated error (slow)"],
            key=f"{prefix}|errmode",
        )
        error: float | None = None
        error_source = "not judged on this page"
        story = page.story if page else None
        if err_mode.startswith("a model error"):
            error = (
                float(st.number_input("model error (%)", min_value=0.0, max_value=1000.0, value=25.0, key=f"{prefix}|err"))
                / 100.0
            )
            error_source = core.ENTERED_ERROR
        elif err_mode.startswith("the story"):
            if story is None:
                st.caption("This scenario belongs to no story.")
            else:
                error, error_source = cached_model_error(story)
        if st.button("Run A and B", type="primary", key=f"{prefix}|run"):
            base_all = core.apply(base, {**core.changed(knobs, values_common, canon), "scenario.seed": seed})
            data_a = core.apply(base_all, core.changed(knobs, a_vals, canon))
            data_b = core.apply(base_all, core.changed(knobs, b_vals, canon))
            scn_a = core.validate(data_a, cat)
            scn_b = core.validate(data_b, cat)
            ta, tb = core.scenario_key(scn_a), core.scenario_key(scn_b)
            if ta == tb:
                st.warning("A and B are the same configuration: change a knob on one side.")
            comp = cached_compare(ta, tb, reps, conf, error, error_source, story)
            st.session_state[f"{prefix}|result"] = {"comp": comp, "a": ta, "b": tb, "page_metrics": page.metrics if page else ()}
    res = st.session_state.get(f"{prefix}|result")
    if res is not None:
        with guard():
            show_ab(prefix, res)


def _cfg(canon: Mapping[str, Any], configs: Sequence[Mapping[str, Any]], i: int) -> Mapping[str, Any]:
    if i < len(configs):
        return core.apply(canon, {k: v for k, v in configs[i].items() if core.get_path(canon, k) is not None})
    return canon


def show_ab(prefix: str, res: Mapping[str, Any]) -> None:
    comp = res["comp"]
    st.subheader("Result")
    metrics = [e.metric for e in comp.effects]
    if not metrics:
        st.info("No metric moved in any run.")
        return
    preferred = core.pick_metrics(dict.fromkeys(metrics), res.get("page_metrics") or ()) or metrics
    metric = st.selectbox("metric", metrics, index=metrics.index(preferred[0]), key=f"{prefix}|metric")
    e = next(x for x in comp.effects if x.metric == metric)
    sentence = core.plain_verdict(comp, metric)
    if e.verdict == "improves":
        st.success(sentence)
    elif e.verdict == "regresses":
        st.warning(sentence)
    else:  # no detectable effect, not compared, or a change of unknown direction: neither good nor bad
        st.info(sentence)
    c = st.columns([1, 1, 1, 2])
    c[0].metric("A mean", _fmt(e.base_mean))
    c[1].metric("B mean", _fmt(e.patch_mean))
    c[2].metric("difference B vs A", core.pct_text(e.effect))
    conf_label = f"{100 * comp.confidence:.0f}% interval"
    if math.isfinite(e.ci_low) and math.isfinite(e.ci_high):
        c[3].metric(conf_label, f"[{core.pct_text(e.ci_low)}, {core.pct_text(e.ci_high)}]")
        st.caption(
            f"{conf_label} of the difference B vs A: from {core.pct_text(e.ci_low)} to {core.pct_text(e.ci_high)} "
            f"(paired bootstrap over {comp.replications} replications)."
        )
    else:
        c[3].metric(conf_label, "-")
    st.caption(f"Overall: {core.overall_verdict(comp)}.  Model error: {comp.model_error.source}.")
    runs = _frame(core.ab_run_rows(comp, metric))
    left, _ = st.columns([1, 2])
    left.markdown(f"**{metric}** in every replication")
    pts = (
        alt.Chart(runs)
        .mark_circle(size=70, opacity=0.8)
        .encode(
            x=alt.X("arm:N", title=None, axis=alt.Axis(labelAngle=0)),
            y=alt.Y(f"{metric}:Q", scale=alt.Scale(zero=False)),
            color="arm:N",
            tooltip=["arm", "replication", "seed", alt.Tooltip(f"{metric}:Q", format=".4g")],
        )
    )
    lines = alt.Chart(runs).mark_line(color="gray", opacity=0.4).encode(x="arm:N", y=f"{metric}:Q", detail="replication:N")
    left.altair_chart((lines + pts).properties(height=280), width="stretch")
    effect_chart(comp)
    with st.expander("Every metric"):
        table = _frame(core.ab_effect_rows(comp))
        st.dataframe(table, width="stretch")
    d = st.columns(3)
    d[0].download_button("A (TOML)", res["a"], file_name="A.toml", key=f"{prefix}|dl_a", on_click="ignore")
    d[1].download_button("B (TOML)", res["b"], file_name="B.toml", key=f"{prefix}|dl_b", on_click="ignore")
    d[2].download_button(
        "Runs (CSV)", core.ab_runs_csv(comp), file_name="ab-runs.csv", key=f"{prefix}|dl_runs", on_click="ignore"
    )
    st.caption(
        f"Reproduce on the command line: rcusim compare A.toml B.toml -n {comp.replications} "
        f"--confidence {comp.confidence:g} (A's scenario.seed is the base seed)"
    )


def _sides(rows: Sequence[Mapping[str, Any]]) -> str:
    signs = {r["effect %"] > 0 for r in rows}
    return "±" if len(signs) == 2 else "+" if True in signs else "-"


def effect_chart(comp: Any) -> None:
    """The difference B vs A of every metric with its interval, on an axis cut where one huge
    effect would flatten the others (:func:`core.effect_chart_rows`), full metric names."""
    rows, limit, domain = core.effect_chart_rows(comp)
    if not rows:
        return
    st.markdown("**Difference B vs A with its interval**, every metric")
    eff = _frame(rows)
    scale = alt.Scale(domain=list(domain), nice=False)
    # full metric names (no "rcu.synchronize_…" twice), one per row
    axis = alt.Axis(labelLimit=0, labelOverlap=False)
    base = alt.Chart(eff).encode(y=alt.Y("metric:N", sort=None, title=None, axis=axis))
    tips = [
        "metric",
        "verdict",
        alt.Tooltip("effect %:Q", format="+,.1f"),
        alt.Tooltip("CI low %:Q", format="+,.1f"),
        alt.Tooltip("CI high %:Q", format="+,.1f"),
        "better",
        "worth a lab run",
    ]
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("CI low % (drawn):Q", title="% change", scale=scale), x2="CI high % (drawn):Q", color="verdict:N"
    )
    inside = base.transform_filter(alt.datum.clipped == "")
    dots = inside.mark_point(filled=True, size=50).encode(x="effect % (drawn):Q", color="verdict:N", tooltip=tips)
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black", strokeDash=[3, 3]).encode(x="x:Q")
    layers: list[Any] = [bars, dots, zero]
    if limit is not None:
        for side, shape, align, dx in ((1, "triangle-right", "right", -10), (-1, "triangle-left", "left", 10)):
            cut = base.transform_filter((alt.datum.clipped != "") & (side * alt.datum["effect %"] > 0))
            layers.append(
                cut.mark_point(shape=shape, filled=True, size=110).encode(x="effect % (drawn):Q", color="verdict:N", tooltip=tips)
            )
            layers.append(cut.mark_text(align=align, dx=dx, fontWeight="bold").encode(x="effect % (drawn):Q", text="clipped:N"))
    st.altair_chart(alt.layer(*layers).properties(height=max(160, BAR_PX * len(eff))), width="stretch")
    clipped = [r for r in rows if r["clipped"]]
    if clipped:
        st.caption(
            f"The axis is cut at {_sides(clipped)}{limit:,.0f}%: {len(clipped)} metric(s) beyond it ("
            + ", ".join(f"{r['metric']} {r['effect %']:+,.0f}%" for r in clipped)
            + ") are drawn at the edge as triangles with their value beside; 'Every metric' has all figures."
        )


# ---------------------------------------------------------------------------------- home
# ---------------------------------------------------------------------------------- this machine
@st.cache_resource(show_spinner=False, max_entries=2)
def cached_bundled_report() -> core.MachineReport:
    return core.bundled_report()


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_report(data: bytes, name: str) -> core.MachineReport:
    bar = _Bar("calibrating the profile…")
    try:
        return core.report_from_json(data, name, progress=lambda label, frac: bar(frac, label))
    finally:
        bar.close()


@st.cache_data(show_spinner=False, max_entries=8)
def cached_gp_rows(key: str, busy: bool, _rep: core.MachineReport) -> list[dict[str, Any]]:
    return core.gp_distribution_rows(_rep, busy)


@st.cache_data(show_spinner=False, max_entries=4)
def cached_composite_rows(key: str, seeds: int, _rep: core.MachineReport) -> list[dict[str, Any]]:
    bar = _Bar("simulating the held-back composites…")
    try:
        return core.composite_rows(_rep, seeds, progress=lambda label, frac: bar(frac, label))
    finally:
        bar.close()


def report_picker(prefix: str, label: str, own: bool) -> tuple[core.MachineReport | None, str]:
    """The measured machine: the bundled profile, an uploaded one (calibrated once, whichever page
    asks), or with ``own`` none (the scenario's own values). Returns the report, or None, and an
    identity for widget keys."""
    options = ["bundled profile", "upload a profile (JSON from rcusim collect)"]
    choice = st.radio(
        label, [*options, "the scenario's own values"] if own else options, key=f"{prefix}|profile", horizontal=True
    )
    if choice.startswith("bundled"):
        return cached_bundled_report(), "bundled"
    if choice.startswith("upload"):
        up = st.file_uploader("profile JSON", type=["json"], key=f"{prefix}|upload")
        if up is not None:
            data = up.getvalue()
            return cached_report(data, up.name), core.digest(data)[:12]
        st.caption("No file yet: using the scenario's own values." if own else "No file yet.")
    return None, "own"


def machine_page() -> None:
    prefix = "machine"
    st.title("This machine")
    st.markdown(
        "What rcusim measured on a machine and how well its calibrated model matches it: the costs it fitted, the "
        "microbenchmarks it matched or predicts, the normal grace period as the machine and the model make it, and the "
        "composite benchmarks it never saw (`rcusim collect`, `rcusim calibrate`, `rcusim validate --profile`)."
    )
    with guard():
        rep, key = report_picker(prefix, "profile", own=False)
        if rep is None:
            return
        st.caption(f"{rep.label}; {rep.note}")
        st.table(pd.DataFrame(core.machine_facts(rep)).set_index("fact"))
        for w in rep.report.get("warnings", []):
            st.warning(w, icon=":material/warning:")

        st.subheader("Calibrated costs")
        st.markdown(
            "Each cost the model runs this machine with: *direct* from a measurement, *fit* to simulated "
            "microbenchmarks, *default* when nothing measures it (the params file of `rcusim calibrate` holds the same)."
        )
        params = _frame(core.parameter_rows(rep))
        if len(params):
            st.dataframe(params, hide_index=True, width="stretch")

        st.subheader("Microbenchmarks: fitted and predicted")
        st.markdown(
            "*Fitted* rows are the anchors the costs were fitted to; *check* rows were predicted from them. The band is "
            "the ±10 % a fitted anchor must meet for the calibration to pass its own check."
        )
        out = _frame(core.outcome_rows(rep))
        if len(out):
            bars = (
                alt.Chart(out)
                .mark_bar()
                .encode(
                    # every bar labelled: no label dropped as overlapping, none cut short
                    y=alt.Y("outcome:N", sort=None, title=None, axis=alt.Axis(labelOverlap=False, labelLimit=0)),
                    x=alt.X("error %:Q", title="simulated vs measured, %"),
                    color=alt.Color("role:N", title="role"),
                    tooltip=[
                        "outcome",
                        "item",
                        "role",
                        alt.Tooltip("measured:Q", format=",.0f"),
                        alt.Tooltip("simulated:Q", format=",.0f"),
                        alt.Tooltip("error %:Q", format="+.1f"),
                        "note",
                    ],
                )
            )
            band = alt.Chart(pd.DataFrame({"lo": [-10.0], "hi": [10.0]})).mark_rect(opacity=0.12).encode(x="lo:Q", x2="hi:Q")
            st.altair_chart((band + bars).properties(height=max(200, BAR_PX * len(out))), width="stretch")

        st.subheader("A normal grace period: the machine and the model")
        st.markdown(
            "`membarrier(MEMBARRIER_CMD_GLOBAL)` called 1 ms apart from CPU 0 (the profile's samples) against the "
            "calibration's replica on the model (300 calls over 4 seeds). On a 6.9+ kernel the timer-migration hierarchy "
            "makes two modes, 7 and 15 ms. With the other CPU busy, how often the fast one is taken depends on the idle "
            "CPU's own wakeups; with both idle, how often the slow one is taken depends on the other processes' runs on "
            "the other CPU, which then goes idle last and takes the FQS timeout (README, rcu)."
        )
        for busy, title in ((False, "other CPUs idle"), (True, "other CPUs busy (a user-mode spinner each)")):
            rows = cached_gp_rows(key, busy, rep)
            if not rows:
                st.caption(f"{title}: the profile has no {core.GP_ITEMS[busy]} item.")
                continue
            chart = (
                alt.Chart(_frame(rows))
                .mark_bar(opacity=0.7)
                .encode(
                    x=alt.X("ms:Q", title="latency, ms (0.25-ms bins)"),
                    y=alt.Y("share:Q", title="share of calls", stack=None),
                    color=alt.Color("source:N", title=None),
                    xOffset="source:N",
                    tooltip=["source", alt.Tooltip("ms:Q", format=".3f"), alt.Tooltip("share:Q", format=".1%")],
                )
                .properties(height=220, title=title)
            )
            st.altair_chart(chart, width="stretch")

        st.subheader("Held-back composites: predicted, never fitted")
        st.markdown(
            "Messaging (perf bench sched messaging over pipes), the fake-router netns script and PI-futex throughput, "
            "measured by the collector and simulated with this calibration. The target is ±25 %."
        )
        c1, c2 = st.columns([1, 3])
        seeds = int(c1.number_input("seeds", min_value=1, max_value=8, value=1, key=f"{prefix}|seeds"))
        if c2.button("Predict the composites", key=f"{prefix}|run", help="a few seconds per seed on the development machine"):
            st.session_state[f"{prefix}|asked"] = (key, seeds)
        asked = st.session_state.get(f"{prefix}|asked")
        if asked is None or asked[0] != key:
            return
        rows = cached_composite_rows(key, int(asked[1]), rep)
        if not rows:
            st.info("The profile holds no composite benchmark (collect one: rcusim collect --items messaging).")
            return
        df = pd.DataFrame(rows)
        shown = pd.DataFrame(
            {
                "composite": df["metric"],
                "configuration": df["config"],
                "measured": [_fmt_figure(v) for v in df["reference"]],
                "model": [_fmt_figure(v) for v in df["simulated"]],
                "unit": df["unit"],
                "error": [
                    f"{100 * v:+.1f}%" if isinstance(v, (int, float)) and math.isfinite(v) else "-" for v in df["rel_error"]
                ],
                "within ±25 %": df["ok"],
            }
        )
        st.table(shown)
        validation_chart(rows)


def home_page() -> None:
    st.title("rcusim explorer")
    st.markdown(
        "*A discrete-event simulator of the Linux kernel mechanisms behind scalability — for what-if questions "
        "before a lab run, and for seeing why one CPU can beat four.*"
    )
    st.markdown(content.HOME)
    from calibration import stories

    rows = []
    for name, page in content.STORY_PAGES.items():
        try:
            modelled = stories.get(name) is not None
            status = "modelled" if modelled else "not modelled yet: " + stories.pending(name)
        except (KeyError, ImportError) as exc:
            status = f"unavailable ({exc})"
        rows.append({"story": page.title, "name": name, "seed": page.seed_file, "status": status})
    st.markdown("**The seed stories**")
    st.table(pd.DataFrame(rows).set_index("story"))
    with guard():
        prof = cached_bundled_profile()
        st.caption(f"Default machine profile: {prof.label}.")
    from sim import compiled

    # plain Python gives the same results, 1.6-1.9x slower (README, Speed)
    st.caption(f"Simulation engine: {compiled.status()[1]}.")
    if Path(core.ROOT / "docs" / "readme" / "app.md").is_file():
        st.caption("More in docs/readme/app.md.")
