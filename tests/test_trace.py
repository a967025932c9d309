"""What a run keeps in memory."""

from __future__ import annotations

import models
from sim import scenario as sc

from .helpers import every_task


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
