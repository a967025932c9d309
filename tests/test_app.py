"""The Streamlit explorer, driven by streamlit.testing's AppTest (no browser), and the pure
helpers behind it (app/explorer/core.py): generic knob forms, scenario TOML that the CLI
reproduces, the timeline cut from a trace, the ``rcusim app`` verb."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from app.explorer import content, core
from calibration.params import load_params
from calibration.profile import DEFAULT_PARAMS
from sim import scenario as sc

streamlit = pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VIEWS = ROOT / "app" / "explorer" / "views"
PAGES = sorted(p.stem for p in VIEWS.glob("*.py"))
TIMEOUT = 240  # seconds per script run: CI is a busy 2-core box


def page(name: str) -> AppTest:
    return AppTest.from_file(str(VIEWS / f"{name}.py"), default_timeout=TIMEOUT)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def runs_table(at: AppTest):
    assert len(at.table) >= 1, errors(at)
    return at.table[0].value


# ---------------------------------------------------------------------------------- pages
def test_every_page_is_listed():
    assert set(PAGES) == {"home", "netns", "hackbench", "urcu", "rcu_sync", "timers", "lab", "ab", "machine"}
    main = (ROOT / "app" / "explorer" / "main.py").read_text()
    for p in PAGES:
        assert f'"{p}.py"' in main


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_exception(name):
    at = page(name).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at)
    assert at.title, "every page has a title"


def test_home_says_which_engine_runs():
    from sim import compiled

    at = page("home").run()
    captions = [c.value for c in at.caption]
    assert f"Simulation engine: {compiled.status()[1]}." in captions, captions


def test_main_navigates_to_every_page():
    at = AppTest.from_file(str(ROOT / "app" / "explorer" / "main.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert at.title[0].value == "rcusim explorer"
    at.switch_page("views/timers.py").run()
    assert not at.exception
    assert "timer" in at.title[0].value


def test_machine_page_shows_the_bundled_calibration_and_predicts_the_composites():
    at = page("machine").run()
    assert not at.exception and not errors(at)
    facts = at.table[0].value
    assert facts.loc["kernel", "value"] and facts.loc["CPUs", "value"] == "2"
    costs = at.dataframe[0].value
    assert {"context_switch", "idle_hrtimers_per_s"} <= set(costs["parameter"])
    assert set(costs["method"]) <= {"direct", "fit", "spread", "default"}
    # each value in its unit, as the params file writes it: ns, a rate per second, a ratio
    by = dict(zip(costs["parameter"], costs["value"], strict=True))
    written = load_params(DEFAULT_PARAMS).costs
    assert by["context_switch"] == f"{written['context_switch']} ns" and by["jitter_cv"] == f"{written['jitter_cv']:.3f}"
    assert by["other_call_rcu_per_s"] == f"{written['other_call_rcu_per_s']:.2f} /s"
    at.number_input(key="machine|seeds").set_value(1)
    at.button(key="machine|run").click().run()
    assert not at.exception and not errors(at)
    composites = at.table[-1].value
    assert {"messaging time", "netns fake routers", "PI-futex throughput"} <= set(composites["composite"])
    assert all(e.endswith("%") for e in composites["error"])


def test_machine_page_upload_without_a_file_and_bad_files():
    from sim.errors import ConfigError

    at = page("machine").run()
    at.radio(key="machine|profile").set_value("upload a profile (JSON from rcusim collect)").run()
    assert not at.exception and not errors(at)  # no file yet: no report, no error
    assert "No file yet." in [c.value for c in at.caption]
    for data, match in ((b"{nope", "not valid JSON"), (b'{"a": 1}', "kind"), (b"", "empty")):
        with pytest.raises(ConfigError, match=match):
            core.report_from_json(data, "p.json")


def test_gp_distribution_rows_compare_the_machine_and_the_model():
    from app.explorer import core

    rep = core.bundled_report()
    rows = core.gp_distribution_rows(rep, busy=True, calls=100)
    for source in ("measured", "model"):
        part = [r for r in rows if r["source"] == source]
        assert part and sum(r["share"] for r in part) == pytest.approx(1.0)
        # both have the two modes of the busy grace period, 2 jiffies apart at HZ 250
        assert any(6 < r["ms"] < 8 and r["share"] > 0.05 for r in part)
        assert any(14 < r["ms"] < 16 and r["share"] > 0.3 for r in part)
    item = rep.profile.items["membarrier_global_busy"]
    assert sum(r["share"] for r in rows if r["source"] == "measured" and r["ms"] < 11) == pytest.approx(
        sum(v < 11e6 for v in item.samples) / len(item.samples)
    )
    # idle: mostly fast, and the model's slow calls come from the seeds that put the machine's other
    # processes on CPU 1 (the bundled profile measures them, collector 0.15.0)
    idle = [r for r in core.gp_distribution_rows(rep, busy=False, calls=400) if r["source"] == "model"]
    slow = sum(r["share"] for r in idle if r["ms"] > 11)
    assert 0 < slow < 0.3 and sum(r["share"] for r in idle) == pytest.approx(1.0)
    raw = rep.profile.model_copy(update={"items": {k: v for k, v in rep.profile.items.items() if k != "membarrier_global"}})
    assert core.gp_distribution_rows(dataclasses.replace(rep, profile=raw), busy=False) == []


def test_story_pages_say_when_a_story_is_not_modelled():
    from calibration import stories

    for story, p in content.STORY_PAGES.items():
        at = page(_view_of(story)).run()
        text = " ".join(m.value for m in at.info) + " ".join(m.value for m in at.warning)
        if stories.get(story) is None:
            assert "not modelled yet" in text, story
        assert p.explanation.strip()[:30] in " ".join(m.value for m in at.markdown)


def _view_of(story: str) -> str:
    return {
        "netns-2014": "netns",
        "hackbench-rt-2008": "hackbench",
        "urcu-membarrier-2020": "urcu",
        "rcu-sync-2015": "rcu_sync",
        "timers-2023": "timers",
    }[story]


# ---------------------------------------------------------------------------------- knobs change results
NETNS = "story:netns-2014|netns-2014|"


def test_netns_changing_nocb_and_running_changes_the_rate():
    at = page("netns").run()
    at.number_input(key=NETNS + "workload.routers").set_value(40)
    at.button(key="story:netns-2014|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    at.selectbox(key=NETNS + "kernel.rcu.nocb").set_value("all")
    at.button(key="story:netns-2014|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    table = runs_table(at)
    assert len(table) == 2
    labels = list(table.index)
    assert "nocb=none" in labels[0] and "nocb=all" in labels[1]
    none, all_ = (float(str(v).replace(",", "")) for v in table["routers_per_s"])
    assert none != all_
    # the page shows exactly what the library computes for the same scenario
    cat = core.catalog()
    data = sc.load(ROOT / "scenarios" / "netns-2014.toml")
    fit, _ = core.resolve_fitted(core.canonical(core.validate(data, cat)), core.story_fit("netns-2014"))
    over = {**fit, **content.NETNS.quick["netns-2014"], "workload.routers": 40, "kernel.rcu.nocb": "all"}
    res = sc.run(core.validate(core.apply(data, over), cat), cat)
    assert float(str(table["routers_per_s"].iloc[1]).replace(",", "")) == pytest.approx(res.metrics["routers_per_s"], rel=1e-3)


def test_a_run_offers_its_figure_as_a_png():
    at = page("netns").run()
    at.number_input(key=NETNS + "workload.routers").set_value(40)
    at.button(key="story:netns-2014|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    assert "Figure (PNG)" in [b.label for b in at.get("download_button")]
    (run,) = at.session_state["story:netns-2014|runs"]
    png = at.session_state["_run_figures"][run["toml"]]
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == core.run_figure_png(run["out"].result)


def test_lab_changing_a_knob_changes_the_result():
    at = page("lab").run()
    assert not errors(at)
    at.radio(key="lab|profile").set_value("the scenario's own values").run()
    prefix = "lab|messaging-demo|messaging|own|"
    for key, value in (("workload.groups", 1), ("workload.senders", 3), ("workload.receivers", 3), ("workload.loops", 10)):
        at.number_input(key=prefix + key).set_value(value)
    at.button(key="lab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    at.number_input(key=prefix + "machine.cpus").set_value(1)
    at.button(key="lab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    table = runs_table(at)
    assert len(table) == 2
    col = next(c for c in table.columns if c.endswith("per_s"))
    assert table[col].iloc[0] != table[col].iloc[1]


def test_lab_uses_the_bundled_profile_by_default():
    at = page("lab").run()
    captions = " ".join(c.value for c in at.caption)
    assert "bundled: default.json" in captions


def test_ab_shows_an_interval_and_a_verdict():
    at = page("ab").run()
    k = "ab|netns-2014"
    assert at.multiselect(key=k + "|differ").value == ["kernel.rcu.nocb"]
    at.number_input(key=k + "|both|workload.routers").set_value(30)
    at.number_input(key="ab|reps").set_value(3)
    at.button(key="ab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    interval = next(m for m in at.metric if "interval" in m.label)
    assert interval.value.startswith("[") and interval.value.count("%") == 2
    verdicts = [m.value for m in at.success] + [m.value for m in at.warning] + [m.value for m in at.info]
    assert any("paired runs" in v for v in verdicts), verdicts


# ---------------------------------------------------------------------------------- bad input
def test_bad_duration_shows_the_message_not_a_traceback():
    at = page("netns").run()
    at.number_input(key=NETNS + "workload.routers").set_value(20)
    at.text_input(key=NETNS + "workload.setup_net").set_value("fast")
    at.button(key="story:netns-2014|run").click().run()
    assert not at.exception
    msgs = errors(at)
    assert len(msgs) == 1
    assert "workload.setup_net" in msgs[0] and "cannot read duration" in msgs[0]


def test_bad_cpu_list_shows_the_message():
    at = page("netns").run()
    at.selectbox(key=NETNS + "kernel.rcu.nocb").set_value(core.LIST_CHOICE).run()
    at.text_input(key=NETNS + "kernel.rcu.nocb|list").set_value("x, y")
    at.button(key="story:netns-2014|run").click().run()
    assert not at.exception
    msgs = errors(at)
    assert msgs and "kernel.rcu.nocb" in msgs[0]


# ---------------------------------------------------------------------------------- core: knob forms
@pytest.mark.parametrize("name", core.bundled_scenarios())
def test_widget_round_trip_changes_nothing(name):
    """Every knob of every bundled scenario, shown in its widget and read back, is the same
    value: a page that is only looked at runs exactly the bundled scenario."""
    cat = core.catalog()
    scn = core.validate(core.load_bundled(name), cat)
    canon = core.canonical(scn)
    knobs = core.all_knobs(scn, cat)
    values = {}
    for key, knob in knobs.items():
        w = core.to_widget(knob, core.get_path(canon, key))
        values[key] = core.from_widget(knob, w)
    assert core.changed(knobs, values, canon) == {}


def test_new_knobs_appear_by_themselves():
    """The forms come from the dataclasses: every field that rcusim knobs lists is a knob."""
    from sim.config import describe

    cat = core.catalog()
    scn = core.validate(core.load_bundled("messaging-demo"), cat)
    keys = set(core.all_knobs(scn, cat))
    for name, mech in cat.mechanisms.items():
        for row in describe(mech.config, f"kernel.{name}."):
            assert row[0] in keys


def test_knob_kinds():
    cat = core.catalog()
    scn = core.validate(core.load_bundled("netns-2014"), cat)
    knobs = core.all_knobs(scn, cat)
    assert knobs["kernel.rcu.nocb"].kind == "choice_or_list"
    assert knobs["kernel.rcu.nocb"].choices == ("none", "all")
    assert knobs["machine.cpus"].kind == "int" and knobs["machine.cpus"].lo == 1
    assert knobs["costs.context_switch"].kind == "duration"
    assert knobs["kernel.rcu.jiffies_till_first_fqs"].kind == "optional"
    assert knobs["kernel.nohz_idle"].kind == "bool"
    assert knobs["costs.jitter_cv"].kind == "float"
    assert "source" not in knobs["machine.cpus"].help or knobs["machine.cpus"].source


def test_fmt_duration_is_exact():
    from sim.units import parse_duration

    for ns in (0, 1, 999, 1000, 1500, 3536, 2_000_000, 1_234_567, 10**9, 3 * 10**9 + 1):
        assert parse_duration(core.fmt_duration(ns)) == ns


def test_resolve_fitted_names_unique_keys():
    canon = {"workload": {"mount_cost": 1, "x": 2}, "kernel": {"timers": {"timer_op": 3}, "x": 4}}
    out, skipped = core.resolve_fitted(canon, {"mount_cost": 10, "timer_op": 5, "x": 9, "nope": 1})
    assert out == {"workload.mount_cost": 10, "kernel.timers.timer_op": 5}
    assert skipped == ["x", "nope"]


# ---------------------------------------------------------------------------------- core: reproduction
SMALL = {"workload.groups": 1, "workload.senders": 3, "workload.receivers": 3, "workload.loops": 10, "scenario.seed": 7}


def test_scenario_toml_reproduces_the_run_on_the_cli(tmp_path, capsys):
    from app.cli import main

    cat = core.catalog()
    scn = core.validate(core.apply(core.load_bundled("messaging-demo"), SMALL), cat)
    text = core.scenario_toml(scn, header="test")
    out = core.run_toml(core.scenario_key(scn), trace=False)
    f = tmp_path / "s.toml"
    f.write_text(text)
    assert main(["run", str(f), "--json", "--no-progress"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["metrics"] == out.result["metrics"]
    assert cli["seed"] == 7


def test_results_csv_has_one_row_per_run():
    import csv
    import io

    cat = core.catalog()
    scn = core.validate(core.apply(core.load_bundled("messaging-demo"), SMALL), cat)
    out = core.run_toml(core.scenario_key(scn), trace=False)
    text = core.results_csv([("a", out.result), ("b", out.result)])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["run"] for r in rows] == ["a", "b"]
    assert float(rows[0]["messages_per_s"]) == pytest.approx(out.result["metrics"]["messages_per_s"])


def test_timeline_from_a_trace():
    cat = core.catalog()
    over = {"workload.routers": 6, "workload.report_every": 3, "workload.steps": "add", "kernel.rcu.nocb": "all"}
    scn = core.validate(core.apply(core.load_bundled("netns-2014"), over), cat)
    out = core.run_toml(core.scenario_key(scn), trace=True)
    assert out.trace is not None
    doc = core.parse_trace(out.trace)
    names = [t.name for t in core.trace_tracks(doc)]
    assert "CPU 0" in names and "RCU grace periods" in names
    kthreads = core.kthread_names(doc)
    assert any(n.startswith("rcuo") for n in kthreads), kthreads
    t0, t1 = core.default_window_us(doc)
    assert t1 > t0
    spans, instants, truncated = core.timeline_rows(doc, t0, t1, kthreads)
    rows = core.row_order(r["row"] for r in spans)
    assert rows[0].startswith("CPU ")
    assert any(r.startswith("task rcuo") for r in rows) or any(r == "RCU grace periods" for r in rows)
    assert all(t0 / 1000 <= s["start_ms"] <= s["end_ms"] <= t1 / 1000 for s in spans)
    gp = core.model_span_rows(doc)
    assert gp and all(g["dur_ms"] >= 0 for g in gp)


def test_plain_verdict_words():
    from calibration.prescreen import Comparison, Effect, ModelError

    e = Effect("rate", "higher", 100.0, 50.0, -0.5, -0.6, -0.4, "regresses", "unknown")
    comp = Comparison("A", "B", [], 5, [1, 2, 3, 4, 5], 0.95, ModelError(None, None, ""), [e])
    s = core.plain_verdict(comp, "rate")
    assert "worse" in s and "-50.0%" in s and "-60.0%" in s and "95%" in s
    e0 = Effect("rate", "higher", 100.0, 100.5, 0.005, -0.01, 0.02, "no detectable effect", "no")
    comp0 = Comparison("A", "B", [], 5, [1, 2, 3, 4, 5], 0.95, ModelError(None, None, ""), [e0])
    assert "no detectable difference" in core.plain_verdict(comp0, "rate")


def test_profile_upload_errors_are_one_line():
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="not valid JSON"):
        core.profile_from_json(b"{nope", "p.json")
    with pytest.raises(ConfigError, match="kind"):
        core.profile_from_json(b'{"a": 1}', "p.json")
    with pytest.raises(ConfigError, match="empty"):
        core.profile_from_json(b"", "p.json")


def test_bundled_profile_gives_costs_and_machine():
    prof = core.bundled_profile()
    assert prof.costs and prof.cpus and prof.hz
    data = core.apply_profile({"workload": {"kind": "messaging"}}, prof, None, 100)
    assert data["kernel"]["hz"] == 100 and data["costs"] == prof.costs
    core.validate(data)


# ---------------------------------------------------------------------------------- verb and layering
def test_app_verb_dry_run(capsys):
    from app.cli import main

    assert main(["app", "--port", "8600", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "streamlit run" in out and "main.py" in out
    assert "--browser.gatherUsageStats false" in out and "--server.headless true" in out and "8600" in out


def test_app_verb_bad_port(capsys):
    from app.cli import main

    assert main(["app", "--port", "0"]) == 2
    assert "--port" in capsys.readouterr().err


def test_models_and_sim_never_import_streamlit():
    code = "import sys, sim.scenario, models, calibration.prescreen; models.catalog(); print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_story_pages_name_existing_stories():
    from calibration import stories

    assert set(content.STORY_PAGES) == set(stories.NAMES)
    for p in content.STORY_PAGES.values():
        assert p.explanation.count("\n\n") >= 2, "a few paragraphs"
        assert p.try_next and p.published


def test_series_rows_long_form():
    res = {"series": {"rate": [{"routers": 25, "per_s": 10.0}, {"routers": 50, "per_s": 8.0}]}}
    rows = core.series_rows([("r", res)])
    assert [(r["x"], r["y"]) for r in rows] == [(25.0, 10.0), (50.0, 8.0)]
    assert rows[0]["x_name"] == "routers" and rows[0]["y_name"] == "per_s"
    assert math.isnan(core._num("x"))


def test_validation_tab_shows_published_and_simulated(monkeypatch):
    """The story page runs the story's validation and shows fitted and predicted rows, with
    a miss reported as a miss (a stand-in story keeps the test quick)."""
    from app.explorer import ui
    from calibration import stories
    from calibration.validation import Row, Story

    def rows(opts):
        if opts.progress is not None:
            opts.progress("step", 1.0)
        return [
            Row("netns-2014", "rate", "4 CPU nocbno", 40.0, 41.0, "routers/s", "fitted", None, "seed"),
            Row("netns-2014", "ratio", "4 CPU", 0.5, 0.2, "ratio", "predicted", 0.25, "seed"),
            Row("netns-2014", "rate", "1 CPU nocbno", 40.0, 44.0, "routers/s", "fitted", None, "seed"),
        ]

    fake = Story("netns-2014", "t", "seed", "m", rows, {"figures": {"a": 1.0}})
    monkeypatch.setattr(stories, "get", lambda name: fake if name == "netns-2014" else None)
    ui.cached_story_rows.clear()
    at = page("netns").run()
    at.number_input(key="val|netns-2014|seeds").set_value(2)
    at.button(key="val|netns-2014|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    table = at.table[-1].value
    assert list(table["role"]) == ["fitted", "predicted", "fitted"]
    assert list(table["rel_error"]) == ["+2.5%", "-60.0%", "+10.0%"]
    assert list(table["ok"]) == [True, False, False]
    assert any("miss their target" in w.value for w in at.warning)
    assert any("1 fitted anchor(s) drifted" in w.value and "netns_2014 --fit" in w.value for w in at.warning)
    # the same rows as a chart: each error on its tolerance band, a miss red, a fitted anchor hollow
    import pyarrow as pa

    (chart,) = at.get("vega_lite_chart")
    data = pa.ipc.open_stream(chart.proto.datasets[0].data.data).read_pandas().to_dict("records")
    assert [(d["row"], d["error %"], d["within"], d["role"]) for d in data] == [
        ("rate (4 CPU nocbno)", pytest.approx(2.5), "yes", "fitted"),
        ("ratio (4 CPU)", pytest.approx(-60.0), "MISS", "predicted"),
        ("rate (1 CPU nocbno)", pytest.approx(10.0), "MISS", "fitted"),
    ]
    assert [d["tolerance %"] for d in data] == pytest.approx([5.0, 25.0, 5.0])
    ui.cached_story_rows.clear()


def test_validation_chart_cuts_a_huge_error_at_three_tolerances():
    rows = [
        {"metric": "a", "config": "", "role": "predicted", "rel_error": 10.23, "tolerance": 1.0, "ok": False},
        {"metric": "b", "config": "x", "role": "predicted", "rel_error": -0.1, "tolerance": 0.25, "ok": True},
        {"metric": "c", "config": "", "role": "predicted", "rel_error": None, "tolerance": 0.25, "ok": False},
    ]
    data, limit = core.validation_chart_rows(rows)
    assert limit == 300.0 and [d["row"] for d in data] == ["a", "b (x)"]
    assert data[0]["error % (drawn)"] == 300.0 and data[0]["clipped"] == "+1,023%"
    assert data[1]["error % (drawn)"] == pytest.approx(-10.0) and not data[1]["clipped"]


@pytest.mark.parametrize("story", sorted(content.STORY_PAGES))
def test_every_story_page_runs_its_scenario(story):
    """Run on every story page whose scenario exists: a runs table, no error, no exception."""
    p = content.STORY_PAGES[story]
    if not any((ROOT / "scenarios" / f"{s}.toml").is_file() for s in p.scenarios):
        pytest.skip(f"no scenario of {story} is bundled yet")
    at = page(_view_of(story)).run()
    at.button(key=f"story:{story}|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    table = runs_table(at)
    assert len(table) == 1
    assert len(table.columns) >= 2


# ---------------------------------------------------------------------------------- audit fixes
def _charts(at: AppTest) -> list[dict]:
    """The Vega-Lite specs of the page's charts, in page order."""
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _runs_data(at: AppTest, prefix: str) -> list[dict]:
    """The complete scenarios (TOML, as run) of the runs on a page."""
    import tomllib

    return [tomllib.loads(r["toml"]) for r in at.session_state[f"{prefix}|runs"]]


def test_table_knobs_round_trip_and_are_shown_read_only():
    """costs.tick_busy (one measured row per jiffy) is a table: written and read back as one
    TOML value, never split on commas; the pages show it read-only and carry it through."""
    cat = core.catalog()
    prof = core.bundled_profile()
    assert prof.costs["tick_busy"], "the bundled profile measures the tick table"
    scn = core.validate(core.apply_profile(core.load_bundled("messaging-demo"), prof, None, None), cat)
    canon = core.canonical(scn)
    knobs = core.all_knobs(scn, cat)
    knob = knobs["costs.tick_busy"]
    assert knob.kind == "table" and knobs["costs.other_gaps"].kind == "list"
    back = core.from_widget(knob, core.to_widget(knob, canon["costs"]["tick_busy"]))
    assert back == [list(r) for r in prof.costs["tick_busy"]]
    values = {key: core.from_widget(k, core.to_widget(k, core.get_path(canon, key))) for key, k in knobs.items()}
    assert core.changed(knobs, values, canon) == {}
    rows = len(prof.costs["tick_busy"])
    assert core.read_only(knob, canon["costs"]["tick_busy"]) == f"measured table, {rows:,} rows of 2 values"
    assert core.read_only(knobs["costs.other_gaps"], [1000, 2000]) is None  # a short list stays editable
    assert core.read_only(knobs["costs.other_gaps"], list(range(1, 500))) == "measured list, 499 values"


def test_lab_runs_with_the_bundled_profile_costs():
    at = page("lab").run()
    assert at.radio(key="lab|profile").value == "bundled profile"
    captions = " ".join(c.value for c in at.caption)
    rows = len(core.bundled_profile().costs["tick_busy"])
    assert f"`costs.tick_busy`: measured table, {rows:,} rows" in captions
    assert not [t for t in at.text_input if t.key.endswith("costs.tick_busy")], "no text field holds the table"
    at.button(key="lab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    (data,) = _runs_data(at, "lab")
    assert data["costs"]["tick_busy"] == [list(r) for r in core.bundled_profile().costs["tick_busy"]]


def with_uploaded_profile(name: str) -> AppTest:
    """Page ``name`` (``lab`` or ``machine``) with the bundled profile uploaded as mine.json."""
    at = page(name).run()
    at.radio(key=f"{name}|profile").set_value("upload a profile (JSON from rcusim collect)").run()
    raw = (ROOT / "calibration" / "profiles" / "default.json").read_bytes()
    at.file_uploader(key=f"{name}|upload").set_value(("mine.json", raw, "application/json")).run()
    assert not at.exception and not errors(at), errors(at)
    return at


def test_lab_runs_with_an_uploaded_profile():
    at = with_uploaded_profile("lab")
    assert "uploaded: mine.json" in " ".join(c.value for c in at.caption)
    at.button(key="lab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    (data,) = _runs_data(at, "lab")
    assert len(data["costs"]["tick_busy"]) > 10


def test_ab_builds_the_knob_grid_of_every_bundled_scenario():
    at = page("ab").run()
    for name in core.bundled_scenarios():
        at.selectbox(key="ab|scenario").set_value(name).run()
        assert not at.exception, (name, [e.value for e in at.exception])
        assert not errors(at), (name, errors(at))
    # the urcu page's quick size is a string with a unit: shown as it is, not int()'d
    at.selectbox(key="ab|scenario").set_value("urcu-membarrier-2020").run()
    assert at.text_input(key="ab|urcu-membarrier-2020|both|workload.duration").value == "300 ms"


def test_durations_with_a_unit_are_shown_in_widgets():
    knob = core.Knob("workload.duration", "duration", "duration", "", unit="ns")
    assert core.to_widget(knob, "300 ms") == "300 ms" and core.to_widget(knob, 1_500_000) == "1.5 ms"
    from sim.units import parse_duration

    assert parse_duration(core.from_widget(knob, core.to_widget(knob, "300 ms"))) == 300_000_000
    assert core.to_widget(knob, "fast") == "fast"  # the scenario's validation names it on Run


def _fake_comparison(effects, error=None, source="not judged on this page"):
    from calibration.prescreen import Comparison, ModelError

    runs = [{e.metric: e.base_mean for e in effects} for _ in range(3)]
    runs_b = [{e.metric: e.patch_mean for e in effects} for _ in range(3)]
    return Comparison("A", "B", [], 3, [11, 12, 13], 0.95, ModelError(None, error, source), effects, runs, runs_b)


def _ab_with(monkeypatch, comp, scenario="netns-2014", setup=None):
    """The A/B page with ``comp`` as the comparison its runs give (no simulation); returns the
    page and the TOML of both sides as the page passed them."""
    from app.explorer import ui

    asked = {}

    def fake(toml_a, toml_b, replications, confidence, error, error_source, story):
        asked.update(a=toml_a, b=toml_b, error=error, source=error_source)
        return comp

    monkeypatch.setattr(ui, "cached_compare", fake)
    at = page("ab").run()
    if scenario != "netns-2014":
        at.selectbox(key="ab|scenario").set_value(scenario).run()
    if setup is not None:
        setup(at)
    at.button(key="ab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    return at, asked


def test_ab_does_not_offer_the_seed_the_base_seed_box_sets(monkeypatch):
    import tomllib

    from calibration.prescreen import Effect

    comp = _fake_comparison([Effect("routers_per_s", "higher", 10.0, 5.0, -0.5, -0.6, -0.4, "regresses", "unknown")])

    def setup(at):
        k = "ab|netns-2014"
        assert "scenario.seed" not in at.multiselect(key=k + "|differ").options
        assert "scenario.seed" not in at.multiselect(key=k + "|common").options
        at.number_input(key="ab|seed").set_value(42)

    at, asked = _ab_with(monkeypatch, comp, setup=setup)
    assert tomllib.loads(asked["a"])["scenario"]["seed"] == 42 == tomllib.loads(asked["b"])["scenario"]["seed"]


LAB_OWN = "lab|messaging-demo|messaging|own|"


def test_lab_hand_set_cpus_and_hz_keep_edits_and_win():
    at = page("lab").run()
    at.radio(key="lab|profile").set_value("the scenario's own values").run()
    at.number_input(key=LAB_OWN + "workload.loops").set_value(7).run()
    at.checkbox(key="lab|hand").check().run()
    assert not at.exception and not errors(at), errors(at)
    # ticking changes nothing by itself: the edit stays, and CPUs and HZ start from the scenario's
    assert at.number_input(key=LAB_OWN + "workload.loops").value == 7
    own = core.canonical(core.validate(core.load_bundled("messaging-demo")))
    assert at.number_input(key="lab|hz").value == own["kernel"]["hz"] == 1000
    assert at.number_input(key="lab|cpus").value == own["machine"]["cpus"]
    # one source of truth: while hand-set, the forms do not show machine.cpus and kernel.hz
    keys = {w.key for w in at.number_input}
    assert LAB_OWN + "machine.cpus" not in keys and LAB_OWN + "kernel.hz" not in keys
    at.number_input(key="lab|cpus").set_value(2).run()
    at.number_input(key="lab|hz").set_value(250).run()
    assert at.number_input(key=LAB_OWN + "workload.loops").value == 7, "changing CPUs or HZ keeps the edits"
    at.number_input(key=LAB_OWN + "workload.groups").set_value(1)
    at.number_input(key=LAB_OWN + "workload.loops").set_value(2)
    at.button(key="lab|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    (data,) = _runs_data(at, "lab")
    assert data["machine"]["cpus"] == 2 and data["kernel"]["hz"] == 250
    # unticking hands the values to the forms: still 2 CPUs and HZ 250
    at.checkbox(key="lab|hand").uncheck().run()
    assert at.number_input(key=LAB_OWN + "machine.cpus").value == 2
    assert at.number_input(key=LAB_OWN + "kernel.hz").value == 250
    assert at.number_input(key=LAB_OWN + "workload.loops").value == 2


def test_lab_hand_set_starts_from_the_form():
    at = page("lab").run()
    at.radio(key="lab|profile").set_value("the scenario's own values").run()
    at.number_input(key=LAB_OWN + "machine.cpus").set_value(3).run()
    at.checkbox(key="lab|hand").check().run()
    assert at.number_input(key="lab|cpus").value == 3


def test_ab_result_layout_and_a_huge_effect(monkeypatch):
    from calibration.prescreen import Effect

    effects = [
        Effect("rcu.synchronize_mean_ms", "lower", 1.0, 555.66, 554.66, 550.0, 560.0, "regresses", "unknown"),
        Effect("rcu.synchronize_calls", "lower", 100.0, 101.0, 0.01, -0.02, 0.04, "no detectable effect", "no"),
        Effect("routers_per_s", "higher", 250.0, 25.0, -0.9, -0.901, -0.899, "regresses", "unknown"),
        Effect("time_s", "lower", 1.0, 1.2, 0.2, 0.15, 0.25, "regresses", "unknown"),
    ]
    at, _ = _ab_with(monkeypatch, _fake_comparison(effects))
    # the runs CSV sits beside A (TOML) and B (TOML), not under a metric
    blocks = [b for b in at.main.children.values() if getattr(b, "type", "") == "flex_container"]
    downloads = [
        b
        for b in blocks
        if any(getattr(ch, "label", "") == "A (TOML)" for col in b.children.values() for ch in col.children.values())
    ]
    assert len(downloads) == 1
    labels = [getattr(ch, "label", "") for col in downloads[0].children.values() for ch in col.children.values()]
    assert labels == ["A (TOML)", "B (TOML)", "Runs (CSV)"]
    metric_cols = next(
        b
        for b in blocks
        if any(getattr(ch, "label", "") == "A mean" for col in b.children.values() for ch in col.children.values())
    )
    assert all(ch.type == "metric" for col in metric_cols.children.values() for ch in col.children.values())
    # the interval in a short form, and in full words in a caption
    interval = next(m for m in at.metric if "interval" in m.label)
    assert interval.value == "[-90.1%, -89.9%]"
    assert any("from -90.1% to -89.9%" in c.value for c in at.caption)
    # the chart: the +55,466 % effect is cut at the axis limit and marked, the others keep their scale
    spec = _charts(at)[-1]
    text = json.dumps(spec)
    assert '"labelLimit": 0' in text, "full metric names, never rcu.synchronize_… twice"
    domain = next(
        lay["encoding"]["x"]["scale"]["domain"] for lay in spec["layer"] if "scale" in lay.get("encoding", {}).get("x", {})
    )
    assert domain[1] < 1000 and domain[0] < -90
    rows, limit, _ = core.effect_chart_rows(_fake_comparison(effects))
    clipped = {r["metric"]: r["clipped"] for r in rows}
    assert clipped["rcu.synchronize_mean_ms"] == "+55,466% (off the axis)" and limit is not None and limit < 1000
    assert not clipped["time_s"] and not clipped["routers_per_s"]
    assert any(lay["mark"].get("type") == "text" for lay in spec["layer"] if isinstance(lay.get("mark"), dict))
    assert any("rcu.synchronize_mean_ms +55,466%" in c.value and "cut at +" in c.value for c in at.caption)


def test_effect_chart_does_not_cut_comparable_effects():
    from calibration.prescreen import Effect

    effects = [
        Effect("a", "higher", 1.0, 1.5, 0.5, 0.4, 0.6, "improves", "unknown"),
        Effect("b", "higher", 1.0, 0.8, -0.2, -0.3, -0.1, "regresses", "unknown"),
    ]
    rows, limit, domain = core.effect_chart_rows(_fake_comparison(effects))
    assert limit is None and all(not r["clipped"] for r in rows)
    assert domain[0] < -30 and domain[1] > 60


def test_ab_verdicts_agree_and_say_whose_error(monkeypatch):
    """With an error the user typed (1000 %): every sentence calls it "the model error you
    entered", the overall sentence names the metrics each judgement is about (so it cannot
    contradict the headline), and a change of unknown direction is shown in a neutral box."""
    from calibration.prescreen import Effect

    effects = [
        Effect("ns_per_enqueue_dequeue", None, 145.0, 118.2, -0.185, -0.19, -0.18, "changes", "no"),
        Effect("rcu.synchronize_mean_ms", "lower", 1.0, 555.66, 554.66, 550.0, 560.0, "regresses", "yes"),
        Effect("requests_per_s", "higher", 100.0, 110.0, 0.1, 0.05, 0.15, "improves", "no"),
    ]
    comp = _fake_comparison(effects, error=10.0, source="entered on the page")

    def setup(at):
        at.selectbox(key="ab|errmode").set_value("a model error I enter").run()
        at.number_input(key="ab|err").set_value(1000.0)

    at, asked = _ab_with(monkeypatch, comp, setup=setup)
    assert asked["error"] == pytest.approx(10.0) and asked["source"] == "entered on the page"
    at.selectbox(key="ab|metric").set_value("ns_per_enqueue_dequeue").run()
    assert not at.success, "a change of unknown direction is neither good nor bad"
    head = next(m.value for m in at.info if "ns_per_enqueue_dequeue" in m.value)
    assert "within the model error you entered (1000%)" in head and "validated" not in head
    overall = next(c.value for c in at.caption if c.value.startswith("Overall:"))
    assert "validated" not in overall
    worth, _, rest = overall.partition("worth a lab run:")
    assert "beyond the model error you entered (1000%)" in worth
    assert "rcu.synchronize_mean_ms" in rest.split(";")[0] and "ns_per_enqueue_dequeue" not in rest.split(";")[0]
    assert "ns_per_enqueue_dequeue" in rest.split(";")[1] and "requests_per_s" in rest.split(";")[1]
    at.selectbox(key="ab|metric").set_value("requests_per_s").run()
    assert any("requests_per_s better" in m.value for m in at.success)


def test_overall_verdict_with_a_validated_error():
    from calibration.prescreen import Effect

    e = Effect("rate", "higher", 100.0, 50.0, -0.5, -0.6, -0.4, "regresses", "yes")
    comp = _fake_comparison([e], error=0.25, source="netns-2014: declared validated error")
    assert "the model's validated error (25%)" in core.plain_verdict(comp, "rate")
    assert core.overall_verdict(comp).endswith("beyond the model's validated error (25%), worth a lab run: rate (-50.0%)")
    none = _fake_comparison([Effect("rate", "higher", 1.0, 1.0, 0.0, -0.1, 0.1, "no detectable effect", "no")])
    assert core.overall_verdict(none) == "no detectable effect on any metric at 95% confidence: not worth a lab run"


def test_machine_page_uploaded_profile_caption_is_true():
    at = with_uploaded_profile("machine")
    costs = at.dataframe[0].value
    with_ci = [p for p, ci in zip(costs["parameter"], costs["95% interval"], strict=True) if ci != "-"]
    assert with_ci and len(with_ci) < len(costs), "a one-seed calibration: some intervals, not all"
    caption = next(c.value for c in at.caption if c.value.startswith("uploaded: mine.json"))
    assert "no intervals" not in caption
    assert f"95% intervals only for the {len(with_ci)} rates counted directly ({', '.join(with_ci)}" in caption


def test_machine_page_composites_are_formatted_alike(monkeypatch):
    from app.explorer import ui

    rows = [
        {
            "metric": "m",
            "config": "c",
            "reference": 405659.0399,
            "simulated": 213784,
            "unit": "ns",
            "rel_error": -0.47,
            "ok": False,
        },
        {"metric": "n", "config": "c", "reference": 12.34567, "simulated": 12, "unit": "/s", "rel_error": -0.03, "ok": True},
    ]
    monkeypatch.setattr(ui, "cached_composite_rows", lambda key, seeds, _rep: rows)
    at = page("machine").run()
    at.button(key="machine|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    table = at.table[-1].value
    assert list(table["measured"]) == ["405,659", "12.35"]
    assert list(table["model"]) == ["213,784", "12"]


def test_machine_page_labels_every_microbenchmark():
    at = page("machine").run()
    rows = core.outcome_rows(core.bundled_report())
    spec = next(s for s in _charts(at) if "simulated vs measured" in json.dumps(s))
    bars = next(lay for lay in spec["layer"] if lay["mark"] == "bar" or lay["mark"].get("type") == "bar")
    axis = bars["encoding"]["y"]["axis"]
    assert axis["labelOverlap"] is False and axis["labelLimit"] == 0
    assert spec["height"] >= 24 * len(rows), "a row of at least 24 px per bar: room for its label"


def test_timers_runs_name_their_scenario():
    at = page("timers").run()
    at.button(key="story:timers-2023|run").click().run()
    at.selectbox(key="story:timers-2023|scenario").set_value("timers-idle").run()
    at.button(key="story:timers-2023|run").click().run()
    assert not at.exception and not errors(at), errors(at)
    labels = list(runs_table(at).index)
    assert len(labels) == 2
    assert labels[0].startswith("#1 timers-enqueue ") and labels[1].startswith("#2 timers-idle ")


def test_story_captions_write_fitted_durations_with_their_unit():
    at = page("netns").run()
    caption = next(c.value for c in at.caption if c.value.startswith("Starting from"))
    fit = core.story_fit("netns-2014")
    assert f"workload.mount_cost = {core.fmt_duration(fit['mount_cost'])}" in caption
    assert f"= {fit['mount_cost']}," not in caption and f"= {fit['mount_cost']};" not in caption


@pytest.mark.parametrize("name", ["gp-latency", "messaging-demo"])
def test_ab_says_before_the_run_when_a_and_b_are_identical(name):
    at = page("ab").run()
    assert not any("identical" in w.value for w in at.warning), "netns: A and B differ by default"
    at.selectbox(key="ab|scenario").set_value(name).run()
    assert not at.exception and not errors(at)
    assert any("A and B are identical" in w.value for w in at.warning)


def test_traced_hackbench_timeline_offers_the_busiest_locks_and_reruns_from_memo(monkeypatch):
    from app.explorer import ui

    at = page("hackbench").run()
    pre = "story:hackbench-rt-2008|hackbench-rt-2008|"
    at.number_input(key=pre + "workload.groups").set_value(3)
    at.checkbox(key=pre + "trace").check()
    at.button(key="story:hackbench-rt-2008|run").click().run()
    assert not at.exception and not errors(at)
    locks = [m for m in at.multiselect if m.label.startswith("locks to show")]
    assert locks and 0 < len(locks[0].options) <= ui.LOCK_CHOICES
    memo = dict(at.session_state["_trace_derived"])
    assert memo  # the trace's derived values, computed once
    scans = []  # a rerun (any widget change) takes them from the memo: no scan of the trace
    for name in ("task_names", "kthread_names", "lock_tracks", "busiest_lock_tracks", "default_window_us"):
        real = getattr(core, name)
        counted = functools.wraps(real)(lambda *a, _n=name, _f=real, **k: scans.append(_n) or _f(*a, **k))
        monkeypatch.setattr(core, name, counted)
    at.run()
    assert not at.exception and at.session_state["_trace_derived"].keys() == memo.keys() and scans == []
