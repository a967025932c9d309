"""Lock models on hand-checked timelines: every cost is chosen, no jitter, so times are exact."""

from __future__ import annotations

import dataclasses

import pytest

from models.locks.config import LocksConfig
from models.locks.core import Lock, LockModel, RtMutex, Unlock
from sim.errors import ConfigError
from sim.ops import cpu, sleep
from sim.units import MS

from .helpers import machine


def run(m, until=10 * MS):
    m.env.run(until=m.env.timeout(until))


def model(m, **cfg):
    lm = LockModel(m, LocksConfig(**cfg))
    lm.log = []
    return lm


def events(lm, kind):
    return [e for e in lm.log if e[0] == kind]


def test_raw_spinlock_waiter_spins_and_gets_the_lock_after_a_cacheline_transfer():
    m = machine(cpus=2)
    lm = model(m, atomic=10, cacheline=100)
    L = lm.new_lock("spinlock", "L")

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def b(task):
        yield cpu(2_000)
        yield Lock(L, 5_000)
        yield Unlock(L)

    ta = m.spawn(a, "a", affinity=[0])
    tb = m.spawn(b, "b", affinity=[1])
    run(m)
    # a: lock 10 + hold 10000 -> release at 10010, +10 -> ends 10020
    # b: spins from 2000; the release hands it the lock at 10010; it notices at 10110,
    #    pays 10 + 5000 -> release at 15120, +10 -> ends 15130
    assert ta.ended == 10_020
    assert tb.ended == 15_130
    assert [(e[1], e[3], e[4]) for e in events(lm, "acquire")] == [(0, ta.tid, "fast"), (10_010, tb.tid, "handoff")]
    st = lm.metrics()
    assert st["contended"] == 1 and st["handoffs"] == 1 and st["spins"] == 1 and st["sleeps"] == 0
    assert st["spin_ms"] == pytest.approx((10_110 - 2_000) / 1e6)
    # the spinner burnt its CPU: 2000 of work + 8110 of spinning + 5010 after it
    assert tb.run_ns == 2_000 + 8_110 + 5_020
    # a holder of a spinning lock is not preemptible, and nothing is left held
    assert ta.preempt_count == tb.preempt_count == 0 and L.owner is None


def rt_three_tasks(policy, trace=False):
    """a holds L on CPU 0; b queues on L from CPU 1 and sleeps; a's release makes b the pending
    owner, whose CPU needs 5 us to leave idle; c asks for L on CPU 2 meanwhile."""
    m = machine(cpus=3, preempt="full", idle_exit=5_000, trace=trace)
    lm = model(m, preempt_rt=True, policy=policy, atomic=10, cacheline=0, rt_slowpath=100)
    L = lm.new_lock("spinlock", "L")

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def b(task):
        yield cpu(1_000)
        yield Lock(L)
        yield Unlock(L)

    def c(task):
        yield cpu(10_050)
        yield Lock(L, 2_000)
        yield Unlock(L)

    ts = [m.spawn(a, "a", affinity=[0]), m.spawn(b, "b", affinity=[1]), m.spawn(c, "c", affinity=[2])]
    # every CPU leaves idle at the start: 5 us
    return m, lm, L, ts


def test_rt_strict_handoff_reserves_the_lock_for_the_sleeping_pending_owner():
    m, lm, L, (a, b, c) = rt_three_tasks("strict")
    run(m)
    # a: 5000 idle exit, lock at 5000, release at 15010: the slow unlock's pass (100) ends in
    #    the grant to b at 15110 -> 15110
    # b: at 6000 slow path 100, sleeps at 6100; woken at 15110, its CPU leaves idle at 20110,
    #    takes the lock (slow pass 100) -> 20210, releases: pass 100, grants c at 20310
    # c: at 15050 spins on wait_lock (a's pass holds it) until 15110, then finds b pending,
    #    may not steal, slow 100, sleeps at 15210; woken at 20310, idle exit -> 25310, slow
    #    pass 100 + hold 2000 -> 27410, fast release 10 -> 27420
    assert (a.ended, b.ended, c.ended) == (15_110, 20_310, 27_420)
    assert [e[1] for e in events(lm, "grant")] == [15_110, 20_310]
    assert [e[3] for e in events(lm, "acquire")] == [a.tid, b.tid, c.tid]
    assert events(lm, "steal") == []
    st = lm.metrics()
    assert st["sleeps"] == 2 and st["handoffs"] == 2 and st["steals"] == 0


def test_rt_lateral_steal_takes_the_lock_from_a_pending_owner_that_has_not_run():
    m, lm, L, (a, b, c) = rt_three_tasks("lateral")
    run(m)
    # c at 15050 spins on wait_lock until a's unlock pass has made b the pending owner and
    # woken it (15110), then steals from b (its CPU still leaving idle): slow 100 + hold 2000
    # -> release at 17210 (no waiters: fast, 10) -> 17220. b runs at 20110, finds the lock
    # free, slow pass 100 -> 20210, fast release -> 20220.
    assert (a.ended, b.ended, c.ended) == (15_110, 20_220, 17_220)
    assert [(e[1], e[3], e[4], e[5], e[6]) for e in events(lm, "steal")] == [(15_110, c.tid, b.tid, 0, 0)]
    st = lm.metrics()
    assert st["steals"] == 1 and st["lateral_steals"] == 1 and st["sleeps"] == 1


def test_rt_lateral_never_robs_an_rt_pending_owner():
    m = machine(cpus=3, preempt="full", idle_exit=5_000)
    lm = model(m, preempt_rt=True, policy="lateral", atomic=10, cacheline=0, rt_slowpath=100)
    L = lm.new_lock("spinlock", "L")
    order = []

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def hold(name):
        def fn(c, t):
            order.append(name)
            return 0

        return fn

    def b(task):
        yield cpu(1_000)
        yield Lock(L, hold("b"))
        yield Unlock(L)

    def c(task):
        yield cpu(10_050)
        yield Lock(L, hold("c"))
        yield Unlock(L)

    m.spawn(a, "a", affinity=[0])
    m.spawn(b, "b", affinity=[1], policy="fifo", prio=10)
    m.spawn(c, "c", affinity=[2], policy="fifo", prio=10)
    run(m)
    assert order == ["b", "c"] and events(lm, "steal") == []


def test_adaptive_waiter_spins_while_the_owner_runs_and_gets_the_lock_without_sleeping():
    m = machine(cpus=2, preempt="full")
    lm = model(m, preempt_rt=True, policy="adaptive", atomic=10, cacheline=0, rt_slowpath=100)
    L = lm.new_lock("spinlock", "L")

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def b(task):
        yield cpu(1_000)
        yield Lock(L, 1_000)
        yield Unlock(L)

    ta, tb = m.spawn(a, "a", affinity=[0]), m.spawn(b, "b", affinity=[1])
    run(m)
    # b: slow path at 1000 -> spins from 1100; a releases at 10010, its pass (100) ends in the
    #    grant at 10110; b notices at once, slow pass 100 + hold 1000 -> 11210, fast release
    #    -> 11220
    assert (ta.ended, tb.ended) == (10_110, 11_220)
    st = lm.metrics()
    assert st["sleeps"] == 0 and st["spins"] == 1
    assert st["spin_ms"] == pytest.approx((10_110 - 1_100) / 1e6)
    assert tb.wakeups == 1  # its fork only: the grant to a spinner is no wakeup


def test_today_s_rt_mutex_hands_over_to_the_spinning_top_waiter_after_the_unlock_pass():
    # top_spin (kernel/locking/rtmutex.c today): mark_wakeup_next_waiter's store to lock->owner
    # ends the slow unlock's pass under wait_lock, so the spinner sees the handoff after it
    m = machine(cpus=2)
    lm = model(m, atomic=10, cacheline=100, rt_slowpath=500)
    L = RtMutex(lm, "L", lm._stats("L"), lateral=False, adaptive=True, top_spin=True)
    lm.locks.append(L)

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def b(task):
        yield cpu(1_000)
        yield Lock(L, 1_000)
        yield Unlock(L)

    ta, tb = m.spawn(a, "a", affinity=[0]), m.spawn(b, "b", affinity=[1])
    run(m)
    # a: fast lock 10 + hold -> releases at 10010; the unlock pass (500) ends in the grant at 10510
    # b: slow pass 1000-1500, spins as top waiter; notices at 10610, takes it (pass 500 + hold
    #    1000) -> 12110, fast release -> 12120
    assert events(lm, "grant") == [("grant", 10_510, "L", tb.tid, ta.tid)]
    assert [(e[1], e[4]) for e in events(lm, "acquire")] == [(0, "fast"), (10_610, "pending")]
    assert (ta.ended, tb.ended) == (10_510, 12_120)
    st = lm.metrics()
    assert st["sleeps"] == 0 and st["spins"] == 1 and L.owner is None


def test_rt_slow_unlock_pass_holds_wait_lock_and_is_not_preempted():
    # 2.6.24-rt rt_spin_lock_slowunlock: wait_lock (raw, interrupts off) from the start of the
    # pass to the end of wakeup_next_waiter's wakeup, so an RT task woken on the releaser's CPU
    # meanwhile runs only after the handoff
    m = machine(cpus=2, preempt="full")
    lm = model(m, preempt_rt=True, policy="strict", atomic=10, cacheline=0, rt_slowpath=1_000)
    L = lm.new_lock("spinlock", "L")
    started = []

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)
        yield cpu(1_000)

    def b(task):
        yield cpu(1_000)
        yield Lock(L)
        yield Unlock(L)

    def r(task):  # wakes in the middle of a's slow unlock pass (10010-11010)
        yield sleep(10_500)
        started.append(m.env.now)
        yield cpu(5_000)

    ta = m.spawn(a, "a", affinity=[0])
    m.spawn(b, "b", affinity=[1])
    m.spawn(r, "r", affinity=[0], policy="fifo", prio=10)
    run(m)
    assert events(lm, "grant")[0][1] == 11_010
    assert started == [11_010]
    assert ta.ended == 11_010 + 5_000 + 1_000  # preempted after the pass, then its 1 us
    assert ta.preempt_count == 0


def test_adaptive_spinner_sleeps_when_the_owner_is_preempted():
    m = machine(cpus=2, preempt="full")
    lm = model(m, preempt_rt=True, policy="adaptive", atomic=10, cacheline=0, rt_slowpath=100)
    L = lm.new_lock("spinlock", "L")

    def a(task):
        yield Lock(L, 50_000)
        yield Unlock(L)

    def r(task):  # an RT task on a's CPU that wakes at 5 us and runs 20 us
        yield sleep(5_000)
        yield cpu(20_000)

    def b(task):
        yield cpu(1_000)
        yield Lock(L)
        yield Unlock(L)

    m.spawn(r, "r", affinity=[0], policy="fifo", prio=10)
    ta = m.spawn(a, "a", affinity=[0])
    tb = m.spawn(b, "b", affinity=[1])
    run(m)
    sleeps = events(lm, "sleep")
    # b spun from 1100 until a was switched out at 5000, then slept (owner not running)
    assert [(e[1], e[3], e[4]) for e in sleeps] == [(5_000, tb.tid, False)]
    # a resumes at 25000 and unlocks at 25000 + 45000 + 10 = 70010; its slow pass ends in the
    # handoff to b at 70110
    assert [e[1] for e in events(lm, "release") if e[3] == ta.tid] == [70_110]
    assert tb.ended == 70_110 + 100 + 10  # woken on its idle CPU at once, slow pass, release


def test_priority_inheritance_lets_the_owner_run_above_a_medium_rt_task():
    m = machine(cpus=1, preempt="full")
    lm = model(m, preempt_rt=True, atomic=0, cacheline=0, rt_slowpath=0)
    L = lm.new_lock("rt_mutex", "L")
    seen = []

    def a(task):  # SCHED_OTHER owner
        yield Lock(L, 10_000)
        seen.append(("a prio at release", task.prio))
        yield Unlock(L)
        seen.append(("a prio after", task.prio))

    def h(task):
        yield sleep(2_000)
        yield Lock(L, lambda c, t: seen.append(("h has L", m.now)) or 0)
        yield Unlock(L)

    def med(task):
        yield sleep(3_000)
        yield cpu(50_000)
        seen.append(("m done", m.now))

    m.spawn(h, "h", policy="fifo", prio=50)
    m.spawn(med, "m", policy="fifo", prio=20)
    m.spawn(a, "a")
    run(m)
    # h blocks at 2 us and boosts a to 50, so m (20) cannot preempt a; a releases at 10 us
    # (8 us of its hold were left), h takes L at once, then m runs its 50 us
    assert seen == [
        ("a prio at release", 50),
        ("h has L", 10_000),
        ("m done", 60_000),
        ("a prio after", 0),
    ]


def test_pi_boost_propagates_along_a_chain():
    m = machine(cpus=1, preempt="full")
    lm = model(m, preempt_rt=True, atomic=0, cacheline=0, rt_slowpath=0)
    L1, L2 = lm.new_lock("rt_mutex", "L1"), lm.new_lock("rt_mutex", "L2")
    prios = []

    def a(task):  # holds L2 for long
        yield Lock(L2, 20_000)
        yield Unlock(L2)

    def b(task):  # holds L1, then blocks on L2
        yield sleep(1_000)
        yield Lock(L1)
        yield Lock(L2)
        yield Unlock(L2)
        yield Unlock(L1)

    def h(task):
        yield sleep(2_000)
        prios.append(("before", a_task.prio, b_task.prio))
        yield Lock(L1)
        yield Unlock(L1)

    m.spawn(h, "h", policy="fifo", prio=60)
    b_task = m.spawn(b, "b", policy="fifo", prio=5)
    a_task = m.spawn(a, "a")

    def probe(c, t):
        prios.append(("chain", a_task.prio, b_task.prio))
        return 0

    from sim.ops import Call

    def watcher(task):
        yield sleep(3_000)
        yield Call(probe)

    m.spawn(watcher, "w", policy="fifo", prio=99)
    run(m)
    # b (5) waits on L2 held by a: a runs at 5; h (60) waits on L1 held by b: b and a run at 60
    assert prios == [("before", 5, 5), ("chain", 60, 60)]
    assert a_task.prio == 0 and b_task.prio == 5


def test_mutex_2624_woken_waiter_can_lose_to_a_newcomer():
    m = machine(cpus=3, idle_exit=5_000)
    lm = model(m, mutex="2.6.24", atomic=0, mutex_slowpath=0)
    L = lm.new_lock("mutex", "M")
    order = []

    def take(name, delay, hold):
        def s(task):
            yield cpu(delay)
            yield Lock(L, lambda c, t: order.append(name) or hold)
            yield Unlock(L)

        return s

    m.spawn(take("a", 0, 10_000), "a", affinity=[0])
    m.spawn(take("b", 1_000, 0), "b", affinity=[1])
    m.spawn(take("c", 10_050, 0), "c", affinity=[2])
    run(m)
    assert order == ["a", "c", "b"]  # c takes the released mutex while b's CPU leaves idle
    assert lm.metrics()["wasted_wakeups"] == 0  # b finds it free again when it runs


def test_mainline_mutex_spins_while_the_owner_runs():
    m = machine(cpus=2)
    lm = model(m, mutex="mainline", atomic=10, cacheline=0)
    L = lm.new_lock("mutex", "M")

    def a(task):
        yield Lock(L, 10_000)
        yield Unlock(L)

    def b(task):
        yield cpu(1_000)
        yield Lock(L)
        yield Unlock(L)

    m.spawn(a, "a", affinity=[0])
    tb = m.spawn(b, "b", affinity=[1])
    run(m)
    st = lm.metrics()
    assert st["spins"] == 1 and st["sleeps"] == 0
    assert tb.ended == 10_010 + 10 + 10  # noticed the release at 10010, took it, released


def test_percpu_lock_is_the_one_of_the_cpu_the_task_runs_on():
    m = machine(cpus=2)
    lm = model(m, atomic=0)
    P = lm.new_percpu_lock("spinlock", "slab")
    got = []

    def s(task):
        yield Lock(P, lambda c, t: got.append((t.name, c.index, P.locks[c.index].owner is t)) or 100)
        yield Unlock(P)

    m.spawn(s, "x", affinity=[0])
    m.spawn(s, "y", affinity=[1])
    run(m)
    assert sorted(got) == [("x", 0, True), ("y", 1, True)]
    assert all(lk.owner is None for lk in P.locks)


def test_policy_without_preempt_rt_and_rt_without_full_preemption_are_config_errors():
    from sim.config import from_mapping

    with pytest.raises(ConfigError, match="policy"):
        from_mapping(LocksConfig, {"policy": "lateral"}, "kernel.locks")
    m = machine(cpus=1, preempt="voluntary")
    from models.locks.core import install

    with pytest.raises(ConfigError, match="kernel.preempt"):
        install(m, dataclasses.replace(LocksConfig(), preempt_rt=True))
