"""Tree RCU invariants on random machines, configurations and task scripts (Hypothesis)."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st

from models.rcu import CallRcu, Rcu, RcuBarrier, RcuConfig, RcuReadLock, RcuReadUnlock, SynchronizeRcu, SynchronizeRcuExpedited
from sim.machine import Env, Machine
from sim.ops import Sleep, cpu
from sim.params import Costs, KernelConfig, MachineConfig
from sim.rng import Streams
from sim.units import MS, US, S

OPS = ["work", "call", "calls", "sync", "exp", "read", "barrier", "sleep"]


@st.composite
def setups(draw):
    ncpu = draw(st.integers(1, 4))
    era = draw(st.sampled_from(["v3.13", "v6"]))
    nocb = draw(st.sampled_from(["none", "all", "some"]))
    if nocb == "some":
        nocb = tuple(sorted(draw(st.sets(st.integers(0, ncpu - 1), min_size=1))))
    rcu = dict(
        era=era,
        nocb=nocb,
        preemptible=draw(st.booleans()),
        lazy=draw(st.booleans()) if era == "v6" else False,
        rcu_expedited=draw(st.sampled_from([False, False, True])),
        rcu_normal=draw(st.sampled_from([False, False, True])),
        wake_from_gp=draw(st.booleans()) if era == "v6" else False,
        blimit=draw(st.sampled_from([1, 10])),
    )
    kern = dict(
        hz=draw(st.sampled_from([100, 250, 1000])),
        preempt=draw(st.sampled_from(["none", "voluntary", "full"])),
        nohz_idle=draw(st.booleans()),
        wake_affine=draw(st.sampled_from(["prev", "waker"])),
    )
    tasks = draw(st.lists(st.lists(st.sampled_from(OPS), min_size=1, max_size=8), min_size=1, max_size=4))
    seed = draw(st.integers(0, 2**31))
    return ncpu, rcu, kern, tasks, seed


def simulate(setup):
    ncpu, rcu_kw, kern, tasks, seed = setup
    env = Env()
    m = Machine(env, MachineConfig(cpus=ncpu), KernelConfig(**kern), Costs(), Streams(seed))
    rcu = Rcu(m, RcuConfig(**rcu_kw))
    rcu.record = True
    finished = [0]

    def script(ops):
        def s(task):
            for op in ops:
                if op == "work":
                    yield cpu(300 * US)
                elif op == "call":
                    yield CallRcu()
                elif op == "calls":
                    yield CallRcu(count=25, cost=500)
                elif op == "sync":
                    yield SynchronizeRcu()
                elif op == "exp":
                    yield SynchronizeRcuExpedited()
                elif op == "read":
                    yield RcuReadLock()
                    yield cpu(200 * US, user=False)
                    yield RcuReadUnlock()
                elif op == "barrier":
                    yield RcuBarrier()
                elif op == "sleep":
                    yield Sleep(2 * MS)
            finished[0] += 1

        return s

    for i, ops in enumerate(tasks):
        m.spawn(script(ops), f"t{i}")
    # run until the tasks are done and every callback has drained (lazy ones wait 10 s)
    limit = 15 * S
    while env.now < limit:
        env.run(until=env.timeout(100 * MS))
        if finished[0] == len(tasks) and rcu.cbs_invoked == rcu.cbs_queued and not rcu.in_progress:
            break
    return m, rcu, finished[0], len(tasks)


@given(setups())
def test_rcu_invariants(setup):
    m, rcu, finished, ntasks = simulate(setup)
    ncpu, rcu_kw, *_ = setup
    # every task finished: no lost wakeup of a synchronize_rcu / barrier waiter
    assert finished == ntasks
    # every callback runs eventually
    assert rcu.cbs_invoked == rcu.cbs_queued
    gps = sorted(rcu.log_gp, key=lambda g: g[1])
    starts = [g[1] for g in gps]
    # no callback runs before a grace period that began after its call_rcu() has ended
    for queued, invoked, _ctx, kind, _cpu in rcu.log_cb:
        if kind == "barrier":
            continue  # rcu_barrier's callbacks are entrained behind others (v6), not given a GP of their own
        i = bisect.bisect_left(starts, queued)
        assert any(e <= invoked for (_, s, e) in gps[i:]), (queued, invoked, kind)
    # a grace period never ends while a reader that began before it is still inside
    for rs, re_ in rcu.log_read:
        for _, s, e in gps:
            assert not (rs < s and re_ > e), ((rs, re_), (s, e))
    # rcu_barrier() returns only after every callback queued before it was invoked
    for bs, be in rcu.log_barrier:
        for queued, invoked, _ctx, kind, _cpu in rcu.log_cb:
            if queued < bs and kind != "barrier":
                assert invoked <= be
    # offloaded callbacks run only in kthreads, never in softirq
    off = set(rcu.offloaded)
    for _queued, _invoked, ctx, _kind, cpu_ in rcu.log_cb:
        if cpu_ in off:
            assert ctx == "kthread"
        else:
            assert ctx == "softirq"
