"""Patch pre-screening (rcusim compare): patch files, common random numbers, effects with
bootstrap intervals, verdicts, the model's validated error, and one clear line for bad patches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from calibration import prescreen
from calibration.sweep import replication_seeds
from sim import scenario as sc
from sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "scenarios" / "messaging-demo.toml"
# Tiny messaging: 1 group of 3 senders x 3 receivers, 20 messages each way, 2 CPUs. The pipe
# costs are pinned at 1 us so that they dominate the run: a +30% change of them is then an
# effect of known size, whatever the calibrated defaults are.
TINY = {
    "machine.cpus": 2,
    "workload.groups": 1,
    "workload.senders": 3,
    "workload.receivers": 3,
    "workload.loops": 20,
    "costs.pipe_send": "1us",
    "costs.pipe_recv": "1us",
}
TINY_SETS = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]


def tiny() -> dict:
    return sc.load(DEMO, TINY)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


PIPE30 = """
[patch]
name = "pipe-30"
baseline = "messaging-demo"
[scale]
"costs.pipe_send" = 1.30
"costs.pipe_recv" = 1.30
"""


def test_patch_file_parses_quoted_and_nested_keys(tmp_path):
    p = write(
        tmp_path,
        "p.toml",
        """
[patch]
name = "x"
baseline = "messaging-demo"
[set]
"kernel.preempt" = "full"
machine.cpus = 2
[scale]
costs.context_switch = 1.10
""",
    )
    patch = prescreen.load_patch(p)
    assert patch.sets == (("kernel.preempt", "full"), ("machine.cpus", 2))
    assert patch.scales == (("costs.context_switch", 1.10),)
    data = prescreen.apply_patch(tiny(), patch)
    scn = sc.validate(data, prescreen.catalog())
    base = sc.validate(tiny(), prescreen.catalog())
    assert scn.kernel.preempt == "full" and scn.machine.cpus == 2
    assert scn.costs.context_switch == round(base.costs.context_switch * 1.10)
    assert prescreen.is_patch_file(p) and not prescreen.is_patch_file(DEMO)


def test_compare_finds_an_injected_pipe_cost_regression(tmp_path):
    patch = prescreen.parse_patch(__import__("tomllib").loads(PIPE30))
    base = tiny()
    cmp = prescreen.compare(
        base, prescreen.apply_patch(base, patch), replications=8, workers=1, metrics=["time_s", "messages_per_s"]
    )
    by = {e.metric: e for e in cmp.effects}
    t, r = by["time_s"], by["messages_per_s"]
    assert t.verdict == "regresses" and t.ci_low > 0.05, t
    assert r.verdict == "regresses" and r.ci_high < -0.05, r
    assert t.ci_low <= t.effect <= t.ci_high
    assert t.lab_run == "unknown" and "no validated error" in t.note
    assert "regresses" in cmp.verdict
    # a known model error decides whether the effect is worth a lab run
    small = prescreen.ModelError("x", 0.01, "test")
    large = prescreen.ModelError("x", 0.9, "test")
    c1 = prescreen.compare(base, prescreen.apply_patch(base, patch), replications=8, workers=1, metrics=["time_s"], error=small)
    c2 = prescreen.compare(base, prescreen.apply_patch(base, patch), replications=8, workers=1, metrics=["time_s"], error=large)
    assert c1.effects[0].lab_run == "yes" and "worth a lab run" in c1.verdict
    assert c2.effects[0].lab_run == "no" and "not worth" in c2.verdict
    # the sentence names the metric that makes it worth a lab run, and whose error it is
    assert "time_s beyond the model's validated error (1%): worth a lab run" in c1.verdict
    given = prescreen.ModelError("x", 0.01, "given with --model-error")
    c3 = prescreen.compare(base, prescreen.apply_patch(base, patch), replications=8, workers=1, metrics=["time_s"], error=given)
    assert "time_s beyond the model error given (1%)" in c3.verdict
    # the same comparison twice is the same, interval included (seeded bootstrap)
    assert (
        c1.effects[0]
        == prescreen.compare(
            base, prescreen.apply_patch(base, patch), replications=8, workers=1, metrics=["time_s"], error=small
        ).effects[0]
    )


def test_identical_configs_show_no_effect():
    base = tiny()
    cmp = prescreen.compare(base, base, replications=5, workers=1)
    assert cmp.effects
    for e in cmp.effects:
        assert e.verdict == "no detectable effect", e
        assert e.effect == 0 and e.ci_low == 0 and e.ci_high == 0
        assert e.lab_run == "no"
    assert cmp.verdict.startswith("no detectable effect at 95% confidence")


def test_common_random_numbers_pair_the_arms():
    seeds = replication_seeds(1, 6)
    assert seeds[:3] == replication_seeds(1, 3)  # a prefix does not depend on n
    assert len(set(seeds)) == 6 and all(0 <= s < 2**63 for s in seeds)
    base = tiny()
    cmp = prescreen.compare(base, base, replications=3, workers=1)
    assert cmp.seeds == replication_seeds(1, 3)
    # arm runs with the same seed are identical; different seeds differ (jitter)
    assert [repr(r) for r in cmp.base_runs] == [repr(r) for r in cmp.patch_runs]  # NaN-safe equality
    assert cmp.base_runs[0]["time_s"] != cmp.base_runs[1]["time_s"]


def test_bootstrap_interval_on_known_data():
    rng = np.random.default_rng(3)
    base = rng.lognormal(0, 0.1, 40)
    patch = base * 1.10 * rng.lognormal(0, 0.01, 40)
    eff, lo, hi = prescreen.paired_effect_ci(base, patch, 0.95, seed=1)
    assert lo < 0.10 < hi and hi - lo < 0.02
    assert prescreen.paired_effect_ci(base, patch, 0.95, seed=1) == (eff, lo, hi)
    # pure noise around no change: the interval contains 0
    noise = base * rng.lognormal(0, 0.02, 40)
    _, lo, hi = prescreen.paired_effect_ci(base, noise, 0.95, seed=1)
    assert lo < 0 < hi


def test_directions():
    d = prescreen.direction
    assert d("time_s") == "lower" and d("messages_per_s") == "higher"
    assert d("message_latency_ns.p99") == "lower" and d("rate_at_500") == "higher"
    assert d("cpu_utilisation") is None and d("messages") is None
    assert d("widgets", {"widgets": "higher"}) == "higher"
    # wakeups are work and power spent, per second too (the timers story: pull's 885 idle
    # wakeups/s against push's 530 is the worse figure), unlike a throughput's *_per_s
    assert d("timers.idle_wakeups_per_s") == "lower" and d("locks.wasted_wakeups") == "lower"
    assert d("rcu.nocb_wakeups") == "lower" and d("sleeper_periods_per_s") is None


def test_model_error_from_stories_and_rows():
    assert prescreen.story_for(["netns-2014"]) == "netns-2014"
    assert prescreen.story_for(["netns-2014-small", "x"]) == "netns-2014"
    assert prescreen.story_for(["timers-dbench"]) == "timers-2023"
    assert prescreen.story_for(["messaging-demo"]) is None
    assert prescreen.model_error(None).value is None
    rows = [
        {"story": "netns-2014", "role": "predicted", "rel_error": -0.2},
        {"story": "netns-2014", "role": "predicted", "rel_error": 0.1},
        {"story": "netns-2014", "role": "fitted", "rel_error": 0.5},
        {"story": "other", "role": "predicted", "rel_error": 0.9},
    ]
    me = prescreen.model_error("netns-2014", rows)
    assert me.value == pytest.approx(0.2)
    assert prescreen.model_error("timers-2023", []).value is None


def run_cli(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_compare_json(tmp_path, capsys):
    p = write(tmp_path, "pipe.toml", PIPE30)
    rc, out, err = run_cli(["compare", str(p), "-n", "4", "--workers", "1", "--json", "--metric", "time_s", *TINY_SETS], capsys)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["replications"] == 4 and doc["patch"] == "pipe-30" and doc["baseline"] == "messaging-demo"
    assert doc["changes"] == ["costs.pipe_send x 1.3 (+30%)", "costs.pipe_recv x 1.3 (+30%)"]
    (m,) = doc["metrics"]
    assert m["metric"] == "time_s" and m["verdict"] == "regresses" and m["ci_low"] > 0
    assert doc["model_error"]["value"] is None
    # a scenario and a patch; two scenarios; a table
    rc, out, err = run_cli(
        ["compare", "messaging-demo", str(p), "-n", "3", "--workers", "1", "--model-error", "0.05", *TINY_SETS], capsys
    )
    assert rc == 0, err
    assert "time_s" in out and "regresses" in out and "verdict:" in out
    rc, out, err = run_cli(["compare", "messaging-demo", str(DEMO), "-n", "3", "--workers", "1", "--json", *TINY_SETS], capsys)
    assert rc == 0, err
    assert all(m["verdict"] == "no detectable effect" for m in json.loads(out)["metrics"])


BAD_PATCHES = [
    ("[patch]\nname = 'x'\nbaseline = 'messaging-demo'\n[set]\n'kernel.preemptt' = 'full'\n", "set.kernel.preemptt: unknown key"),
    ("[patch]\nbaseline = 'messaging-demo'\n[set]\n'kernel.preempt' = 'sometimes'\n", "set.kernel.preempt"),
    (
        "[patch]\nbaseline = 'messaging-demo'\n[scale]\n'costs.pipe_send' = -1\n",
        "scale.costs.pipe_send: -1 is not a positive factor",
    ),
    ("[patch]\nbaseline = 'messaging-demo'\n[scale]\n'costs.pipe_sendd' = 1.1\n", "scale.costs.pipe_sendd: is not a knob"),
    ("[patch]\nbaseline = 'messaging-demo'\n[scale]\n'kernel.preempt' = 1.1\n", "scale.kernel.preempt: the baseline value"),
    ("[patch]\nbaseline = 'messaging-demo'\n[scale]\n'scenario.duration' = 2\n", "has no value in the baseline"),
    ("[patch]\nbaseline = 'messaging-demo'\n[scale]\n'machine.cpus' = 0.01\n", "machine.cpus"),
    ("[patch]\nbaseline = 'messaging-demo'\n[sett]\n'machine.cpus' = 2\n", "sett: unknown section (did you mean [set]?)"),
    ("[patch]\nbaseline = 'messaging-demo'\nbasline = 'x'\n[set]\n'machine.cpus' = 2\n", "patch.basline: unknown key"),
    ("[set]\n'machine.cpus' = 2\n", "[patch]: is missing"),
    ("[patch]\nbaseline = 'messaging-demo'\n", "the patch changes nothing"),
    ("[patch]\nname = 'x'\n[set]\n'machine.cpus' = 2\n", "patch.baseline: is required"),
    ("[patch]\nbaseline = 'no-such-scenario'\n[set]\n'machine.cpus' = 2\n", "no-such-scenario: no such scenario"),
    ("[patch]\nbaseline = 'messaging-demo'\n[set]\n'machine.cpus' = 2\n[scale]\n'machine.cpus' = 2.0\n", "is also in [set]"),
    ("[patch]\nbaseline = 'messaging-demo'\n[set]\n'machine.cpus' = 2\n[metrics]\ntime_s = 'up'\n", "metrics.time_s"),
    ("[patch\nbaseline = ", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "expect"), BAD_PATCHES)
def test_bad_patch_is_one_line_and_exit_2(tmp_path, capsys, text, expect):
    p = write(tmp_path, "bad.toml", text)
    rc, out, err = run_cli(["compare", str(p), "-n", "2", "--workers", "1"], capsys)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rcusim: error: "), err
    assert expect in lines[0], lines[0]
    assert "Traceback" not in err


def test_bad_compare_arguments(tmp_path, capsys):
    p = write(tmp_path, "pipe.toml", PIPE30)
    for args, expect in (
        (["compare", str(p), "-n", "1"], "--replications: 1 is below 2"),
        (["compare", str(p), "--confidence", "1.5"], "--confidence"),
        (["compare", str(p), "--metric", "time_s:sideways"], "--metric time_s:sideways"),
        (["compare", str(p), "-n", "2", "--workers", "1", "--metric", "tme_s", *TINY_SETS], "did you mean 'time_s'"),
        (["compare", "messaging-demo"], "is not a patch file"),
        (["compare", str(p), "messaging-demo"], "is a patch file, not a scenario"),
        (["compare", str(tmp_path / "missing.toml")], "no such patch file"),
        (["compare", str(DEMO)], "is not a patch file"),
        (["compare", str(p), "--story", "nope"], "--story: unknown story"),
        (["compare", str(p), "--validation", str(tmp_path / "none.json")], "--validation"),
    ):
        rc, out, err = run_cli(args, capsys)
        assert rc == 2, (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0], (args, err)


def test_bundled_patches_are_valid():
    cat = prescreen.catalog()
    for p in sorted((ROOT / "scenarios" / "patches").glob("*.toml")):
        arms = prescreen.prepare(str(p), cat=cat)
        assert arms.changes, p
        sc.validate(arms.patched, cat)


def test_effect_json_has_no_nan():
    e = prescreen.Effect("m", None, math.nan, 1.0, math.nan, math.nan, math.nan, "not compared", "unknown")
    assert json.dumps(e.to_json(), allow_nan=False)
    with pytest.raises(ConfigError):
        prescreen.compare(tiny(), tiny(), replications=1, workers=1)
