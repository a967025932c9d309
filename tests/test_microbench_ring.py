"""The ring replica (a calibration check): members pinned to one CPU pass a byte round a ring of
pipes. In the model a switch costs the same whichever task comes next, so a ring of threads
costs per hop what the two-task ping-pong costs one way, and a ring of processes adds
mm_switch on every hop and asid_miss once more than six address spaces take turns."""

from __future__ import annotations

import dataclasses

import pytest

from calibration.microbench import Target, pingpong, ring

from .helpers import ZERO_COSTS

COSTS = dataclasses.replace(
    ZERO_COSTS, context_switch=800, wakeup=1_000, syscall=100, pipe_send=150, pipe_recv=150, mm_switch=70, asid_miss=600
)
TARGET = Target(cpus=2, hz=250, preempt="none", sched="eevdf")


def test_a_ring_of_threads_costs_the_pingpong_per_hop_whatever_its_size():
    one_way = pingpong(COSTS, TARGET, cross=False, rounds=50, warm=5)
    per_hop = {n: ring(COSTS, TARGET, members=n, processes=False, laps=20, warm=2) for n in (2, 3, 8, 16)}
    assert all(v == pytest.approx(one_way, abs=1) for v in per_hop.values()), (one_way, per_hop)


def test_processes_pay_mm_switch_and_past_six_mms_asid_miss():
    threads = ring(COSTS, TARGET, members=8, processes=False, laps=20, warm=2)
    four = ring(COSTS, TARGET, members=4, processes=True, laps=20, warm=2)  # four mms keep their PCIDs
    eight = ring(COSTS, TARGET, members=8, processes=True, laps=20, warm=2)  # eight take them in turn
    assert four - threads == pytest.approx(COSTS.mm_switch, abs=1)
    assert eight - threads == pytest.approx(COSTS.mm_switch + COSTS.asid_miss, abs=1)


def test_calibrate_reports_the_ring_checks_when_the_profile_has_them():
    import json

    from calibration.fit import calibrate
    from calibration.profile import load_profile, validate_profile

    path = "calibration/profiles/default.json"
    profile = load_profile(path)
    cal = calibrate(profile, seeds=1, bootstrap=0)
    rows = {o.name: o for o in cal.outcomes if o.name.startswith("ring")}
    assert set(rows) == {"ring8_threads", "ring8_processes"}
    for name, row in rows.items():
        assert row.role == "check" and row.item == f"context_switch_process.{name}"
        assert row.measured == profile.series("context_switch_process", name).stats.median
    # the model's level: the fitted ping-pong, plus the address-space costs for processes
    costs = cal.costs_mapping()
    gap = rows["ring8_processes"].simulated - rows["ring8_threads"].simulated
    assert gap == pytest.approx(costs["mm_switch"] + costs["asid_miss"], rel=0.1)
    # a profile without the item has no ring rows and the same estimates
    raw = json.loads(open(path).read())
    raw["items"].pop("context_switch_process")
    old = calibrate(validate_profile(raw, "no-rings"), seeds=1, bootstrap=0)
    assert not [o for o in old.outcomes if o.name.startswith("ring")]
