"""Costs.tick_busy: measured jiffies of tick durations, one value per CPU, drawn a jiffy at a time,
and the calibration that copies them from a profile's irq_cost.tick_busy series."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calibration.fit import tick_table
from calibration.profile import load_profile
from sim.machine import IRQ, Env, Machine
from sim.ops import cpu, sleep
from sim.params import KernelConfig, MachineConfig
from sim.rng import Streams
from sim.units import MS

from .helpers import ZERO_COSTS

TABLE = ((10_000, 30_000), (20_000, 40_000), (15_000, 35_000))


def _busy(cpus: int, table=TABLE, seed: int = 1, hz: int = 250) -> Machine:
    """``cpus`` CPUs each running a pinned hog for 200 ms, every cost 0 but the ticks."""
    c = dataclasses.replace(ZERO_COSTS, tick_busy=table)
    m = Machine(Env(), MachineConfig(cpus=cpus), KernelConfig(hz=hz), c, Streams(seed))

    def hog(task):
        yield cpu(1000 * MS)

    for i in range(cpus):
        m.spawn(hog, f"hog{i}", affinity=[i])
    m.env.run(until=m.env.timeout(200 * MS))
    return m


def test_every_cpu_takes_its_value_of_the_same_measured_jiffy():
    # Rows drawn per CPU would make the difference vary from tick to tick; drawn per jiffy, CPU 1
    # is always 20 us behind CPU 0, whatever the rows drawn
    m = _busy(2)
    irq0, irq1 = (c.acc[IRQ] for c in m.cpus)
    ticks = m.cpus[0].ticks
    assert ticks == m.cpus[1].ticks and ticks >= 40
    assert irq1 - irq0 == 20_000 * ticks
    # and the draws are not all the same row
    assert irq0 not in {r[0] * ticks for r in TABLE}


def test_rows_narrower_than_the_machine_wrap_around():
    m = _busy(3)
    irq = [c.acc[IRQ] for c in m.cpus]
    assert irq[2] == irq[0] and irq[1] - irq[0] == 20_000 * m.cpus[0].ticks


def test_same_seed_same_draws_and_another_seed_others():
    a, b, c = (_busy(2, seed=s) for s in (1, 1, 2))
    assert a.cpus[0].acc[IRQ] == b.cpus[0].acc[IRQ]
    assert a.cpus[0].acc[IRQ] != c.cpus[0].acc[IRQ]


def test_without_a_table_the_tick_is_tick_times_jitter():
    m = _busy(2, table=())
    assert m.tick_busy is None
    c = dataclasses.replace(ZERO_COSTS, tick=7_000)
    m = Machine(Env(), MachineConfig(cpus=1), KernelConfig(hz=250), c, Streams(1))

    def hog(task):
        yield cpu(1000 * MS)

    m.spawn(hog, "hog")
    m.env.run(until=m.env.timeout(100 * MS))
    assert m.cpus[0].acc[IRQ] == 7_000 * m.cpus[0].ticks


# ------------------------------------------------------------------ the calibration


def test_tick_table_keeps_whole_rows_in_the_long_mode():
    prof = load_profile("calibration/profiles/default.json")
    s = prof.item("irq_cost").get_series("tick_busy")
    if s is None:
        pytest.skip("the bundled profile predates irq_cost.tick_busy")
    t = tick_table(prof)
    k = int(s.params["cpus"])
    flat = np.asarray(s.samples, dtype=float).reshape(-1, k)
    assert t.rows and all(len(r) == k for r in t.rows)
    assert len(t.rows) <= len(flat)
    # every kept row is a measured row, in order
    it = iter(tuple(int(round(v)) for v in r) for r in flat)
    assert all(any(r == x for x in it) for r in t.rows)
    assert min(min(r) for r in t.rows) > 1_000  # the 0.3-0.5 us gaps are not ticks


def test_tick_table_of_an_older_profile_is_empty_with_a_warning():
    prof = load_profile("calibration/profiles/history/dev-2026-11-22T1141.json")
    warnings: list[str] = []
    t = tick_table(prof, warnings)
    assert t.rows == () and any("irq_cost.tick_busy" in w for w in warnings)


# ------------------------------------------------------------------ NO_HZ idle: when the tick restarts


def _sleeper(idle_exit: int, hz: int = 1000, nohz_idle: bool = True) -> tuple[Machine, list[tuple[int, bool]]]:
    """One CPU, a task that runs 2.5 ms then sleeps 1.3 ms, ten times; leaving idle takes
    ``idle_exit``. Returns the machine and every tick as (time, the idle task was running)."""
    c = dataclasses.replace(ZERO_COSTS, idle_exit=idle_exit)
    m = Machine(Env(), MachineConfig(cpus=1), KernelConfig(hz=hz, nohz_idle=nohz_idle), c, Streams(1))
    ticks: list[tuple[int, bool]] = []
    m.tick_hooks.append(lambda cpu: ticks.append((m.env.now, cpu.curr is None)))

    def task(t):
        for _ in range(10):
            yield cpu(2_500_000)
            yield sleep(1_300_000)

    m.spawn(task, "t")
    m.env.run(until=m.env.timeout(60 * MS))
    return m, ticks


def test_no_tick_while_the_cpu_leaves_nohz_idle():
    # Leaving idle takes 0.8 ms, so jiffy edges keep falling while the CPU is on its way out;
    # tick_nohz_idle_exit restarts the tick only when the idle loop ends (a task is picked),
    # forwarded past those edges. Ticking at them (restarting at the start of the exit) fails this.
    m, ticks = _sleeper(800_000)
    assert m.cpus[0].idle_exits >= 10
    assert ticks and not any(idle for _, idle in ticks)
    # the running task gets its ticks: two of the 2.5 ms segments' edges at least, each time
    assert len(ticks) >= 20


def test_without_nohz_idle_the_tick_never_stops():
    _, ticks = _sleeper(800_000, nohz_idle=False)
    assert any(idle for _, idle in ticks)
    assert len(ticks) >= 59  # one per jiffy of the 60 ms (the last one may be handled after the end)


def test_an_empty_jiffy_is_a_clear_error():
    from sim.config import from_mapping
    from sim.errors import ConfigError
    from sim.params import Costs

    with pytest.raises(ConfigError) as e:
        from_mapping(Costs, {"tick_busy": [[18_000, 17_000], []]}, "costs")
    assert e.value.field == "costs.tick_busy[1]" and "one tick duration per CPU" in e.value.fix
    with pytest.raises(ConfigError) as e:
        from_mapping(Costs, {"tick_busy": [[18_000, -1]]}, "costs")
    assert e.value.field == "costs.tick_busy[0][1]"


def test_tick_table_refuses_a_subsampled_or_empty_series():
    import json

    from calibration.profile import validate_profile

    raw = json.loads(open("calibration/profiles/default.json").read())
    series = {s["label"]: s for s in raw["items"]["irq_cost"].get("series", [])}
    if "tick_busy" not in series:
        pytest.skip("the bundled profile predates irq_cost.tick_busy")
    tb = series["tick_busy"]
    n = len(tb["samples"])
    tb["samples_total"] = tb["stats"]["count"] = n + 10  # a subsample: its rows cannot be trusted
    warnings: list[str] = []
    assert tick_table(validate_profile(raw, "cut"), warnings).rows == () and warnings
    assert "--max-samples" in warnings[0] and "collector < 0.10.0" not in warnings[0]  # the real reason
    tb["samples_total"] = tb["stats"]["count"] = n
    tb["samples"] = [500.0] * n  # no tick in any window
    warnings = []
    assert tick_table(validate_profile(raw, "low"), warnings).rows == () and any("long mode" in w for w in warnings)


# ------------------------------------------------------------------ other interruptions (Costs.other_gaps)


def _gaps_machine(busy: bool, seed: int = 1) -> Machine:
    c = dataclasses.replace(ZERO_COSTS, other_gaps=(5_000, 7_000), other_gaps_per_s=1_000)
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=250), c, Streams(seed))
    if busy:

        def hog(task):
            yield cpu(1000 * MS)

        for i in range(2):
            m.spawn(hog, f"hog{i}", affinity=[i])
    m.env.run(until=m.env.timeout(1000 * MS))
    return m


def test_other_gaps_pause_a_busy_cpu_about_as_often_as_measured():
    m = _gaps_machine(busy=True)
    for c in m.cpus:
        # every gap is 5 or 7 us; about 1000 of them in the second (Poisson: 900-1100 here)
        assert 900 * 5_000 <= c.acc[IRQ] <= 1_100 * 7_000
    assert m.cpus[0].acc[IRQ] != m.cpus[1].acc[IRQ]  # each CPU draws its own
    again = _gaps_machine(busy=True)
    assert [c.acc[IRQ] for c in again.cpus] == [c.acc[IRQ] for c in m.cpus]


def test_an_idle_cpu_does_not_notice_other_gaps():
    m = _gaps_machine(busy=False)
    assert all(c.acc[IRQ] == 0 and c.idle_exits == 0 for c in m.cpus)


def test_other_gaps_need_durations():
    from sim.config import from_mapping
    from sim.errors import ConfigError
    from sim.params import Costs

    with pytest.raises(ConfigError) as e:
        from_mapping(Costs, {"other_gaps_per_s": 200}, "costs")
    assert e.value.field == "costs.other_gaps"


# ------------------------------------------------------------------ an idle CPU's own timers (Costs.idle_timers_per_s)


def _own_timers_machine(rate: int, busy_cpu1: bool = False, seed: int = 1, hz: int = 250) -> Machine:
    c = dataclasses.replace(ZERO_COSTS, idle_timers_per_s=rate)
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=hz), c, Streams(seed))
    if busy_cpu1:

        def hog(task):
            yield cpu(2000 * MS)

        m.spawn(hog, "hog", affinity=[1])
    m.env.run(until=m.env.timeout(2000 * MS))
    return m


def test_an_idle_cpu_wakes_for_its_own_timers_about_as_often_as_measured():
    m = _own_timers_machine(30)
    for c in m.cpus:
        # NO_HZ idle: each timer is a tick from idle, nothing else wakes the CPU; about 60 in 2 s
        # (Poisson: 40-80 here), a few fewer when two fall into one jiffy
        assert 40 <= c.idle_exits <= 80 and c.ticks == c.idle_exits
    assert m.cpus[0].ticks != m.cpus[1].ticks  # each CPU draws its own
    assert [c.ticks for c in _own_timers_machine(30).cpus] == [c.ticks for c in m.cpus]
    assert all(c.ticks == c.idle_exits == 0 for c in _own_timers_machine(0).cpus)


def test_a_busy_cpu_runs_its_own_timers_in_the_tick_it_has_anyway():
    with_timers, without = _own_timers_machine(30, busy_cpu1=True), _own_timers_machine(0, busy_cpu1=True)
    assert with_timers.cpus[1].ticks == without.cpus[1].ticks >= 499  # HZ 250, 2 s: every jiffy
    assert with_timers.cpus[1].idle_exits == without.cpus[1].idle_exits
    assert 40 <= with_timers.cpus[0].ticks <= 80


def test_an_idle_cpu_leaves_idle_for_its_own_hrtimers_without_a_tick():
    c = dataclasses.replace(ZERO_COSTS, idle_hrtimers_per_s=30, timer_irq=5_000)
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=250), c, Streams(1))
    m.env.run(until=m.env.timeout(2000 * MS))
    for cpu_ in m.cpus:
        assert 40 <= cpu_.idle_exits <= 80 and cpu_.ticks == 0
        assert cpu_.acc[IRQ] == pytest.approx(cpu_.idle_exits * 5_000, rel=0.01)


def _global_timer_machine(wake_at_ms: float | None, busy_cpu1: bool = True) -> tuple[Machine, list[int]]:
    """CPU 0 idle with a non-pinned timer armed at 1 ms for jiffy 3 (HZ 250; the wheel rounds it
    to its bucket, jiffy 3), CPU 1 busy; optionally an interrupt wakes CPU 0 at ``wake_at_ms``.
    Returns the machine and the CPUs that ran the timer."""
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=250, timer_wheel="v6.9"), ZERO_COSTS, Streams(1))
    ran: list[int] = []
    if busy_cpu1:

        def hog(task):
            yield cpu(100 * MS)

        m.spawn(hog, "hog", affinity=[1])
    m.call_at(1 * MS, lambda: m.cpus[0].add_jiffy_timer(2, lambda c: ran.append(c.index)))
    if wake_at_ms is not None:
        m.call_at(int(wake_at_ms * MS), lambda: m.cpus[0].raise_irq(1_000, None))
    m.env.run(until=m.env.timeout(40 * MS))
    return m, ran


@pytest.mark.parametrize(
    "wake_at_ms,runs_on",
    [
        (None, 1),  # pulled: the busy CPU runs it, the idle one is not woken
        (2.0, 1),  # woken in jiffy 0: the timer is two jiffies away on its way back, still handed over
        (9.0, 0),  # woken in jiffy 2, the one before the timer's: it keeps the timer and ticks for it
    ],
)
def test_an_idle_cpu_woken_in_the_jiffy_before_its_global_timer_keeps_it(wake_at_ms, runs_on):
    m, ran = _global_timer_machine(wake_at_ms)
    assert ran == [runs_on]
    assert m.cpus[0].ticks == (1 if runs_on == 0 else 0)


def _stats_machine(kick: bool, cpu0_ran: bool, seconds: float = 1.0) -> Machine:
    kernel = KernelConfig(hz=250, nohz_stats_kick=kick)
    m = Machine(Env(), MachineConfig(cpus=2), kernel, ZERO_COSTS, Streams(1))

    def hog(task):
        yield cpu(int(seconds * 1000) * MS)

    def blip(task):
        yield cpu(100_000)  # a task ran on CPU 0: it has blocked load for ~350 ms

    m.spawn(hog, "hog", affinity=[1])
    if cpu0_ran:
        m.spawn(blip, "blip", affinity=[0])
    m.env.run(until=m.env.timeout(int(seconds * 1000) * MS))
    return m


def test_a_busy_cpu_kicks_an_idle_one_with_blocked_load_every_32_ms():
    m = _stats_machine(kick=True, cpu0_ran=True)
    # 32 ms = 8 jiffies, the kick at the first tick after: every 9 jiffies (36 ms) while CPU 0's
    # load decays (LOAD_AVG_MAX_N: about 353 ms), then none
    kicks = m.cpus[0].ipis - 1  # the first IPI woke CPU 0 for the task
    assert 9 <= kicks <= 10 and m.cpus[0].idle_exits == m.cpus[0].ipis
    assert _stats_machine(kick=True, cpu0_ran=False).cpus[0].ipis == 0  # nothing ran there: no blocked load
    assert _stats_machine(kick=False, cpu0_ran=True).cpus[0].ipis == 1  # only the one for the task


GAPS_PROFILE = "calibration/profiles/history/dev-2026-11-22T1514.json"  # collector 0.11.0: has other_gaps


def test_gap_table_copies_the_measured_gaps_only_when_asked():
    from calibration.fit import gap_table

    prof = load_profile(GAPS_PROFILE)
    s = prof.series("irq_cost", "other_gaps")
    on = gap_table(prof, [], apply=True)
    assert on.gaps == tuple(int(round(v)) for v in s.samples) and on.per_s == round(s.params["per_s"], 3)
    assert on.inputs == ("irq_cost.other_gaps",)
    off = gap_table(prof, [], apply=False)
    assert off.gaps == () and off.per_s == 0 and off.inputs == ()
    assert "not applied" in off.formula and "--other-gaps" in off.formula and f"{s.params['per_s']:.0f} per second" in off.formula


def test_calibrate_cli_passes_other_gaps_through(monkeypatch, tmp_path):
    import app.verbs.calibrate as verb
    from app.cli import main

    seen = []

    class Stop(Exception):
        pass

    def fake(profile, **kw):
        seen.append(kw.get("other_gaps"))
        raise Stop

    monkeypatch.setattr(verb, "calibrate", fake)
    for extra, want in (([], False), (["--other-gaps"], True)):
        with pytest.raises(Stop):
            main(["calibrate", GAPS_PROFILE, "--out", str(tmp_path / "p.toml"), "--no-progress", *extra])
        assert seen[-1] is want


# ------------------------------------------------------------------ every CPU idle: the CPU that went idle last


def _last_idle_machine(
    cpu1_runs: tuple[float, float] | None, exit_ns: tuple[int, int] = (0, 0)
) -> tuple[Machine, list[int], list[int]]:
    """A task on CPU 0 runs at 0.5 ms and goes idle (CPU 1 idle then, unless busy): CPU 0 arms a
    non-pinned timer for jiffy 2 (HZ 250: 8 ms) on its way. Optionally a task on CPU 1 runs from
    ``cpu1_runs[0]`` to ``cpu1_runs[1]`` ms. Leaving idle takes ``exit_ns`` per CPU. Returns the
    machine, the CPUs that ran the timer and each CPU's ticks from 7 ms on."""
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=250, timer_wheel="v6.9"), ZERO_COSTS, Streams(1))
    m.idle_exit_latency = lambda c: exit_ns[c.index]
    ran: list[int] = []

    def arm(task):
        yield sleep(int(0.5 * MS))
        m.cpus[0].add_jiffy_timer(2, lambda c: ran.append(c.index))
        yield cpu(10_000)

    m.spawn(arm, "arm", affinity=[0])
    if cpu1_runs is not None:
        start, end = cpu1_runs

        def other(task):
            yield sleep(int(start * MS))
            yield cpu(int((end - start) * MS))

        m.spawn(other, "other", affinity=[1])
    m.env.run(until=m.env.timeout(7 * MS))
    before = [c.ticks for c in m.cpus]
    m.env.run(until=m.env.timeout(33 * MS))
    return m, ran, [c.ticks - b for c, b in zip(m.cpus, before, strict=True)]


def test_a_cpu_that_went_idle_last_with_every_other_idle_keeps_its_global_timer():
    m, ran, ticks = _last_idle_machine(None)
    assert ran == [0] and m.tmigr_last is m.cpus[0] and m.cpus[0].tmigr_wakeup
    assert ticks == [1, 0]


def test_a_cpu_that_goes_idle_last_later_wakes_for_the_others_timer_and_the_first_there_runs_it():
    # CPU 1 runs a task after CPU 0 went idle: it goes idle last, so the hierarchy hands it CPU 0's
    # timer (tmigr_cpu_deactivate) and it ticks for it; CPU 0 programmed its own tick for it when it
    # was last itself. Both wake; whoever reaches its timer softirq first expires the timer, once
    for exit_ns, winner in (((5_000, 1_000), 1), ((1_000, 5_000), 0)):
        m, ran, ticks = _last_idle_machine((2.0, 3.0), exit_ns)
        assert m.tmigr_last is m.cpus[1] and m.cpus[0].tmigr_wakeup
        assert ran == [winner]
        assert ticks == [1, 1]


def test_a_cpu_that_went_idle_while_another_ran_programs_no_tick_for_its_global_timers():
    # CPU 1 busy when CPU 0 goes idle: CPU 0 is not last and leaves its timer to the hierarchy;
    # CPU 1, idle last at 5 ms, alone wakes for it
    m, ran, ticks = _last_idle_machine((0.0, 5.0))
    assert not m.cpus[0].tmigr_wakeup and m.tmigr_last is m.cpus[1]
    assert ran == [1]
    assert ticks == [0, 1]


@pytest.mark.parametrize("rule,lands_on", [("pack", 1), ("weight", 0)])
def test_a_wakeup_from_an_idle_cpus_interrupt_runs_where_the_guest_packs_it(rule, lands_on):
    # the task last ran on CPU 0, idle now; an interrupt on idle CPU 1 wakes it. Mainline keeps it
    # on its idle previous CPU (wake_affine_idle); the packing guest runs it on CPU 1, as the GP
    # kthread ran after CPU 1 expired its timeout in the traces (README, rcu)
    k = KernelConfig(hz=250, sched="eevdf", wake_affine=rule)
    m = Machine(Env(), MachineConfig(cpus=2), k, ZERO_COSTS, Streams(1))
    ran_on: list[int] = []

    def sleeper(task):
        yield sleep(1000 * MS)
        ran_on.append(task.cpu)

    t = m.spawn(sleeper, "sleeper", affinity=[0])
    m.call_at(1 * MS, lambda: setattr(t, "affinity", None))
    m.call_at(2 * MS, lambda: m.interrupt(m.cpus[1], 1_000, lambda c: m.wake(t, c)))
    m.env.run(until=m.env.timeout(5 * MS))
    assert ran_on == [lands_on]


def _other_processes(seed: int, rate: int = 40) -> Machine:
    c = dataclasses.replace(ZERO_COSTS, idle_task_wakeups_per_s=rate, idle_task_work=20_000)
    m = Machine(Env(), MachineConfig(cpus=2), KernelConfig(hz=250, sched="eevdf", wake_affine="pack"), c, Streams(seed))
    m.env.run(until=m.env.timeout(2000 * MS))
    return m


def test_the_other_processes_run_as_often_as_measured_from_a_cpu_each_seed_draws():
    runs = {}
    for seed in range(1, 9):
        m = _other_processes(seed)
        (t,) = [x for x in m.tasks.values() if x.name == "other-processes"]
        # 40 a second for 2 s: about 80 sleeps (Poisson: 55-105 here), each run 20 us of work
        assert 55 <= t.nvcsw <= 105 and t.run_ns == pytest.approx(20_000 * t.nvcsw, abs=20_000)
        runs[seed] = (t.cpu, t.nvcsw)
    # an idle machine keeps it where it started, and the seeds start it on either CPU
    assert {cpu_ for cpu_, _ in runs.values()} == {0, 1}
    (again,) = _other_processes(1).tasks.values()
    assert runs[1] == (again.cpu, again.nvcsw)  # same seed, same run
    assert not [x for x in _other_processes(1, rate=0).tasks.values()]
