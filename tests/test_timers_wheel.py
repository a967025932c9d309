"""The timer wheel, placement, the timer-migration hierarchy and cpuidle: exact small cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.timers.config import TimersConfig
from models.timers.idle import INF as IDLE_INF
from models.timers.idle import Governor, typical_interval
from models.timers.model import TimersModel
from models.timers.ops import ScheduleTimeout, TimerArm
from models.timers.tmigr import NONE, Hierarchy
from models.timers.wheel import INF, LVL_SIZE, Timer, calc_wheel_index, lvl_depth, lvl_gran, lvl_start
from sim.config import from_mapping
from sim.errors import ConfigError
from sim.ops import Call, CpuWork, Sleep
from sim.units import MS, US, S

from .helpers import machine


def install(m, **cfg):
    return TimersModel(m, TimersConfig(**cfg))


def run_for(m, ns):
    m.env.run(until=m.env.now + ns)


# ---------------------------------------------------------------------------- the wheel
def test_geometry_follows_hz():
    assert lvl_depth(1000) == 9 and lvl_depth(250) == 9 and lvl_depth(100) == 8
    assert [lvl_start(n) for n in (1, 2, 3)] == [63, 504, 4032]
    assert [lvl_gran(n) for n in (0, 1, 2)] == [1, 8, 64]


def test_calc_wheel_index_levels_and_rounding():
    depth = 9
    # level 0: one jiffy later than asked (calc_index rounds up by one unit)
    assert calc_wheel_index(110, 100, depth) == ((111 & 63), 111, 0)
    assert calc_wheel_index(162, 100, depth)[2] == 0  # delta 62
    idx, be, lvl = calc_wheel_index(163, 100, depth)  # delta 63: level 1, 8-jiffy granularity
    assert lvl == 1 and be == ((163 >> 3) + 1) << 3 == 168 and idx == LVL_SIZE + (21 & 63)
    assert calc_wheel_index(100 + 504, 100, depth)[2] == 2
    # already expired: the current bucket
    assert calc_wheel_index(90, 100, depth) == (100 & 63, 100, 0)
    # beyond the last level: clamped to WHEEL_TIMEOUT_MAX
    _, be, lvl = calc_wheel_index(10**12, 0, depth)
    assert lvl == depth - 1 and be <= lvl_start(depth) - lvl_gran(depth - 1) + lvl_gran(depth - 1)


@given(st.integers(0, 10**9), st.integers(0, 10**7), st.sampled_from([8, 9]))
def test_wheel_never_early_and_bounded_late(clk, delta, depth):
    expires = clk + delta
    idx, be, lvl = calc_wheel_index(expires, clk, depth)
    clamped = delta >= lvl_start(depth)
    if not clamped:
        assert expires < be <= expires + lvl_gran(lvl)
    assert 0 <= idx < depth * LVL_SIZE and idx // LVL_SIZE == lvl


# ---------------------------------------------------------------------------- exact timelines
def test_timer_on_idle_cpu_wakes_it_at_its_bucket():
    m = machine(cpus=2, hz=100)  # 10 ms jiffies, every cost 0
    model = install(m, timer_migration="push")
    model.log = []
    timer = Timer("t", lambda c, t: 0)

    def s(task):
        yield TimerArm(timer, 25 * MS)  # 3 jiffies, level 0: fires at jiffy 3 + 1

    m.spawn(s, "arm", affinity=(0,))
    run_for(m, 100 * MS)
    fires = [e for e in model.log if e[0] == "fire"]
    assert [(e[1], e[2], e[3]) for e in fires] == [(40 * MS, 0, 0)]
    assert model.timer_wakeups == 1 and timer.fired == 1


def test_push_walks_domains_from_a_nohz_full_cpu():
    m = machine(cpus=4, hz=100)
    model = install(
        m,
        timer_migration="push",
        nohz_full=(0,),
        domain_spans=(2,),
        nohz_probe=3,
        nohz_domain=5,
        nohz_entry=7,
        timer_op=50,
        cache_line_transfer=11,
    )
    timer = Timer("t")
    costs = []

    def spin(task):
        yield CpuWork(50 * MS)

    def s(task):
        yield CpuWork(1 * MS)  # CPU 3 is running its spinner by now
        before = m.now
        yield TimerArm(timer, 1 * S)
        costs.append(m.now - before)

    m.spawn(spin, "spin", affinity=(3,))
    m.spawn(s, "loop", affinity=(0,))
    run_for(m, 5 * MS)
    # SMT domain {0, 1}: probe 1 (idle); whole machine: probe 1, 2 (idle), 3 (busy)
    assert timer.base is not None and timer.base.cpu == 3
    assert model.nohz_probes == 4 and model.remote_enqueues == 1
    # the op, the walk, and one cache-line transfer: CPU 3's base line was CPU 3's
    assert costs == [50 + 7 + 2 * 5 + 4 * 3 + 11]


@pytest.mark.parametrize("mode", ["off", "pull"])
def test_off_and_pull_queue_locally(mode):
    m = machine(cpus=4, hz=100)
    model = install(m, timer_migration=mode, nohz_full=(0,))
    timer = Timer("t")

    def s(task):
        yield TimerArm(timer, 1 * S)

    m.spawn(s, "loop", affinity=(0,))
    run_for(m, 1 * MS)
    assert timer.base is not None and timer.base.cpu == 0 and model.nohz_probes == 0


def test_push_moves_a_timer_rearmed_in_an_idle_cpus_softirq_to_a_busy_cpu():
    m = machine(cpus=3, hz=100)
    model = install(m, timer_migration="push")
    where = []

    def fn(c, t):
        where.append(c.index)
        if len(where) < 3:
            return model.mod_timer(c, t, 2, m.now + 20 * MS)
        return 0

    timer = Timer("kworker", fn)

    def spin(task):
        yield CpuWork(200 * MS)

    def s(task):
        yield TimerArm(timer, 10 * MS)  # armed by a running task: stays on CPU 2

    m.spawn(spin, "spin", affinity=(1,))
    m.spawn(s, "arm", affinity=(2,))
    run_for(m, 150 * MS)
    # first expiry on CPU 2 (idle: its softirq re-arms, idle_cpu(2) -> walk -> CPU 1 busy);
    # then CPU 1 expires and re-arms it locally (busy)
    assert where == [2, 1, 1]
    assert model.remote_enqueues == 1


def test_pull_migrator_expires_an_idle_cpus_timer_and_the_task_returns_home():
    m = machine(cpus=2, hz=100)
    model = install(m, timer_migration="pull")
    model.log = []
    ran_on = []

    def spin(task):
        yield CpuWork(300 * MS)

    def s(task):
        yield ScheduleTimeout(jiffies=2)
        ran_on.append(task.cpu)
        yield ScheduleTimeout(jiffies=2)
        ran_on.append(task.cpu)

    m.spawn(spin, "spin", affinity=(1,))
    m.spawn(s, "sleeper", affinity=(0,))
    run_for(m, 200 * MS)
    fires = [e for e in model.log if e[0] == "fire"]
    # armed at t=0 on CPU 0 (expires 2 -> bucket 3): CPU 1, the migrator, expires it at its
    # tick of jiffy 3; the task is woken back on CPU 0 and re-arms there: a ping pong round
    assert [(e[1], e[2], e[3]) for e in fires] == [(30 * MS, 1, 0), (60 * MS, 1, 0)]
    assert ran_on == [0, 0] and model.fired_remote == 2 and model.pingpong == 1
    assert model.tmigr is not None
    model.tmigr.check()


def test_pull_last_idle_cpu_wakes_for_the_first_global_event():
    m = machine(cpus=2, hz=100)
    model = install(m, timer_migration="pull", tmigr_level=17)
    model.log = []

    def s(task):
        yield ScheduleTimeout(jiffies=2)

    m.spawn(s, "sleeper", affinity=(0,))
    run_for(m, 100 * MS)
    fires = [e for e in model.log if e[0] == "fire"]
    # CPU 0, the last one going idle, arms for its own global event; leaving idle it walks
    # the one-level hierarchy again (tmigr_level), which delays the softirq
    assert [(e[1], e[2], e[3]) for e in fires] == [(30 * MS + 17, 0, 0)]
    assert model.fired_remote == 0 and model.timer_wakeups == 1


def test_sleep_still_works_with_the_timers_model_installed():
    m = machine(cpus=2, hz=100)
    install(m, timer_migration="pull", idle_state_names=("C1",), idle_exit_latency=(1000,), idle_target_residency=(2000,))
    seen = []

    def s(task):
        yield Sleep(3 * MS)
        seen.append(m.now)

    m.spawn(s, "s")
    run_for(m, 10 * MS)
    assert seen and seen[0] >= 3 * MS


def test_idle_states_exit_latency_and_residency():
    m = machine(cpus=1, hz=100)
    model = install(
        m,
        timer_migration="push",
        idle_state_names=("C1", "C2"),
        idle_exit_latency=(1 * US, 100 * US),
        idle_target_residency=(2 * US, 200 * US),
    )
    model.log = []
    timer = Timer("t", lambda c, t: 0)

    def s(task):
        yield TimerArm(timer, 50 * MS)

    m.spawn(s, "s")
    run_for(m, 100 * MS)
    # the next timer is 60 ms away: the governor picks C2, whose exit latency delays the softirq
    fires = [e for e in model.log if e[0] == "fire"]
    assert [e[1] for e in fires] == [60 * MS + 100 * US]
    assert model.metrics()["deep_idle_fraction"] > 0.9


# ---------------------------------------------------------------------------- hierarchy
@pytest.mark.parametrize(("cpus", "levels", "lvl0"), [(2, 1, 1), (8, 1, 1), (9, 2, 2), (32, 2, 4), (256, 3, 32), (512, 3, 64)])
def test_hierarchy_shape(cpus, levels, lvl0):
    h = Hierarchy(cpus)
    assert h.nlevels == levels == len(h.levels) and len(h.levels[0]) == lvl0 and len(h.levels[-1]) == 1


def test_hierarchy_walks_and_handover():
    h = Hierarchy(16)
    for c in range(16):
        h.activate(c)
    h.check()
    # CPUs 8..15 idle: group 1 loses its last active child and the walk reaches the top
    for c in range(8, 16):
        first, touched = h.deactivate(c, 1000 + c if c == 9 else INF)
        h.check()
    assert h.levels[0][1].migrator == NONE and h.top.migrator == 0
    assert h.levels[0][1].next == 1009 and h.top.next == 1009
    assert h.requires_handle_remote(0, 1009) and not h.requires_handle_remote(1, 1009)
    handled = []

    def expire(x):
        handled.append(x)
        h.update_idle_event(x, INF)

    h.handle_remote(0, 1009, expire)
    assert handled == [9] and h.top.next == INF
    # the last CPU going idle gets the first event of the whole system back
    for c in range(1, 8):
        h.deactivate(c, INF)
    first, touched = h.deactivate(0, 5000)
    assert first == 5000 and touched[-1] is h.top
    h.check()


# ---------------------------------------------------------------------------- governor
def test_typical_interval():
    from collections import deque

    assert typical_interval(deque([100_000] * 8)) == 100_000
    assert typical_interval(deque([100_000] * 7)) == IDLE_INF  # not enough history
    # one large outlier is discarded
    assert typical_interval(deque([100_000] * 7 + [50_000_000])) == 100_000
    assert typical_interval(deque([10_000, 5_000_000, 40_000, 900_000, 3_000, 60_000_000, 200_000, 7_000_000])) == IDLE_INF


def test_menu_learns_that_idle_ends_early():
    g = Governor(1, ("C1", "C2"), (1000, 400_000), (2000, 800_000), "menu")
    assert g.select(0, IDLE_INF) == 1  # nothing known: the sleep length (1 s) calls for C2
    for _ in range(60):
        st = g.select(0, IDLE_INF)
        g.record(0, 50_000 + (st * 7), by_timer=False, state=st)
    assert g.select(0, IDLE_INF) == 0


@given(st.lists(st.tuples(st.integers(1, 2_000_000_000), st.integers(0, 3_000_000_000)), min_size=1, max_size=40))
def test_menu_correction_never_exceeds_unity(periods):
    # menu_update(): a measured idle longer than the sleep length it was predicted from is
    # clamped to it, in the correction factor and in the interval history alike
    from models.timers.idle import DECAY, RESOLUTION

    g = Governor(1, ("C1", "C2"), (1000, 400_000), (2000, 800_000), "menu")
    for sleep, duration in periods:
        state = g.select(0, sleep)
        g.record(0, duration, by_timer=duration >= sleep, state=state)
        assert all(f <= RESOLUTION * DECAY for f in g.correction[0])
        assert g.history[0][-1] <= min(sleep, 1_000_000_000)


# ---------------------------------------------------------------------------- configuration
def test_config_errors_name_the_field():
    with pytest.raises(ConfigError) as e:
        from_mapping(TimersConfig, {"idle_state_names": ["C1"], "idle_exit_latency": []}, "kernel.timers")
    assert e.value.field == "kernel.timers.idle_state_names"
    with pytest.raises(ConfigError) as e:
        from_mapping(TimersConfig, {"timer_migration": "pul"}, "kernel.timers")
    assert e.value.field == "kernel.timers.timer_migration" and "pull" in str(e.value)
    with pytest.raises(ConfigError) as e:
        from_mapping(
            TimersConfig,
            {"idle_state_names": ["a", "b"], "idle_exit_latency": [5, 1], "idle_target_residency": [1, 2]},
            "kernel.timers",
        )
    assert e.value.field == "kernel.timers.idle_exit_latency"
    with pytest.raises(ConfigError) as e:
        install(machine(cpus=2), nohz_full=(5,))
    assert e.value.field == "kernel.timers.nohz_full"


def test_unused_model_is_inert():
    m = machine(cpus=2, hz=100)
    model = install(m)
    hooks = (len(m.tick_hooks), len(m.idle_enter_hooks))

    def s(task):
        yield Call(lambda c, t: 0)
        yield CpuWork(1 * MS)

    m.spawn(s, "s")
    run_for(m, 5 * MS)
    assert model.metrics() == {} and (len(m.tick_hooks), len(m.idle_enter_hooks)) == hooks
