"""The rcusim CLI: run, JSON output, traces, and one clear line for every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

SMALL = [
    "--set",
    "workload.groups=1",
    "--set",
    "workload.senders=3",
    "--set",
    "workload.receivers=3",
    "--set",
    "workload.loops=20",
]


def run_cli(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_run_prints_tables(capsys):
    rc, out, err = run_cli(["run", "messaging-demo", *SMALL], capsys)
    assert rc == 0, err
    assert "messages_per_s" in out and "CPUs" in out and "latency percentiles" in out


def test_run_json_is_one_object_and_deterministic(capsys):
    rc, out1, _ = run_cli(["run", "messaging-demo", "--json", "--seed", "5", *SMALL], capsys)
    assert rc == 0
    rc, out2, _ = run_cli(["run", "messaging-demo", "--json", "--seed", "5", *SMALL], capsys)
    a, b = json.loads(out1), json.loads(out2)
    assert a["metrics"]["messages"] == 3 * 3 * 20
    for d in (a, b):
        d.pop("wall_s")
    assert a == b
    rc, out3, _ = run_cli(["run", "messaging-demo", "--json", "--seed", "6", *SMALL], capsys)
    c = json.loads(out3)
    assert c["metrics"]["time_s"] != a["metrics"]["time_s"]  # jitter differs with the seed


def test_trace_file_parses_and_has_cpu_tracks(tmp_path, capsys):
    f = tmp_path / "t.json"
    rc, out, err = run_cli(["run", "messaging-demo", "--trace", str(f), *SMALL], capsys)
    assert rc == 0, err
    doc = json.loads(f.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"CPU 0", "CPU 3"} <= names
    kinds = {e["ph"] for e in doc["traceEvents"]}
    assert {"X", "i", "M"} <= kinds


def test_trace_limit_keeps_the_first_events_and_says_how_many_were_dropped(tmp_path, capsys):
    full, cut = tmp_path / "full.json", tmp_path / "cut.json"
    rc, _, err = run_cli(["run", "messaging-demo", "--trace", str(full), *SMALL], capsys)
    assert rc == 0 and "dropped" not in err
    rc, _, err = run_cli(["run", "messaging-demo", "--trace", str(cut), "--trace-limit", "40", *SMALL], capsys)
    assert rc == 0
    whole, head = json.loads(full.read_text()), json.loads(cut.read_text())
    kept = [e for e in head["traceEvents"] if e["ph"] != "M"]
    events = [e for e in whole["traceEvents"] if e["ph"] != "M"]
    assert kept == events[:40]
    assert head["otherData"] == {"dropped_events": len(events) - 40, "limit": 40}
    assert f"dropped {len(events) - 40:,} later ones; --trace-limit {len(events)} keeps them all" in err
    for bad, says in (
        (["--trace-limit", "0", "--trace", str(cut)], "must be at least 1"),
        (["--trace-limit", "5"], "given without --trace"),
    ):
        rc, _, err = run_cli(["run", "messaging-demo", *bad, *SMALL], capsys)
        assert rc == 2 and f"--trace-limit: {says}" in err, err


BAD = {
    "unknown key": ("[machine]\ncpus = 2\ncolor = 'red'\n[workload]\nkind = 'messaging'\n", "machine.color: unknown key"),
    "wrong type": ("[machine]\ncpus = 'four'\n[workload]\nkind = 'messaging'\n", "machine.cpus: expected an integer"),
    "negative cost": ("[costs]\ncontext_switch = '-2 us'\n[workload]\nkind = 'messaging'\n", "costs.context_switch"),
    "zero cpus": ("[machine]\ncpus = 0\n[workload]\nkind = 'messaging'\n", "machine.cpus: 0 is below the minimum 1"),
    "unknown section": (
        "[machin]\ncpus = 2\n[workload]\nkind = 'messaging'\n",
        "machin: unknown section (did you mean 'machine'?)",
    ),
    "no workload": ("[machine]\ncpus = 2\n", "workload.kind: is required"),
    "unknown workload": ("[workload]\nkind = 'messagin'\n", "did you mean 'messaging'"),
    "bad toml": ("[machine\ncpus = 2\n", "not valid TOML"),
    "bad duration": (
        "[scenario]\nduration = 'soon'\n[workload]\nkind = 'messaging'\n",
        "scenario.duration: cannot read duration",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_scenarios_give_one_line_and_exit_2(case, tmp_path, capsys):
    text, words = BAD[case]
    f = tmp_path / "bad.toml"
    f.write_text(text)
    rc, out, err = run_cli(["run", str(f)], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rcusim: error: ")
    assert words in lines[0]
    assert "Traceback" not in err


def test_bad_set_and_missing_file(capsys):
    rc, _, err = run_cli(["run", "messaging-demo", "--set", "kernel.preempt=ful"], capsys)
    assert rc == 2 and "did you mean 'full'" in err
    rc, _, err = run_cli(["run", "messaging-demo", "--set", "nonsense"], capsys)
    assert rc == 2 and "key=value" in err
    rc, _, err = run_cli(["run", "no-such-scenario"], capsys)
    assert rc == 2 and "bundled" in err


def test_unfinishable_scenario_is_a_clear_error(tmp_path, capsys):
    rc, _, err = run_cli(["run", "messaging-demo", *SMALL, "--set", "scenario.max_time=100us"], capsys)
    assert rc == 2 and "did not finish within scenario.max_time" in err


def test_help_explains_every_verb():
    out = subprocess.run([sys.executable, "-m", "app", "--help"], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert out.returncode == 0
    for verb in ("run", "list", "knobs"):
        assert f"  {verb}" in out.stdout


def test_list_and_knobs(capsys):
    rc, out, _ = run_cli(["list"], capsys)
    assert rc == 0 and "messaging-demo" in out
    rc, out, _ = run_cli(["knobs"], capsys)
    assert rc == 0 and "costs.context_switch" in out and "kernel/sched/fair.c" in out


def test_layering_sim_and_models_never_import_streamlit_or_upward():
    root = Path(__file__).parents[1]
    for pkg, banned in (("sim", ("models", "calibration", "app", "streamlit")), ("models", ("calibration", "app", "streamlit"))):
        for f in (root / pkg).rglob("*.py"):
            text = f.read_text()
            for b in banned:
                assert f"import {b}" not in text and f"from {b}" not in text, f"{f} imports {b}"


def test_validate_check_reports_a_stale_fit(monkeypatch, capsys):
    """A fitted row is held to the fit tolerance: an anchor that drifted (the model changed
    after the fit) fails --check and names the refit command; one within it passes."""
    from calibration import stories
    from calibration.validation import FIT_TOLERANCE, Row, Story

    drift = {"value": 1.0 + 2 * FIT_TOLERANCE}

    def rows(opts):
        return [Row("netns-2014", "rate", "4 CPU nocbno", 250.0, 250.0 * drift["value"], "routers/s", "fitted", None, "seed")]

    fake = Story("netns-2014", "t", "seed", "m", rows, {"figures": {"a": 1.0}})
    monkeypatch.setattr(stories, "get", lambda name: fake)
    rc, out, _ = run_cli(["validate", "netns-2014", "--check"], capsys)
    assert rc == 1
    assert "stale fit: netns-2014 'rate' (4 CPU nocbno) is +10.0% from its anchor" in out
    assert "python -m calibration.stories.netns_2014 --fit" in out
    drift["value"] = 1.0 + FIT_TOLERANCE / 2
    rc, out, _ = run_cli(["validate", "netns-2014", "--check", "--json"], capsys)
    row = json.loads(out)["rows"][0]
    assert rc == 0 and row["ok"] and row["tolerance"] == FIT_TOLERANCE and row["target"] is None


def test_validate_several_profiles_adds_each_figures_spread(capsys):
    # two collections of the development machine, each with its own params file
    pair = ["calibration/profiles/default.json", "calibration/profiles/history/dev-2026-11-22T2321.json"]
    rc, out, err = run_cli(["validate", "--profile", *pair, "--seeds", "1", "--json"], capsys)
    assert rc == 0, err
    assert "profile 1/2" in err and "profile 2/2" in err  # progress on stderr only
    doc = json.loads(out)
    rows = [r for r in doc["rows"] if r["role"] == "predicted"]
    assert {r["story"] for r in rows} == {"profile:default", "profile:dev-2026-11-22T2321"}
    spread = {(s["metric"], s["config"]): s for s in doc["spread"]}
    assert ("PI-futex throughput", "threads_2") in spread and ("messaging time", "groups_1") in spread
    for (metric, config), s in spread.items():
        mine = [r for r in rows if r["metric"] == metric and r["config"].split(":", 1)[0] == config]
        assert s["profiles"] == len(mine) == 2
        assert s["within_target"] == sum(r["ok"] for r in mine)
        errors = sorted(r["rel_error"] for r in mine)
        assert s["error_min"] == errors[0] and s["error_max"] == errors[-1]
        assert s["reference_min"] == min(r["reference"] for r in mine)
    # one profile: no spread
    rc, out, _ = run_cli(["validate", "--profile", pair[1], "--seeds", "1", "--json"], capsys)
    assert rc == 0 and "spread" not in json.loads(out)
    # one params file cannot serve two profiles
    rc, _, err = run_cli(["validate", "--profile", *pair, "--params", "calibration/profiles/default-params.toml"], capsys)
    assert rc == 2 and "--params" in err and "each profile then uses its PROFILE-params.toml" in err


def test_validate_workers_must_be_positive(capsys):
    rc, _, err = run_cli(["validate", "rcu-sync-2015", "--workers", "0", "--no-progress"], capsys)
    assert rc == 2 and "--workers: 0 is below 1 (use at least one worker)" in err


def test_validate_progress_bar_names_the_story_and_step(monkeypatch, capsys):
    """On a terminal each story gets a bar whose text says which story and which step."""
    import app.verbs.validate as v
    from calibration import stories
    from calibration.validation import Row, Story

    shown: list[str] = []

    class Bar:
        def __init__(self, label, enabled):
            self.enabled = enabled

        def __call__(self, frac, label=None):
            if self.enabled:
                shown.append(f"{label} {frac:.1f}")

        def close(self):
            shown.append("closed")

    def rows(opts):
        opts.progress("step one", 0.5)
        return [Row("rcu-sync-2015", "m", "c", 1.0, 1.0, "s", "predicted", 0.1, "seed")]

    monkeypatch.setattr(stories, "get", lambda name: Story("rcu-sync-2015", "t", "seed", "m", rows, {}))
    monkeypatch.setattr(v, "Progress", Bar)
    rc, _, _ = run_cli(["validate", "rcu-sync-2015"], capsys)
    assert rc == 0 and shown == ["rcu-sync-2015: step one 0.5", "closed"]
    shown.clear()
    rc, _, _ = run_cli(["validate", "rcu-sync-2015", "--no-progress"], capsys)
    assert rc == 0 and shown == ["closed"]
