"""The hackbench workload on the lock models, the hackbench-rt-2008 scenario and its story."""

from __future__ import annotations

import json
import tomllib

import pytest

import models
from calibration.stories import hackbench_rt_2008 as story
from calibration.validation import StoryOptions
from models.locks import CONFIGS
from sim import scenario as sc
from sim.errors import ConfigError

SMALL = {"workload.groups": 2, "workload.fds": 4, "workload.loops": 6}


def run_small(config, seed=1, **extra):
    over = dict(CONFIGS[config])
    over.update(SMALL)
    over.update(extra)
    cat = models.catalog()
    scn = sc.validate(sc.load(story.SCENARIO, over), cat)
    return sc.run(scn, cat, seed=seed)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_message_arrives_once_and_nothing_is_left_behind(config):
    cat = models.catalog()
    over = dict(CONFIGS[config], **SMALL)
    scn = sc.validate(sc.load(story.SCENARIO, over), cat)
    m, wl = sc.build(scn, cat, seed=3)
    m.done.callbacks.append(sc.StopSimulation.callback)
    m.env.run()
    assert wl.delivered == wl.total == 2 * 4 * 4 * 6
    for row in wl.pairs:
        for p in row:
            assert p.queue == [] and p.wmem == 0 and not p.r_waiting and not p.r_blocked
    lm = m.models["locks"]
    assert all(lk.owner is None for lk in lm.locks)
    assert all(not getattr(lk, "waiters", ()) for lk in lm.locks)
    # the slab arrays hold what was freed into them, minus what was allocated
    for c in wl.caches:
        assert all(0 <= a <= c.limit for a in c.avail)


def test_same_seed_same_result_and_kernels_differ_only_by_knobs():
    a = run_small("rt6", seed=7)
    b = run_small("rt6", seed=7)
    assert json.dumps(a.metrics, sort_keys=True) == json.dumps(b.metrics, sort_keys=True) and a.sim_ns == b.sim_ns
    v = run_small("vanilla", seed=7)
    assert v.metrics["locks.sleeps"] == 0  # vanilla spinlocks never sleep
    assert v.metrics["locks.softirq_thread_runs"] == 0
    assert a.metrics["locks.softirq_thread_runs"] > 0


def test_the_mechanism_is_visible_in_the_metrics():
    res = run_small("rt7-adaptive")
    mt = res.metrics
    for key in (
        "time_s",
        "time_s_at_100_loops",
        "switches_per_message",
        "lock_sleeps_per_message",
        "lock_handoffs_per_message",
        "lock_steals_per_message",
        "lock_spins_per_message",
        "locks.unix_state.sleeps",
        "locks.slab.sleeps",
        "locks.steals",
        "locks.spins",
        "locks.handoffs",
    ):
        assert key in mt and mt[key] == mt[key], key


def test_bad_knobs_get_one_clear_error():
    cat = models.catalog()
    with pytest.raises(ConfigError, match="kernel.locks.policy"):
        sc.validate(sc.load(story.SCENARIO, {"kernel.locks.preempt_rt": False, "kernel.locks.policy": "adaptive"}), cat)
    with pytest.raises(ConfigError, match="workload.transport"):
        sc.validate(sc.load(story.SCENARIO, {"workload.transport": "fifo"}), cat)
    with pytest.raises(ConfigError, match="workload.mode"):
        sc.validate(sc.load(story.SCENARIO, {"workload.mode": "thread"}), cat)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_pipe_mode_delivers_everything_through_the_pipe_locks(config):
    """hackbench -pipe: no skb (no slab lock, no socket lock); every write and read takes the
    pipe's i_mutex, which is a struct mutex, so under -rt an rt_mutex with strict stealing rules
    even in rt7 (lateral stealing and adaptive spinning are for spinlock_t only)."""
    cat = models.catalog()
    over = dict(CONFIGS[config], **SMALL, **{"workload.transport": "pipe"})
    scn = sc.validate(sc.load(story.SCENARIO, over), cat)
    m, wl = sc.build(scn, cat, seed=3)
    m.done.callbacks.append(sc.StopSimulation.callback)
    m.env.run()
    assert wl.delivered == wl.total == 2 * 4 * 4 * 6
    for row in wl.pipes:
        for p in row:
            assert p.bufs == [] and p.msgs == [] and not p.wait.waiting and not p.wait.blocked
    lk = m.models["locks"].metrics()
    assert lk.get("slab.acquisitions", 0) == 0 and lk.get("unix_state.acquisitions", 0) == 0
    assert lk["pipe_mutex.acquisitions"] >= 2 * wl.total  # a write and a read per message
    assert lk["wq_lock.acquisitions"] >= wl.total  # pipe_write wakes pipe->wait after every write
    assert lk["pipe_mutex.steals"] == 0 and lk["pipe_mutex.spins"] == 0
    assert all(lock.owner is None for lock in m.models["locks"].locks)


def test_every_skb_takes_the_per_cpu_slab_lock_four_times():
    """__alloc_skb and __kfree_skb make two slab calls each (head and data), and every slab call
    takes the CPU's slab lock (-rt mm/slab.c slab_irq_save)."""
    res = run_small("vanilla")
    n = res.metrics["messages"]
    assert res.metrics["locks.slab.acquisitions"] == 4 * n


def test_rt_without_full_preemption_fails_at_install():
    cat = models.catalog()
    scn = sc.validate(sc.load(story.SCENARIO, {"kernel.preempt": "voluntary", **SMALL}), cat)
    with pytest.raises(ConfigError, match="kernel.preempt = 'full'"):
        sc.run(scn, cat)


def test_scenario_carries_the_fitted_values():
    with open(story.SCENARIO, "rb") as f:
        scn = tomllib.load(f)
    fit = story.load_fit()
    assert fit["fit"]["story"] == "hackbench-rt-2008" and fit["fit"]["date"] and fit["fit"]["method"]
    v = fit["values"]
    assert scn["workload"]["cost_scale"] == v["workload.cost_scale"]
    assert scn["workload"]["loops"] == story.LOOPS


# ---------------------------------------------------------------- full-size figures (slow)
_CACHE: dict[tuple, dict] = {}


def cached_simulate(config, seed, loops=story.LOOPS, values=None, groups=50):
    key = (config, seed, loops, groups, json.dumps(values, sort_keys=True))
    if key not in _CACHE:
        _CACHE[key] = story._simulate_uncached(config, seed, loops, values, groups)
    return _CACHE[key]


@pytest.fixture
def shared_runs(monkeypatch):
    if not hasattr(story, "_simulate_uncached"):
        story._simulate_uncached = story.simulate
    monkeypatch.setattr(story, "simulate", cached_simulate)


@pytest.mark.slow
def test_time_per_message_is_linear_in_the_size(shared_runs):
    # the scenario runs 40 of hackbench's 100 loops; the time per message must hardly depend on
    # it. It carries a start-up share that shrinks with the size (seed 1, rt7-adaptive: 2.48,
    # 2.22, 2.09 us per message at 20, 40, 80 loops: -10 % then -6 %), which is why 40 loops.
    for config in ("vanilla", "rt7-adaptive"):
        small = story.simulate(config, 1, story.LOOPS)["us_per_message"]
        big = story.simulate(config, 1, 2 * story.LOOPS)["us_per_message"]
        assert big == pytest.approx(small, rel=0.10), config


@pytest.mark.slow
def test_story_contract_and_predictions(shared_runs, capsys):
    rows = story.STORY.rows(StoryOptions(seeds=1))
    assert [r.config for r in rows] == ["vanilla", "rt6", "rt7-lateral", "rt7-adaptive", "all"]
    assert [r.role for r in rows] == ["fitted", "predicted", "predicted", "predicted", "predicted"]
    assert all(r.story == "hackbench-rt-2008" and r.source.startswith(story.SEED_FILE) for r in rows)
    by = {r.config: r for r in rows}
    assert by["rt6"].target == by["rt7-lateral"].target == by["rt7-adaptive"].target == 0.20
    assert by["vanilla"].target is None
    assert by["vanilla"].ok, by["vanilla"].rel_error  # within the fit tolerance with one seed
    # what the model achieves (docs/readme/locks.md): the adaptive time is right, vanilla is the
    # fastest and rt6 the slowest kernel; rt6 and rt7-lateral are too fast (misses: -42 % and
    # -40 % with three seeds). With 2.6.24's wakeup placement and load balancing the order row
    # holds for seed 1 (and for the mean of three seeds), but lateral is only about 2 % slower
    # than adaptive where the box measured 67 % (seed 2 alone reverses them):
    # docs/kernel/rtmutex-hackbench.md §12
    assert by["rt7-adaptive"].ok, by["rt7-adaptive"]
    t = {c: by[c].simulated for c in ("vanilla", "rt6", "rt7-lateral", "rt7-adaptive")}
    assert t["vanilla"] < min(t["rt7-lateral"], t["rt7-adaptive"]) and max(t["rt7-lateral"], t["rt7-adaptive"]) < t["rt6"]
    assert by["all"].ok, by["all"].note
    assert t["rt7-lateral"] < 1.1 * t["rt7-adaptive"]
    assert not by["rt6"].ok and by["rt6"].simulated < by["rt6"].reference
    assert not by["rt7-lateral"].ok and by["rt7-lateral"].simulated < by["rt7-lateral"].reference
    # the CLI prints the same rows as JSON, and --check reports the misses
    from app.cli import main

    rc = main(["validate", "hackbench-rt-2008", "--json", "--check", "--seeds", "1"])
    out = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in out["rows"]] == [r.config for r in rows]
    assert [r["role"] for r in out["rows"]] == [r.role for r in rows]
    assert rc == 1
