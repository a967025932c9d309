"""membarrier, futex, liburcu, percpu-rwsem and rcu_sync: hand-checkable behaviours and knobs."""

from __future__ import annotations

import math

import pytest

import models
from models.rcu import Rcu, RcuConfig, SynchronizeRcu
from models.sync import Membarrier, MembarrierModel, Mm, PercpuRwsemModel, RcuSync
from models.sync.config import MembarrierConfig, PercpuRwsemConfig
from models.sync.futex import EAGAIN, FutexWait, FutexWake, FutexWord
from models.sync.membarrier import EINVAL, EPERM
from models.sync.urcu import Urcu, UrcuCosts
from sim import scenario as sc
from sim.errors import ConfigError
from sim.ops import Call, CpuWork, Sleep
from sim.units import MS, US

from .helpers import machine as zero_machine


def machine(cpus=2, hz=1000, era="v3.13", mb_era="v4.15", writer_sync="rcu_sync", rcu_sync_era="v5.4", **costs):
    """A zero-cost machine with RCU, membarrier and percpu_rwsem installed (as a scenario does)."""
    m = zero_machine(cpus=cpus, hz=hz, **costs)
    rcu = Rcu(m, RcuConfig(era=era))

    class Installed:
        pass

    inst = Installed()
    inst.rcu = rcu  # type: ignore[attr-defined]
    m.models = {"rcu": inst}  # type: ignore[attr-defined]
    m.models["membarrier"] = MembarrierModel(m, MembarrierConfig(era=mb_era))  # type: ignore[attr-defined]
    m.models["percpu_rwsem"] = PercpuRwsemModel(  # type: ignore[attr-defined]
        m, PercpuRwsemConfig(writer_sync=writer_sync, rcu_sync_era=rcu_sync_era)
    )
    return m


def run(m, until=5_000 * MS):
    m.env.run(until=m.env.any_of([m.done, m.env.timeout(until)]))


def spinner(task):
    while True:
        yield CpuWork(10 * MS)


# ---------------------------------------------------------------------------- membarrier
def test_private_expedited_needs_registration_and_ipis_only_the_process():
    m = machine(cpus=3, syscall=100, ipi_latency=1_500, ipi_handler=300)
    mb = m.models["membarrier"]
    mine, other = Mm("p", users=2), Mm("q")
    out = []

    def caller(task):
        out.append((yield Membarrier("private_expedited")))  # not registered yet
        out.append((yield Membarrier("register_private_expedited")))
        before.extend(c.ipis for c in m.cpus)
        t0 = m.now
        out.append((yield Membarrier("private_expedited")))
        out.append(m.now - t0)
        m.done.succeed()

    before: list[int] = []
    a = m.spawn(spinner, "same-mm", affinity=(1,))
    a.data["mm"] = mine
    b = m.spawn(spinner, "other-mm", affinity=(2,))
    b.data["mm"] = other
    c = m.spawn(caller, "caller", affinity=(0,))
    c.data["mm"] = mine
    run(m)
    assert out[:3] == [EPERM, 0, 0]
    # syscall, the scan of the two other CPUs (20 ns each), the IPI's latency and its handler
    assert out[3] == 100 + 2 * 20 + 1_500 + 300
    assert mb.ipis == 1
    assert [c.ipis - b for c, b in zip(m.cpus, before, strict=True)] == [0, 1, 0]


def test_private_expedited_returns_at_once_with_one_cpu_or_nobody_else_running():
    for cpus in (1, 2):
        m = machine(cpus=cpus, syscall=100)
        mm = Mm("p", users=2)
        out = []

        def caller(task, m=m, out=out):
            yield Membarrier("register_private_expedited")
            t0 = m.now
            yield Membarrier("private_expedited")
            out.append(m.now - t0)
            m.done.succeed()

        c = m.spawn(caller, "caller", affinity=(0,))
        c.data["mm"] = mm
        run(m)
        assert m.models["membarrier"].ipis == 0
        assert out == [100 if cpus == 1 else 100 + 20]


def test_v6_single_threaded_process_returns_at_once_and_v415_lacks_global_expedited():
    m = machine(cpus=2, mb_era="v6", syscall=100)
    m415 = machine(cpus=2, mb_era="v4.15", syscall=100)
    out = {}
    for name, mach in (("v6", m), ("v4.15", m415)):

        def caller(task, mach=mach, name=name):
            r = []
            r.append((yield Membarrier("register_private_expedited")))
            r.append((yield Membarrier("private_expedited")))
            r.append((yield Membarrier("global_expedited")))
            out[name] = r
            mach.done.succeed()

        other = mach.spawn(spinner, "spin", affinity=(1,))
        other.data["mm"] = Mm("q")
        c = mach.spawn(caller, "caller", affinity=(0,))
        c.data["mm"] = Mm("p", users=1)
        run(mach)
    assert out["v6"] == [0, 0, 0]
    assert out["v4.15"] == [0, 0, EINVAL]
    assert m.models["membarrier"].returned_at_once == 2  # single user; no CPU in a registered mm


def test_global_waits_for_a_grace_period_but_not_on_one_cpu():
    lat = {}
    for cpus in (1, 2):
        m = machine(cpus=cpus)

        def caller(task, m=m, cpus=cpus):
            t0 = m.now
            yield Membarrier("global")
            lat[cpus] = m.now - t0
            m.done.succeed()

        m.spawn(caller, "caller", affinity=(0,))
        run(m)
    assert lat[1] == 0
    assert lat[2] >= 1 * MS  # at least a jiffy or two at HZ=1000
    assert m.models["rcu"].rcu.gps >= 1


def test_v6_registration_of_a_threaded_process_waits_for_a_grace_period():
    m = machine(cpus=2, mb_era="v6")
    lat = []

    def caller(task):
        t0 = m.now
        yield Membarrier("register_private_expedited")
        lat.append(m.now - t0)
        m.done.succeed()

    c = m.spawn(caller, "caller", affinity=(0,))
    c.data["mm"] = Mm("p", users=3)
    run(m)
    assert lat[0] >= 1 * MS


# ---------------------------------------------------------------------------- futex
def test_futex_wait_compares_then_sleeps_until_woken():
    m = machine(cpus=2)
    word = FutexWord(m, "w", 0)
    got = []

    def waiter(task):
        got.append((yield FutexWait(word, 1)))  # value differs: EAGAIN at once
        got.append((yield FutexWait(word, 0)))
        got.append(m.now)

    def waker(task):
        yield Sleep(1 * MS)
        got.append((yield FutexWake(word, 5)))
        m.done.succeed()

    m.spawn(waiter, "waiter", affinity=(0,))
    m.spawn(waker, "waker", affinity=(1,))
    run(m)
    assert got[0] == EAGAIN and got[1] == 0
    assert got[2] == 1 * MS and got[3] == 1


# ---------------------------------------------------------------------------- rcu_sync
@pytest.mark.parametrize("era", ["v4.4", "v5.4"])
def test_rcu_sync_pays_one_grace_period_for_back_to_back_writers(era):
    m = machine(cpus=2)
    rss = RcuSync(m, era)
    rss.log = []
    idle_after = []

    def writer(task):
        for _ in range(5):
            yield from rss.enter()
            assert not rss.is_idle()
            yield CpuWork(100 * US, user=False)
            yield from rss.exit()
        yield Sleep(100 * MS)  # long enough for the exit callback's grace period
        idle_after.append(rss.is_idle())
        yield from rss.enter()  # idle again: a new synchronous grace period
        yield from rss.exit()
        m.done.succeed()

    m.spawn(writer, "writer", affinity=(0,))
    run(m)
    assert rss.sync_gps == 2
    assert rss.skipped == 4
    assert idle_after == [True]
    assert m.models["rcu"].rcu.syncs == 2


def test_rcu_sync_v54_states_follow_the_kernel():
    m = machine(cpus=2)
    rss = RcuSync(m, "v5.4")
    seen = []

    def writer(task):
        yield from rss.enter()
        seen.append(rss.state_name())
        yield from rss.exit()
        seen.append(rss.state_name())  # PASSED -> EXIT, callback queued
        yield from rss.enter()
        yield from rss.exit()
        seen.append(rss.state_name())  # enter during EXIT waits for nothing; its exit: REPLAY
        yield Sleep(200 * MS)
        seen.append(rss.state_name())
        m.done.succeed()

    m.spawn(writer, "writer", affinity=(0,))
    run(m)
    assert seen == ["GP_PASSED", "GP_EXIT", "GP_REPLAY", "GP_IDLE"]
    assert rss.callbacks == 2  # the exit's call_rcu and the REPLAY requeue
    assert rss.sync_gps == 1


# ---------------------------------------------------------------------------- percpu-rwsem
@pytest.mark.parametrize(("mode", "syncs", "exp"), [("expedited", 4, 4), ("normal", 4, 0), ("rcu_sync", 1, 0)])
def test_percpu_rwsem_writer_grace_periods_per_mode(mode, syncs, exp):
    m = machine(cpus=2, writer_sync=mode)
    sem = m.models["percpu_rwsem"].new("sem")

    def writer(task):
        for _ in range(2):
            yield from sem.down_write(task)
            yield CpuWork(1 * MS, user=False)
            yield from sem.up_write()
        m.done.succeed()

    m.spawn(writer, "writer", affinity=(0,))
    run(m)
    rcu = m.models["rcu"].rcu
    assert rcu.syncs == syncs
    assert rcu.exp_gps == exp
    assert sem.writes == 2 and not sem.violations


@pytest.mark.parametrize(("throttle", "returns_jiffy"), [(True, 12), (False, 7)])
def test_2015_fast_no_hz_callbacks_wait_for_the_next_wakeup(throttle, returns_jiffy):
    """synchronize_sched() on an idle 2-CPU HZ=1000 RCU_FAST_NO_HZ machine (rcu-sync-2015's path).
    The caller's CPU idles with its unaccelerated callback until its wakeup at round_up(0 + 4, 4)
    = jiffy 4, which starts the GP; the GP kthread runs there (the waker's CPU) and its FQS at jiffy
    7 ends the GP. With the 2015 rule that CPU already advanced callbacks in jiffy 7 (idle exit),
    so it idles again with the ready callback until round_up(7 + 4, 4) = jiffy 12; v3.13 invokes
    it at once."""
    from sim.machine import Env, Machine
    from sim.params import KernelConfig, MachineConfig
    from sim.rng import Streams

    from .helpers import ZERO_COSTS

    k = KernelConfig(hz=1000, nohz_idle=True, wake_affine="waker")
    m = Machine(Env(), MachineConfig(cpus=2), k, ZERO_COSTS, Streams(1), None)
    rcu = Rcu(m, RcuConfig(era="v3.13", fast_no_hz=True, fnh_advance_once_per_jiffy=throttle))
    rcu.record = True
    out = []

    def caller(task):
        yield CpuWork(500 * US, user=False)
        yield SynchronizeRcu()
        out.append(m.env.now)
        m.done.succeed()

    m.spawn(caller, "caller", affinity=(0,))
    run(m)
    assert len(rcu.log_gp) == 1
    _, start, end = rcu.log_gp[0]
    assert start // MS == 4 and end // MS == 7
    assert out[0] // MS == returns_jiffy


def test_fnh_advance_once_per_jiffy_needs_v313_with_fast_no_hz():
    with pytest.raises(ConfigError, match="fnh_advance_once_per_jiffy"):
        RcuConfig(era="v6", fnh_advance_once_per_jiffy=True).check("kernel.rcu")
    with pytest.raises(ConfigError, match="fnh_advance_once_per_jiffy"):
        RcuConfig(era="v3.13", fast_no_hz=False, fnh_advance_once_per_jiffy=True).check("kernel.rcu")
    RcuConfig(era="v3.13", fnh_advance_once_per_jiffy=True).check("kernel.rcu")


def test_percpu_rwsem_readers_use_the_fast_path_only_without_writers():
    m = machine(cpus=2, writer_sync="rcu_sync")
    sem = m.models["percpu_rwsem"].new("sem")

    def reader(task):
        for _ in range(3):
            yield from sem.down_read()
            yield CpuWork(10 * US, user=False)
            yield from sem.up_read()
            yield Sleep(2 * MS)

    def writer(task):
        yield Sleep(1 * MS)
        yield from sem.down_write(task)
        yield CpuWork(3 * MS, user=False)
        yield from sem.up_write()
        yield Sleep(300 * MS)
        m.done.succeed()

    m.spawn(reader, "reader", affinity=(1,))
    m.spawn(writer, "writer", affinity=(0,))
    run(m)
    assert sem.fast_reads >= 1 and sem.slow_reads >= 1
    assert not sem.violations
    assert sem.rss is not None and sem.rss.is_idle()


# ---------------------------------------------------------------------------- liburcu
def test_read_loop_cost_and_critical_section_share_per_flavor():
    m = machine(cpus=1)
    costs = UrcuCosts(read_loop_ps=3_000, read_cs_share=0.2, fence_ps=10_000)
    memb = Urcu(m, "memb", "private_expedited", costs)
    memb_nomb = Urcu(m, "memb", "none", costs)
    mb = Urcu(m, "mb", "private_expedited", costs)
    bp_fences = Urcu(m, "bp", "none", costs)
    bp_mb = Urcu(m, "bp", "private_expedited", costs)
    sig = Urcu(m, "signal", "shared", costs)
    assert memb.iter_ps == 3_000 and memb.f == pytest.approx(0.2)
    assert sig.iter_ps == 3_000 and sig.membarrier_cmd is None
    assert mb.iter_ps == memb_nomb.iter_ps == 33_000  # three fences
    assert mb.f == pytest.approx((600 + 20_000) / 33_000)
    assert bp_fences.iter_ps == 23_000 and bp_fences.f == pytest.approx((600 + 20_000) / 23_000)
    assert bp_mb.iter_ps == 3_000 and not bp_mb.has_wake and bp_mb.membarrier_cmd == "private_expedited"


def urcu_run(flavor, membarrier, duration=300 * MS, **extra):
    over = {
        "workload.flavor": flavor,
        "workload.membarrier": membarrier,
        "workload.duration": duration,
        "costs.jitter_cv": 0.0,
    }
    over.update(extra)
    scn = sc.validate(sc.load("scenarios/urcu-membarrier-2020.toml", over), models.catalog())
    return sc.run(scn, models.catalog()).metrics


def test_test_urcu_shared_blocks_for_grace_periods_and_private_expedited_ipis():
    shared = urcu_run("memb", "shared")
    private = urcu_run("memb", "private_expedited")
    assert shared["membarrier.calls_global"] == shared["urcu.membarrier_calls"] > 0
    assert shared["rcu.synchronize_calls"] >= shared["urcu.membarrier_calls"]
    assert shared["membarrier.ipis"] == 0
    # each grace period issues smp_mb_master() at least twice
    assert shared["urcu.membarrier_calls"] >= 2 * shared["urcu.grace_periods"]
    assert private["membarrier.ipis"] > 0 and private["rcu.synchronize_calls"] == 0
    assert private["writes"] > 3 * shared["writes"]
    assert private["reads"] < shared["reads"]  # the writers' IPIs and CPU time cost the readers


def test_test_urcu_bp_without_membarrier_polls_and_pays_fences():
    fences = urcu_run("bp", "none")
    mb = urcu_run("bp", "private_expedited")
    assert fences["urcu.membarrier_calls"] == 0 and fences["urcu.polls"] > 0
    # no futex mode in bp: two membarriers per grace period (the last one may be cut by the stop)
    assert 2 * mb["urcu.grace_periods"] - 1 <= mb["urcu.membarrier_calls"] <= 2 * mb["urcu.grace_periods"]
    assert mb["reads"] > 4 * fences["reads"]


@pytest.mark.parametrize("flavor", ["mb", "signal"])
def test_test_urcu_other_flavors_run(flavor):
    met = urcu_run(flavor, "none", duration=100 * MS)
    assert met["writes"] > 0 and met["reads"] > 0
    assert met["urcu.membarrier_calls"] == 0
    if flavor == "signal":
        assert met["urcu.signals"] > 0


def test_explicit_readers_count_every_section():
    met = urcu_run(
        "memb", "private_expedited", duration=60 * MS, **{"workload.reader_model": "explicit", "workload.read_cs_loops": 100}
    )
    assert met["reads"] == int(met["reads"]) > 0
    assert met["writes"] > 0


def test_bad_test_urcu_input_names_the_field():
    cat = models.catalog()
    with pytest.raises(ConfigError, match="workload.flavor"):
        sc.validate(sc.load("scenarios/urcu-membarrier-2020.toml", {"workload.flavor": "qsbr"}), cat)
    with pytest.raises(ConfigError, match="workload.reader_model"):
        sc.validate(sc.load("scenarios/urcu-membarrier-2020.toml", {"workload.reader_model": "explicit"}), cat)
    with pytest.raises(ConfigError, match="workload.costs.read_cs_share"):
        sc.validate(sc.load("scenarios/urcu-membarrier-2020.toml", {"workload.costs.read_cs_share": 1.5}), cat)
    with pytest.raises(ConfigError, match="kernel.percpu_rwsem.writer_sync"):
        sc.validate(sc.load("scenarios/rcu-sync-2015.toml", {"kernel.percpu_rwsem.writer_sync": "fast"}), cat)


# ---------------------------------------------------------------------------- the stories
def check_contract(rows, story):
    assert rows and all(r.story == story for r in rows)
    for r in rows:
        j = r.to_json()
        for key in ("story", "metric", "config", "reference", "simulated", "unit", "role", "rel_error", "target", "source"):
            assert key in j
        assert r.role in ("fitted", "predicted")
        assert (r.target is None) == (r.role == "fitted")
        assert math.isfinite(r.simulated)


def test_rcu_sync_story_contract_and_shape():
    from calibration.stories import rcu_sync_2015 as story

    r = story.simulate(seeds=1, pairs=100)
    rows = story.rows_from(r, pairs=100)
    check_contract(rows, "rcu-sync-2015")
    assert [row.role for row in rows] == ["fitted", "predicted", "predicted", "predicted"]
    exp, normal, rsync = (r[k]["total_s"] for k in ("expedited", "normal", "rcu_sync"))
    assert normal > 2 * exp  # two normal grace periods per write cost milliseconds
    assert rsync < exp  # rcu_sync skips the grace periods and the stopper's IPIs/switches
    assert 1 <= r["rcu_sync"]["sync_gps"] <= 3
    assert abs(exp / 13.5 - 1) < 0.1  # the fitted anchor (100 pairs, scaled)


def test_urcu_story_contract_and_shape():
    from calibration.stories import urcu_membarrier_2020 as story

    r = story.simulate(seeds=1, duration=2_000 * MS)
    rows = story.rows_from(r, duration=2_000 * MS)
    check_contract(rows, "urcu-membarrier-2020")
    assert [row.role for row in rows] == ["fitted", "fitted", "predicted", "predicted", "predicted"]
    # the fitted loop costs hold at 2 s as at 10 s
    assert abs(rows[0].rel_error) < 0.05 and abs(rows[1].rel_error) < 0.05
    assert r["patched_memb"]["reads"] < r["unpatched_memb"]["reads"]  # PRIVATE_EXPEDITED costs readers
    assert r["patched_memb"]["writes"] > 5 * r["unpatched_memb"]["writes"]  # ... and frees writers
    assert r["patched_memb"]["membarrier_calls"] > 100 * r["unpatched_memb"]["membarrier_calls"]
    assert r["patched_bp"]["reads"] > 5 * r["unpatched_bp"]["reads"]
    # the write ratio row is expressed in log2 with a factor-of-2 tolerance
    assert rows[3].target == pytest.approx(1 / rows[3].reference)


@pytest.mark.slow
def test_validate_cli_runs_both_stories_with_json_and_check():
    import json
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "app", "validate", "urcu-membarrier-2020", "rcu-sync-2015", "--json", "--check", "--seeds", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    rows = doc["rows"]
    assert {r["story"] for r in rows} == {"urcu-membarrier-2020", "rcu-sync-2015"}
    assert len(rows) == 9
    assert all(r["ok"] for r in rows if r["role"] == "fitted"), rows  # no stale fit
    missed = [r for r in rows if not r["ok"]]
    assert (p.returncode == 1) == bool(missed)


def test_stories_are_registered():
    from calibration import stories

    for name in ("urcu-membarrier-2020", "rcu-sync-2015"):
        st = stories.get(name)
        assert st is not None and st.name == name


def test_zero_cost_helper_is_exact():
    # guard for the exact-latency assertions above: no jitter, costs as given
    m = machine(cpus=1, syscall=7)
    done = []

    def s(task):
        t0 = m.now
        yield Call(lambda c, t: 0)
        yield SynchronizeRcu()  # one CPU: returns at once
        done.append(m.now - t0)
        m.done.succeed()

    m.spawn(s, "s")
    run(m)
    assert done == [7]


def test_global_expedited_ipis_cpus_of_registered_processes_only():
    m = machine(cpus=3, mb_era="v6", syscall=100, ipi_latency=1_000, ipi_handler=200)
    reg, unreg = Mm("reg", users=1), Mm("unreg", users=1)
    before: list[int] = []

    def registrar(task):
        yield Membarrier("register_global_expedited")
        while True:
            yield CpuWork(10 * MS)

    def caller(task):
        yield Sleep(1 * MS)
        before.extend(c.ipis for c in m.cpus)
        r = yield Membarrier("global_expedited")
        assert r == 0
        m.done.succeed()

    a = m.spawn(registrar, "registered", affinity=(1,))
    a.data["mm"] = reg
    b = m.spawn(spinner, "unregistered", affinity=(2,))
    b.data["mm"] = unreg
    m.spawn(caller, "caller", affinity=(0,))
    run(m)
    assert [c.ipis - x for c, x in zip(m.cpus, before, strict=True)] == [0, 1, 0]


def test_same_seed_same_result():
    a = urcu_run("memb", "private_expedited", duration=100 * MS, **{"costs.jitter_cv": 0.1})
    b = urcu_run("memb", "private_expedited", duration=100 * MS, **{"costs.jitter_cv": 0.1})

    def clean(d):
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    assert clean(a) == clean(b)
