"""The wake_by_sleep_age replica (a calibration check): the model wakes an idle CPU the same way
whatever its idle age, so the replica's latency does not depend on the delay once the sleeper has
blocked, and it is the IPI and idle-exit path."""

from __future__ import annotations

import dataclasses

from calibration.microbench import Target, wake_by_sleep_age
from sim.units import US

from .helpers import ZERO_COSTS

COSTS = dataclasses.replace(ZERO_COSTS, ipi_latency=3_000, idle_exit=10_000, ipi_handler=2_000, context_switch=500, syscall=100)
TARGET = Target(cpus=2, hz=250, preempt="none")


def test_the_model_wakes_an_idle_cpu_alike_at_every_idle_age():
    lat = {d: wake_by_sleep_age(COSTS, TARGET, delay=d, trials=10) for d in (1 * US, 4 * US, 40 * US)}
    assert len(set(lat.values())) == 1, lat


def test_the_latency_is_the_ipi_and_idle_exit_path():
    base = wake_by_sleep_age(COSTS, TARGET, delay=4 * US, trials=10)
    path = COSTS.ipi_latency + COSTS.idle_exit + COSTS.ipi_handler
    assert path <= base <= path + COSTS.context_switch + 4 * COSTS.syscall
    slower = wake_by_sleep_age(dataclasses.replace(COSTS, idle_exit=20_000), TARGET, delay=4 * US, trials=10)
    assert slower - base == 10_000


def test_calibrate_reports_the_wake_checks_when_the_profile_has_them():
    from calibration.fit import calibrate
    from calibration.profile import load_profile

    new = calibrate(load_profile("calibration/profiles/default.json"), seeds=1, bootstrap=0)
    rows = {o.name: o for o in new.outcomes if o.name.startswith("wake_")}
    assert set(rows) == {"wake_1us", "wake_4us", "wake_40us"}
    assert all(o.role == "check" for o in rows.values())
    assert rows["wake_4us"].item == "wake_by_sleep_age.d_4000ns"
    # the model's wakeup ignores the idle age: the same figure for all three but for the runs of the
    # machine's other processes (Costs.idle_task_wakeups_per_s) that fall into a trial
    sims = [o.simulated for o in rows.values()]
    assert max(sims) - min(sims) <= 0.01 * max(sims)
    old = calibrate(load_profile("calibration/profiles/history/dev-2026-11-22T1416.json"), seeds=1, bootstrap=0)
    assert not [o for o in old.outcomes if o.name.startswith("wake_")]
    assert {k: v.value for k, v in old.estimates.items()} == {
        k: v.value
        for k, v in calibrate(
            load_profile("calibration/profiles/history/dev-2026-11-22T1416.json"), seeds=1, bootstrap=0
        ).estimates.items()
    }


def test_a_delay_without_samples_drops_its_check_not_the_calibration():
    import json

    from calibration.fit import calibrate
    from calibration.profile import validate_profile

    raw = json.loads(open("calibration/profiles/default.json").read())
    for s in raw["items"]["wake_by_sleep_age"]["series"]:
        if s["label"] == "d_1000ns":  # the sleeper never slept at 1 us: no sample
            s["params"]["not_asleep"] = s["params"]["trials"]
            # as the collector writes an empty series (a quick run's d_0ns usually is one)
            s["samples"], s["samples_total"] = [], 0
            s["stats"] = {"count": 0, **{k: None for k in ("min", "max", "mean", "stddev", "median", "p90", "p99")}}
            s["histogram"] = {"scheme": "log2-quarter", "buckets": [], "underflow": 0, "overflow": 0}
    cal = calibrate(validate_profile(raw, "no-1us"), seeds=1, bootstrap=0)
    assert {o.name for o in cal.outcomes if o.name.startswith("wake_")} == {"wake_4us", "wake_40us"}
