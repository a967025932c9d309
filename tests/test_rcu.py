"""Tree RCU: hand-checkable behaviours, knobs, and the netns story's shape and contract."""

from __future__ import annotations

import math

import pytest

from models.rcu import CallRcu, Rcu, RcuBarrier, RcuConfig, SynchronizeRcu, SynchronizeRcuExpedited
from sim import scenario as sc
from sim.errors import ConfigError
from sim.machine import Env, Machine
from sim.ops import cpu
from sim.params import Costs, KernelConfig, MachineConfig
from sim.rng import Streams
from sim.units import MS, US

from .helpers import every_task


def machine(ncpu=2, hz=1000, wake_affine="prev", **rcu):
    env = Env()
    k = KernelConfig(hz=hz, wake_affine=wake_affine)
    m = Machine(env, MachineConfig(cpus=ncpu), k, Costs(jitter_cv=0.0), Streams(1))
    r = Rcu(m, RcuConfig(**rcu))
    r.record = True
    return m, r


def run_script(m, ops_list, until=2_000 * MS):
    times = []

    def s(task):
        for op in ops_list:
            t0 = m.now
            yield op
            times.append(m.now - t0)
        m.done.succeed()

    m.spawn(s, "caller", affinity=(0,))
    m.env.run(until=m.env.any_of([m.done, m.env.timeout(until)]))
    return times


def test_fqs_defaults_follow_hz():
    # rcu_init_geometry: 1 + (HZ > 250) + (HZ > 500) + nr_cpu_ids / 256
    assert RcuConfig().fqs_jiffies(250, 4) == (1, 1)
    assert RcuConfig().fqs_jiffies(1000, 4) == (3, 3)
    assert RcuConfig().fqs_jiffies(100, 300) == (2, 2)
    assert RcuConfig(jiffies_till_first_fqs=5).fqs_jiffies(1000, 4) == (5, 3)


def test_gp_stride_default_matches_kernel_table():
    # nr_cpu_ids / int_sqrt(nr_cpu_ids) (kernel/rcu/tree_nocb.h)
    assert [RcuConfig().gp_stride(n) for n in (1, 2, 3, 4, 8, 9, 16, 32, 64)] == [1, 2, 3, 2, 4, 3, 4, 6, 8]


def test_one_cpu_synchronize_returns_at_once():
    m, r = machine(ncpu=1)
    (t,) = run_script(m, [SynchronizeRcu()])
    assert t < 10 * US and r.gps == 0


def test_preemptible_rcu_has_no_one_cpu_shortcut():
    m, r = machine(ncpu=1, preemptible=True)
    (t,) = run_script(m, [SynchronizeRcu()])
    assert t > 1 * MS and r.gps == 1


def test_synchronize_waits_a_full_gp_ending_on_a_tick():
    m, r = machine(ncpu=2, hz=1000)
    times = run_script(m, [cpu(100 * US), SynchronizeRcu()])
    assert r.gps >= 1
    (_, start, end) = r.log_gp[0]
    # the GP kthread sleeps jiffies_till_first_fqs (3 at HZ=1000) on the timer wheel
    assert end - start >= 2 * MS
    assert times[1] >= end - start
    assert times[1] < 10 * MS


def test_expedited_is_fast_and_needs_no_normal_gp():
    m, r = machine(ncpu=4, hz=250)
    times = run_script(m, [cpu(100 * US), SynchronizeRcuExpedited()])
    assert times[1] < 200 * US
    assert r.exp_gps == 1 and r.gps == 0


def test_rcu_expedited_knob_and_rcu_normal_wins():
    m, r = machine(ncpu=4, hz=250, rcu_expedited=True)
    run_script(m, [SynchronizeRcu()])
    assert r.exp_gps == 1 and r.gps == 0
    m, r = machine(ncpu=4, hz=250, rcu_expedited=True, rcu_normal=True)
    run_script(m, [SynchronizeRcuExpedited()])
    assert r.exp_gps == 0 and r.gps >= 1


def test_v313_expedited_runs_a_stopper_on_every_cpu():
    m, r = machine(ncpu=3, hz=250, era="v3.13")
    run_script(m, [SynchronizeRcuExpedited(), SynchronizeRcuExpedited()])
    stoppers = [t for t in m.tasks.values() if t.name.startswith("migration/")]
    assert len(stoppers) == 3 and all(t.prio == 99 for t in stoppers)
    assert r.exp_gps == 2


def test_v6_expedited_gp_is_driven_by_the_worker_kthread():
    # synchronize_rcu_expedited() queues the GP on rcu_exp_gp_kthread_worker and sleeps;
    # the worker (SCHED_OTHER without CONFIG_RCU_EXP_KTHREAD) IPIs, waits and wakes it
    m, r = machine(ncpu=2, hz=250)
    tasks = every_task(m)
    times = run_script(m, [cpu(100 * US), SynchronizeRcuExpedited(), SynchronizeRcuExpedited()])
    (kw,) = [t for t in m.tasks.values() if t.name == "rcu_exp_gp_kthread_worker"]
    assert kw.kthread and kw.policy == "other" and kw.affinity is None
    assert r.exp_gps == 2 and r.gps == 0
    assert kw.wakeups == 2  # created at the first GP, woken for the second
    caller = next(t for t in tasks() if t.name == "caller")
    assert caller.wakeups >= 3  # spawn, then woken by the worker after each GP
    # each wait includes the worker's wakeup and the requester's: more than two wakeup costs
    assert all(t > 2 * m.costs.wakeup for t in times[1:])


@pytest.mark.parametrize("rule", ["weight", "pack"])
def test_v6_isolated_expedited_gp_crosses_cpus_only_where_the_kernel_does(rule):
    # The worker is woken by the requester (kthread_queue_work -> wake_up_process). Mainline
    # placement ('weight') sends it to the idle CPU: an IPI and an idle exit there, then the
    # requester's wakeup back on its own CPU, which went idle meanwhile: two idle exits.
    # Where wakeups stay on a lone waker's CPU ('pack', measured by the collector's
    # wake_placement item and seen under ftrace on the development machine) the worker runs
    # on the requester's CPU once it sleeps; the idle CPU is quiescent (EQS, no IPI) and the
    # requester is woken locally: no IPI, no idle exit.
    m, r = machine(ncpu=2, hz=250, wake_affine=rule)
    times = run_script(m, [cpu(100 * US), SynchronizeRcuExpedited(), cpu(2 * MS), SynchronizeRcuExpedited()])
    (kw,) = [t for t in m.tasks.values() if t.name == "rcu_exp_gp_kthread_worker"]
    exits = sum(c.idle_exits for c in m.cpus)
    if rule == "pack":
        assert kw.cpu == 0 and times[3] < m.costs.idle_exit
    else:
        assert kw.cpu == 1 and times[3] > 2 * m.costs.idle_exit and exits >= 3
    assert r.exp_gps == 2


def test_v6_expedited_requests_during_a_gp_share_the_next_one():
    # A holds exp_mutex while GP 1 runs; B and C need a GP that starts after their request:
    # A's mutex_unlock hands the mutex to B, whose GP also serves C (exp_funnel_lock)
    m, r = machine(ncpu=3, hz=250)
    done = []

    def caller(delay):
        def s(task):
            yield cpu(delay)
            yield SynchronizeRcuExpedited()
            done.append(task.name)
            if len(done) == 3:
                m.done.succeed()

        return s

    for i, d in enumerate((10 * US, 12 * US, 14 * US)):
        m.spawn(caller(d), f"c{i}", affinity=(i,))
    m.env.run(until=m.env.any_of([m.done, m.env.timeout(100 * MS)]))
    assert sorted(done) == ["c0", "c1", "c2"] and done[0] == "c0"
    assert r.exp_gps == 2
    assert r.exp_holder is None and not r.exp_waiters


def test_exp_kthread_makes_the_worker_sched_fifo_and_is_v6_only():
    m, r = machine(ncpu=2, hz=250, exp_kthread=True)
    run_script(m, [SynchronizeRcuExpedited()])
    (kw,) = [t for t in m.tasks.values() if t.name == "rcu_exp_gp_kthread_worker"]
    assert kw.policy == "fifo" and kw.prio == 1  # kthread_prio with CONFIG_RCU_BOOST
    with pytest.raises(ConfigError, match="exp_kthread"):
        RcuConfig(era="v3.13", exp_kthread=True).check("kernel.rcu")


@pytest.mark.parametrize("era", ["v3.13", "v6"])
def test_offloaded_callbacks_run_in_kthreads(era):
    m, r = machine(ncpu=4, hz=250, era=era, nocb="all")
    run_script(m, [CallRcu(count=40), SynchronizeRcu(), RcuBarrier()])
    assert r.cbs_invoked == r.cbs_queued > 40
    assert r.cbs_invoked_softirq == 0
    names = {t.name for t in m.tasks.values() if t.kthread}
    if era == "v3.13":
        assert {f"rcuos/{i}" for i in range(4)} <= names
    else:
        assert {"rcuog/0", "rcuog/2"} <= names and {f"rcuoc/{i}" for i in range(4)} <= names


def test_nocb_list_offloads_only_those_cpus():
    m, r = machine(ncpu=4, hz=250, nocb=(1, 3))
    assert r.offloaded == (1, 3)
    with pytest.raises(ConfigError, match="nocb"):
        RcuConfig(nocb=(7,)).offloaded(4)


def test_softirq_batches_respect_blimit():
    m, r = machine(ncpu=2, hz=1000, blimit=10)
    run_script(m, [CallRcu(count=95), SynchronizeRcu()])
    m.env.run(until=m.env.timeout(50 * MS))
    assert r.cbs_invoked == 96
    assert r.cbs_invoked_softirq == 96


def test_bad_rcu_knobs_name_the_field():
    cat = __import__("models").catalog()
    for key, value, words in [
        ("kernel.rcu.nocb", "some", "kernel.rcu.nocb"),
        ("kernel.rcu.era", "v5", "kernel.rcu.era"),
        ("kernel.rcu.blimit", 0, "kernel.rcu.blimit"),
        ("kernel.rcu.qlowmark", 20000, "kernel.rcu.qlowmark"),
    ]:
        with pytest.raises(ConfigError, match=words):
            sc.validate(sc.load("scenarios/netns-2014.toml", {key: value}), cat)


# ---------------------------------------------------------------------------- netns story
def netns_rate(cpus, nocb, steps, paths="v3.13", seeds=2):
    from calibration.stories import netns_2014 as story

    return story.rate(story.scenario(cpus, nocb, steps, paths=paths), seeds)


def test_netns_one_cpu_beats_four_and_does_not_regress():
    for steps in ("add", "add+exec"):
        r1n, r1a = netns_rate(1, "none", steps), netns_rate(1, "all", steps)
        r4n, r4a = netns_rate(4, "none", steps), netns_rate(4, "all", steps)
        assert abs(r1a / r1n - 1) < 0.1  # no regression on 1 CPU
        assert r1n > r4n and r1a > r4a  # one CPU beats four
        assert r4a < 0.5 * r4n  # NOCB_ALL hurts on four CPUs (bisect-era RCU, v3.9)


def test_netns_later_paths_wait_less():
    from calibration.stories import netns_2014 as story

    cat = __import__("models").catalog()
    gps = {}
    for paths in ("v3.8", "v3.10", "v3.13", "v3.15"):
        res = sc.run(story.scenario(4, "none", "full", paths=paths, era="v3.13", routers=20), cat)
        gps[paths] = res.metrics["rcu.synchronize_calls"]
    # 5, 5, 9 and 4 synchronize_rcu() per router (docs/kernel/rcu-nocb-netns.md §5.2)
    assert gps == {"v3.8": 100.0, "v3.10": 100.0, "v3.13": 180.0, "v3.15": 80.0}


@pytest.mark.slow
def test_netns_story_contract():
    from calibration.stories import get
    from calibration.validation import StoryOptions

    rows = get("netns-2014").rows(StoryOptions(seeds=1, workers=2))
    # the runs spread over worker processes give the rows one process gives, bit for bit
    assert [r.to_json() for r in get("netns-2014").rows(StoryOptions(seeds=1, workers=1))] == [r.to_json() for r in rows]
    assert {r.role for r in rows} == {"fitted", "predicted"}
    fitted = [r for r in rows if r.role == "fitted"]
    # the two absolute nocbno anchors (add, add + exec); every ratio is a prediction
    # the fit used three seeds, this runs one: still within the fit tolerance, else it is stale
    assert len(fitted) == 2 and all(r.ok for r in fitted), [(r.config, r.rel_error) for r in fitted]
    assert {r.config for r in fitted} == {"4 CPU nocbno"}
    for r in rows:
        assert math.isfinite(r.simulated) and r.source.startswith("000_")
        assert (r.target is None) == (r.role == "fitted")
    by = {(r.metric, r.config): r for r in rows}
    # what the model achieves today; README lists the misses and why
    assert by[("nocball/nocbno rate, ip netns add", "1 CPU")].ok
    assert by[("nocball/nocbno rate, add + 1 exec", "1 CPU")].ok
    for metric in ("nocball/nocbno rate, ip netns add", "nocball/nocbno rate, add + 1 exec"):
        assert by[(metric, "4 CPU")].simulated < 0.5  # the regression appears, deeper than published
    assert by[("4-CPU nocball / 1-CPU rate, full script", "3.10-3.12 kernels")].simulated < 0.9


def test_netns_scenario_carries_the_fitted_cost():
    import tomllib
    from pathlib import Path

    root = Path(__file__).parents[1]
    fit = tomllib.loads((root / "calibration/fits/netns-2014.toml").read_text())["fitted"]
    scn = tomllib.loads((root / "scenarios/netns-2014.toml").read_text())
    assert set(fit) == {"mount_cost", "setup_net"}
    for name, value in fit.items():
        assert scn["workload"][name] == value


def _netns_ops(paths, body, at_exit):
    """The ops one program of the fake-router script yields, in order (not run)."""
    from calibration.stories import netns_2014 as story

    scn = story.scenario(4, "none", "add+exec", paths=paths, routers=1)
    m, wl = sc.build(scn, __import__("models").catalog())
    task = next(iter(m.tasks.values()))
    return list(wl._program(getattr(wl, body), getattr(wl, at_exit))(task))


@pytest.mark.parametrize("paths", ["v3.8", "v3.10", "v3.13"])
def test_netns_exit_order_follows_do_exit(paths):
    # 3.9 do_exit runs exit_task_work (the deferred fputs: file_free_rcu callbacks) before
    # exit_notify -> exit_task_namespaces (the nsproxy's synchronize_rcu); 3.10+ drops the
    # namespaces first (kernel/exit.c of each)
    ops = _netns_ops(paths, "_ip_netns_add", "_exit_add")
    kinds = [type(op).__name__ for op in ops]
    last_sync = max(i for i, k in enumerate(kinds) if k == "SynchronizeRcu")
    last_call = max(i for i, k in enumerate(kinds) if k == "CallRcu")
    assert (last_call < last_sync) == (paths == "v3.8")


def test_netns_mounts_freed_inline_before_3_13():
    # 3.8/3.9 mntput_no_expire -> mntfree -> free_vfsmnt frees in the caller, and
    # release_mounts waits for nothing; 3.13 frees each mount by call_rcu after
    # namespace_unlock's synchronize_rcu (fs/namespace.c)
    new = _netns_ops("v3.13", "_ip_netns_exec", "_exit_exec")
    assert max(op.count for op in new if isinstance(op, CallRcu)) >= 30  # one per mount
    assert sum(isinstance(op, SynchronizeRcu) for op in new) == 4  # + namespace_unlock x2
    for paths in ("v3.8", "v3.10"):  # 3.10-3.12 as 3.8/3.9 here
        old = _netns_ops(paths, "_ip_netns_exec", "_exit_exec")
        assert max(op.count for op in old if isinstance(op, CallRcu)) < 10
        assert sum(isinstance(op, SynchronizeRcu) for op in old) == 2  # nsproxy: unshare, exit


# ---------------------------------------------------------------------------- v3.9 FAST_NO_HZ
def _v39(ncpu=4):
    return machine(ncpu=ncpu, hz=250, era="v3.9", fast_no_hz=True)


def test_v39_no_callbacks_resets_the_drain_machine():
    # rcu_prepare_for_idle (v3.9): "No callbacks" -> holdoff = jiffies - 1, drain = 0
    m, r = _v39()
    rdp, c0 = r.rdp[0], m.cpus[0]
    rdp.holdoff, rdp.drain = 0, 2
    r._idle_enter(c0)
    assert (rdp.holdoff, rdp.drain, rdp.tick_keep) == (-1, 0, -1)


def test_v39_tick_stop_is_decided_at_idle_entry():
    from models.rcu.tree import Callback

    m, r = _v39()
    rdp, c0 = r.rdp[0], m.cpus[0]
    rdp.nxt.append(Callback(0, None, False, 0, 0))
    # in a holdoff jiffy rcu_needs_cpu() keeps the tick up to the next one...
    rdp.holdoff = 0
    r._idle_enter(c0)
    assert rdp.tick_keep == 1 and not r._needs_cpu_v39(c0)  # (asked at jiffy 0: not a tick)
    # ...otherwise it lets it stop; "Dyntick with callbacks" then sets holdoff *after* the
    # decision (tick_nohz_idle_enter runs before rcu_idle_enter) and arms a timer instead
    # (the callback now waits for the running GP 1 and RCU needs nothing from this CPU)
    rdp.waiting.append([1, rdp.nxt])
    rdp.nxt = []
    r.gpnum, rdp.gp_seen = 1, 1
    rdp.holdoff, rdp.drain = -1, 3
    assert not r._pending(rdp)
    r._idle_enter(c0)
    assert rdp.holdoff == 0 and rdp.drain == 0 and rdp.tick_keep == -1 and rdp.fnh_armed == 4


def test_v39_future_gp_callbacks_make_rcu_pending():
    # cpu_needs_another_gp (v3.9-v3.13): RCU idle, callbacks numbered for a later GP
    from models.rcu.tree import Callback

    for era, pending in (("v3.9", True), ("v3.13", True), ("v6", False)):
        m, r = machine(ncpu=2, hz=250, era=era)
        rdp = r.rdp[1]
        rdp.gp_seen, rdp.completed_seen = r.gpnum, r.completed
        rdp.waiting.append([r.completed + 1, [Callback(0, None, False, 0, 1)]])
        assert r._pending(rdp) is pending


def test_v39_synchronize_on_idle_machine_is_pushed_within_a_jiffy():
    # 81e5949 nocbno: the waiter's CPU idles with its wake-me callback and FAST_NO_HZ
    # pushes the GP (QS, forced scans, softirq) instead of waiting for ticks
    m, r = _v39()
    times = run_script(m, [op for _ in range(20) for op in (cpu(1_300 * US), SynchronizeRcu())])
    syncs = times[1::2]
    assert len(syncs) == 20 and max(syncs) < 4 * MS  # one jiffy at HZ=250
    assert sorted(syncs)[10] < 1 * MS


@pytest.mark.parametrize("era", ["v6", "v3.13"])
def test_other_activitys_call_rcu_makes_an_idle_machine_run_grace_periods(era):
    """Costs.other_call_rcu_per_s: callbacks of the machine's other activity on random CPUs, each
    asking for a grace period; an idle CPU that holds one keeps its tick until it is invoked."""

    def idle_machine(rate: int, seed: int = 1):  # type: ignore[no-untyped-def]
        k = KernelConfig(hz=250, wake_affine="prev")
        m = Machine(Env(), MachineConfig(cpus=2), k, Costs(jitter_cv=0.0, other_call_rcu_per_s=rate), Streams(seed))
        r = Rcu(m, RcuConfig(era=era))
        m.env.run(until=m.env.timeout(2_000 * MS))
        return m, r

    m, r = idle_machine(20)
    gps = r.metrics()["grace_periods"]
    invoked = r.metrics()["callbacks_invoked"]
    # 20 a second for 2 s: about 40 callbacks (Poisson: 25-58 here), every one invoked by now
    # but those of the last few jiffies; close ones share a grace period
    assert 25 <= invoked <= 58 and 0.5 * invoked <= gps <= invoked
    assert {c.index for c in m.cpus if c.ticks} == {0, 1}  # both CPUs held some and ticked for them
    m0, r0 = idle_machine(0)
    assert r0.metrics()["grace_periods"] == 0 and all(c.ticks == 0 for c in m0.cpus)
    keys = ("grace_periods", "callbacks_invoked", "gp_latency_mean_ms")
    again, other = idle_machine(20)[1].metrics(), idle_machine(20, seed=2)[1].metrics()
    assert [again[k] for k in keys] == [r.metrics()[k] for k in keys] != [other[k] for k in keys]


def test_netns_paths_table_covers_every_era_of_the_knob():
    import typing

    from models.workloads.netns import PATHS, NetnsConfig

    assert set(PATHS) == set(typing.get_args(typing.get_type_hints(NetnsConfig)["paths"]))
    # the eras differ where the kernel changed: nsproxy waits end in 3.15, namespace_unlock
    # waits and RCU mount frees come in 3.13, the exit order changes in 3.10
    assert [e for e, p in PATHS.items() if p.wait_nsproxy] == ["v3.8", "v3.10", "v3.13"]
    assert [e for e, p in PATHS.items() if p.wait_unlock] == ["v3.13", "v3.15", "v6"]
    assert [e for e, p in PATHS.items() if p.files_before_ns] == ["v3.8"]
