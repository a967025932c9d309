"""The timers-2023 story: scenarios, the committed fit, the trace of the ping pong, and
``rcusim validate timers-2023 --json --check``."""

from __future__ import annotations

import json
import tomllib

import pytest

from app.cli import main
from calibration import stories
from calibration.stories import timers_2023 as story
from models import catalog
from sim import scenario as sc
from sim.trace import MODEL_PID, Tracer


def run(name, over, tracer=None):
    scn = sc.validate(sc.load(story.SCENARIOS / f"{name}.toml", over), catalog())
    return sc.run(scn, catalog(), tracer=tracer)


def test_story_is_registered():
    s = stories.get("timers-2023")
    assert s is story.STORY and s.seed_file == "004_4966f5407572de7a.txt"


def test_committed_fit_reproduces():
    committed = tomllib.loads(story.FIT_FILE.read_text())
    assert committed["fitted"]["timer_op"] == story.fit(seeds=3)["fitted"]["timer_op"]
    # the knob's default is the fitted value
    from models.timers.config import TimersConfig

    assert TimersConfig().timer_op == committed["fitted"]["timer_op"]


def test_enqueue_loop_push_pays_the_walk_pull_does_not():
    push = run("timers-enqueue", {"workload.repetitions": 3})
    pull = run("timers-enqueue", {"workload.repetitions": 3, "kernel.timers.timer_migration": "pull"})
    p, q = push.metrics, pull.metrics
    assert p["timers.remote_enqueues"] == p["timers.armed"] > 0 and p["timers.nohz_probes"] == 5 * p["timers.armed"]
    assert q["timers.remote_enqueues"] == 0 and q["timers.nohz_probes"] == 0
    assert q["ns_per_enqueue_dequeue"] < p["ns_per_enqueue_dequeue"]


def test_idle_scenario_shows_the_ping_pong_in_the_trace():
    tr = Tracer()
    res = run("timers-idle", {"workload.run_for": "300 ms"}, tracer=tr)
    assert res.metrics["timers.pingpong"] > 0 and res.metrics["timers.remote_expiries"] > 0
    tid = tr.track("timers")
    names = {e["name"] for e in tr.events if e.get("tid") == tid and e.get("pid") == MODEL_PID}
    assert {"ping pong", "remote expiry"} <= names
    push = run("timers-idle", {"workload.run_for": "300 ms", "kernel.timers.timer_migration": "push"})
    assert push.metrics["timers.pingpong"] == 0 and push.metrics["timers.remote_expiries"] == 0


def test_dbench_runs_and_is_deterministic():
    over = {"workload.pairs": 4, "machine.cpus": 16, "workload.warmup": "5 ms", "workload.run_for": "10 ms"}
    a = run("timers-dbench", over).metrics
    b = run("timers-dbench", over).metrics
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and a["requests_per_s"] > 0


@pytest.mark.slow
def test_validate_cli_json_check(capsys):
    rc = main(["validate", "timers-2023", "--seeds", "1", "--json", "--check"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    rows = doc["rows"]
    assert {r["story"] for r in rows} == {"timers-2023"}
    roles = {(r["metric"], r["config"]): r["role"] for r in rows}
    assert roles[("enqueue+dequeue", "push (v6.6), isolated CPU, 1/4 busy")] == "fitted"
    assert sum(1 for r in rows if r["role"] == "fitted") == 1
    for r in rows:
        assert {"story", "metric", "config", "reference", "simulated", "unit", "role", "rel_error", "target", "source"} <= set(r)
        assert (r["target"] is None) == (r["role"] == "fitted")
    assert all(r["ok"] for r in rows if r["role"] == "fitted")  # the fit has not gone stale
    # --check: exit 1 exactly when a row misses its target (or a fitted one its anchor)
    assert rc == (0 if all(r["ok"] for r in rows) else 1), err
