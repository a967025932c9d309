"""The trace recorder: compact in memory, the same file as the format's dicts dumped whole."""

from __future__ import annotations

import io
import json

import pytest

import models
from sim import scenario as sc
from sim.trace import Tracer

from .helpers import every_task


def _traced(limit: int) -> Tracer:
    cat = models.catalog()
    data = sc.load("scenarios/hackbench-rt-2008.toml")
    data["workload"].update(groups=1, loops=2)
    data["kernel"]["locks"]["policy"] = "lateral"
    tracer = Tracer(limit=limit)
    sc.run(sc.validate(data, cat), cat, tracer=tracer)
    return tracer


@pytest.mark.parametrize("limit", [1_000_000, 700])
def test_write_streams_the_same_text_as_dumping_the_whole_document(limit):
    tracer = _traced(limit)
    # spans with and without a category and args, instants, the lock tracks' shared args
    kinds = {(e["ph"], e.get("cat", ""), "args" in e) for e in tracer.events}
    assert {("X", "lock", True), ("X", "switch", False), ("i", "", False)} <= kinds
    assert (tracer.dropped > 0) == (limit == 700) and len(tracer) == min(limit, len(tracer) + tracer.dropped)
    whole = json.dumps(tracer.document(), separators=(",", ":"))
    for batch in (1, 7, 20_000):
        buf = io.StringIO()
        tracer.write(buf, batch=batch)
        assert buf.getvalue() == whole
    doc = json.loads(whole)
    assert doc["traceEvents"][2:] == [*doc["traceEvents"][2 : 2 + len(tracer._meta)], *tracer.events]
    if tracer.dropped:
        assert doc["otherData"] == {"dropped_events": tracer.dropped, "limit": 700}


def test_a_machine_keeps_only_its_live_tasks():
    # every process of the fake-router script exits; the machine lets go of it (a run of
    # thousands of routers would otherwise keep every task and its finished script)
    cat = models.catalog()
    data = sc.load("scenarios/netns-2014.toml")
    data["workload"]["routers"] = 5
    m, wl = sc.build(sc.validate(data, cat), cat)
    everyone = every_task(m)
    m.env.run(until=m.done)
    gone = [t for t in everyone() if t.tid not in m.tasks]
    assert len(gone) >= 5 * 8 and all(t.ended >= 0 for t in gone)
    assert len(m.tasks) == m.live and all(t.ended < 0 for t in m.tasks.values())
