"""Lock ownership in the trace (issue #8): a track per lock with who owns it, and for rt-mutexes
the pending-owner interval; and the explorer's timeline showing them."""

from __future__ import annotations

import json

from app.explorer import core
from models.locks import CONFIGS
from models.locks.config import LocksConfig
from models.locks.core import Lock, LockModel, Unlock
from sim.trace import MODEL_PID
from sim.units import MS

from .helpers import machine
from .test_locks_exact import rt_three_tasks, run


def lock_spans(doc, track):
    tid = next(t.tid for t in core.trace_tracks(doc) if t.pid == MODEL_PID and t.name == track)
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("pid") == MODEL_PID and e["tid"] == tid]
    return [(e["cat"], e["name"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in evs]


def three_tasks(policy):
    """test_locks_exact's rt_three_tasks timeline, traced."""
    m, _, _, _ = rt_three_tasks(policy, trace=True)
    run(m)
    assert m.tracer is not None
    return m.tracer.document()


def test_strict_handoff_shows_the_pending_owner_interval_then_ownership():
    doc = three_tasks("strict")
    # times as in test_rt_strict_handoff_reserves_the_lock_for_the_sleeping_pending_owner: a
    # owns L 5000-15110 (its slow unlock's pass ends in the grant); b is pending owner from the
    # grant until its CPU has left idle (20110), owns it until its own pass grants c (20310); c
    # is pending until 25310 and owns it until 27410
    assert lock_spans(doc, "lock L") == [
        ("lock", "a", 5_000, 15_110),
        ("lock_pending", "pending b", 15_110, 20_110),
        ("lock", "b", 20_110, 20_310),
        ("lock_pending", "pending c", 20_310, 25_310),
        ("lock", "c", 25_310, 27_410),
    ]


def test_a_lateral_steal_ends_the_pending_interval_and_starts_the_thief_s_ownership():
    doc = three_tasks("lateral")
    assert lock_spans(doc, "lock L") == [
        ("lock", "a", 5_000, 15_110),
        ("lock_pending", "pending b (robbed by c)", 15_110, 15_110),
        ("lock", "c", 15_110, 17_210),
        ("lock", "b", 20_110, 20_210),
    ]


def test_no_lock_spans_without_a_tracer():
    m = machine(cpus=1)
    lm = LockModel(m, LocksConfig(atomic=10))
    L = lm.new_lock("spinlock", "L")

    def a(task):
        yield Lock(L, 1_000)
        yield Unlock(L)

    m.spawn(a, "a")
    m.env.run(until=m.env.timeout(MS))
    assert m.tracer is None and L.track == 0


def traced_hackbench(config):
    # three groups: with 2.6.24's wakeup placement two groups of four no longer contend under rt6
    over = dict(CONFIGS[config], **{"workload.groups": 3, "workload.fds": 4, "workload.loops": 6})
    scn = core.validate(core.apply(core.load_bundled("hackbench-rt-2008"), over), core.catalog())
    key = core.scenario_key(scn)
    return core.run_toml(key, trace=True), core.run_toml(key, trace=False)


def test_traced_hackbench_has_one_owner_per_lock_at_a_time_and_the_timeline_shows_it():
    out, plain = traced_hackbench("rt6")
    # tracing records, it does not change the run
    assert json.dumps(out.result["metrics"], sort_keys=True) == json.dumps(plain.result["metrics"], sort_keys=True)
    assert out.trace is not None and not out.trace_dropped
    doc = core.parse_trace(out.trace)
    tracks = core.lock_tracks(doc)
    assert any(".unix_state" in t for t in tracks) and any(t.startswith("lock slab/") for t in tracks)
    label = {(t.pid, t.tid): t.name for t in core.trace_tracks(doc)}
    per_lock: dict[str, list[tuple[float, float, str]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in core.LOCK_KINDS:
            per_lock.setdefault(label[(e["pid"], e["tid"])], []).append((e["ts"], e["ts"] + e["dur"], e["cat"]))
    owned = sum(1 for v in per_lock.values() for s in v if s[2] == "lock")
    pending = sum(1 for v in per_lock.values() for s in v if s[2] == "lock_pending")
    m = out.result["metrics"]
    # every exclusive acquisition that was released is a span (rt6: every lock is exclusive)
    assert owned == m["locks.acquisitions"]
    # every handoff to a sleeping waiter opens a pending interval that ends when it runs
    assert 0 < pending <= m["locks.handoffs"]
    for name, spans in per_lock.items():
        spans.sort()
        for (_s0, e0, _), (s1, _e1, _) in zip(spans, spans[1:], strict=False):
            assert e0 <= s1 + 1e-9, (name, e0, s1)  # at most one owner (or pending owner) at a time
    # the timeline: the busiest locks of the window are rows, with both kinds of span
    t0, t1 = core.trace_extent_us(doc)
    busiest = core.busiest_lock_tracks(doc, t0, t1, n=4)
    assert len(busiest) == 4
    spans, _instants, _truncated = core.timeline_rows(doc, t0, t1, locks=busiest, max_spans=10**6)
    rows = {s["row"] for s in spans if s["kind"] in core.LOCK_KINDS.values()}
    assert rows == set(busiest)
    assert {s["kind"] for s in spans if s["row"] == busiest[0]} == {"lock owner", "lock pending owner"}
    everything, _, _ = core.timeline_rows(doc, t0, t1, max_spans=10**6)
    assert {s["row"] for s in everything if s["kind"] in core.LOCK_KINDS.values()} == set(per_lock)
    hist = core.model_span_histogram(doc)
    assert sum(h["spans"] for h in hist) == owned + pending
    assert any(h["track"].startswith("lock pending owner ") for h in hist)


def test_hackbench_story_page_timeline_has_lock_rows():
    """The explorer's hackbench story page, run with a trace (AppTest, no browser): the timeline
    offers the busiest locks of the window and shows some by default."""
    import pytest

    pytest.importorskip("streamlit")
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    view = Path(__file__).resolve().parents[1] / "app" / "explorer" / "views" / "hackbench.py"
    at = AppTest.from_file(str(view), default_timeout=240).run()
    prefix = "story:hackbench-rt-2008|hackbench-rt-2008|"
    at.number_input(key=prefix + "workload.groups").set_value(2)
    at.number_input(key=prefix + "workload.loops").set_value(4)
    at.button(key="story:hackbench-rt-2008|run").click().run()
    assert not at.exception and not [e.value for e in at.error]
    picks = [w for w in at.multiselect if w.label.startswith("locks to show")]
    assert len(picks) == 1
    shown = picks[0].value
    assert shown and all(s.startswith(core.LOCK_TRACK_PREFIX) for s in shown)
