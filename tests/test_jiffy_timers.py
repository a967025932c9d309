"""The substrate's jiffy timers under ``kernel.timer_wheel``: when a timeout fires (the classic
wheel at its expiry jiffy, the 4.8+ wheel one granularity unit later, calc_index) and where (the
6.9+ pull: a non-pinned timer of an idle CPU runs on an active CPU, which the idle CPU sleeps
through), and the "pack" placement that spares a wakeup from interrupt context."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.machine import Machine
from sim.ops import BLOCKED, Call, cpu, sleep
from sim.timerwheel import calc_wheel_index, lvl_depth
from sim.units import MS

from .helpers import machine

HZ = 250
J = 1_000_000_000 // HZ  # ns per jiffy


def _arm(m: Machine, on: int, at_ns: int, delta_j: int, pinned: bool = False) -> list[tuple[int, int]]:
    """Arm, at ``at_ns`` on CPU ``on``, a timer ``delta_j`` jiffies out; returns [(time, cpu)] of
    its firing."""
    fired: list[tuple[int, int]] = []

    def arm() -> None:
        c = m.cpus[on]
        c.add_jiffy_timer(m.env.now // J + delta_j, lambda x: fired.append((m.env.now, x.index)) or 0, pinned=pinned)

    m.call_at(at_ns, lambda: arm())
    return fired


@pytest.mark.parametrize("wheel,late", [("classic", 0), ("v4.8", 1), ("v6.9", 1)])
def test_a_timeout_fires_at_its_jiffy_or_one_later(wheel: str, late: int) -> None:
    m = machine(cpus=2, hz=HZ, kernel={"timer_wheel": wheel})
    fired = _arm(m, 0, J + J // 4, 1)  # armed a quarter into jiffy 1, for jiffy 2
    m.env.run(until=m.env.timeout(10 * J))
    assert [t for t, _ in fired] == [(2 + late) * J]


def test_far_timeouts_round_up_to_their_level() -> None:
    # 100 jiffies out is level 1 (granularity 8): the bucket expiry is the next multiple of 8 after it
    m = machine(cpus=1, hz=HZ, kernel={"timer_wheel": "v4.8"})
    fired = _arm(m, 0, J // 2, 100)
    m.env.run(until=m.env.timeout(200 * J))
    assert [t // J for t, _ in fired] == [calc_wheel_index(100, 0, lvl_depth(HZ))[1]] == [104]


def _busy_other(m: Machine) -> None:
    def hog(task):  # type: ignore[no-untyped-def]
        yield cpu(1000 * MS)

    m.spawn(hog, "hog", affinity=[1])


def test_pull_runs_an_idle_cpus_timer_on_the_active_cpu_without_waking_it() -> None:
    m = machine(cpus=2, hz=HZ, kernel={"timer_wheel": "v6.9"})
    _busy_other(m)
    fired = _arm(m, 0, J // 2, 2)
    m.env.run(until=m.env.timeout(10 * J))
    assert fired == [(3 * J, 1)]
    assert m.cpus[0].idle_exits == 0


@pytest.mark.parametrize("wheel,pinned", [("v4.8", False), ("v6.9", True)])
def test_without_pull_or_pinned_the_idle_cpu_wakes_for_its_timer(wheel: str, pinned: bool) -> None:
    m = machine(cpus=2, hz=HZ, kernel={"timer_wheel": wheel})
    _busy_other(m)
    fired = _arm(m, 0, J // 2, 2, pinned=pinned)
    m.env.run(until=m.env.timeout(10 * J))
    assert fired == [(3 * J, 0)]
    assert m.cpus[0].idle_exits == 1


def test_with_every_cpu_idle_the_timers_own_cpu_wakes() -> None:
    m = machine(cpus=2, hz=HZ, kernel={"timer_wheel": "v6.9"})
    fired = _arm(m, 1, J // 2, 2)
    m.env.run(until=m.env.timeout(10 * J))
    assert fired == [(3 * J, 1)]


def test_cancel_finds_a_rounded_timer() -> None:
    m = machine(cpus=1, hz=HZ, kernel={"timer_wheel": "v4.8"})
    fired: list[int] = []

    def fn(c):  # type: ignore[no-untyped-def]
        fired.append(m.env.now)
        return 0

    def arm_and_cancel() -> None:
        c = m.cpus[0]
        c.add_jiffy_timer(3, fn)
        c.cancel_jiffy_timer(3, fn)

    m.call_at(J // 2, arm_and_cancel)
    m.env.run(until=m.env.timeout(10 * J))
    assert fired == [] and not m.cpus[0].jiffy_timers and not m.cpus[0].jiffy_global


@pytest.mark.parametrize("from_irq", [False, True])
def test_pack_keeps_a_task_wakeup_but_not_one_from_an_interrupt(from_irq: bool) -> None:
    """``wake_affine = "pack"``: woken from a task running alone on CPU 1, the sleeper (last on
    CPU 0, now idle) is queued on CPU 1; woken from CPU 1's interrupt, on idle CPU 0."""
    m = machine(cpus=2, hz=HZ, kernel={"wake_affine": "pack"})
    placed: list[int] = []

    def sleep_script(task):  # type: ignore[no-untyped-def]
        yield cpu(10_000)
        yield Call(lambda c, t: BLOCKED)

    sleeper = m.spawn(sleep_script, "sleeper")

    def wake(c):  # type: ignore[no-untyped-def]
        cost = m.wake(sleeper, c)
        placed.append(sleeper.cpu)  # where try_to_wake_up queued it
        return cost

    def waker_script(task):  # type: ignore[no-untyped-def]
        yield cpu(2 * MS)
        if from_irq:
            m.interrupt(m.cpus[1], 0, wake)
        else:
            yield Call(lambda c, t: wake(c))
        yield cpu(5 * MS)

    m.spawn(waker_script, "waker", affinity=[1])
    m.env.run(until=m.env.timeout(20 * MS))
    assert placed == ([0] if from_irq else [1])


# ------------------------------------------------------------------ random machines (Hypothesis)

burst = st.tuples(st.integers(0, 40 * MS), st.integers(1, 3000), st.integers(0, 6))  # start, run us, timer jiffies (0: none)


@settings(max_examples=60, deadline=None)
@given(
    cpus=st.integers(2, 4),
    plan=st.lists(st.lists(burst, max_size=6), min_size=4, max_size=4),
    exits=st.lists(st.integers(0, 30_000), min_size=4, max_size=4),
    pinned=st.booleans(),
)
def test_every_global_timer_runs_once_at_its_jiffy_whoever_is_idle_or_last(cpus, plan, exits, pinned) -> None:
    """Tasks run bursts on their CPUs and arm timers as they go; whichever CPUs are busy, idle,
    or went idle last, and however long each takes to leave idle, every timer runs exactly once,
    on one CPU, at its (rounded) jiffy: pulled by a running CPU, expired by the CPU that went idle
    last, or by its own, never lost and never twice (Machine._tmigr_remote's race)."""
    m = machine(cpus=cpus, hz=HZ, kernel={"timer_wheel": "v6.9"})
    m.idle_exit_latency = lambda c: exits[c.index]
    armed: list[tuple[int, int]] = []  # (id, earliest jiffy)
    fired: dict[int, list[tuple[int, int]]] = {}

    def arm(c, delta: int) -> int:  # type: ignore[no-untyped-def]
        k = len(armed)
        now_j = m.env.now // J
        armed.append((k, now_j + delta))
        c.add_jiffy_timer(now_j + delta, lambda x: fired.setdefault(k, []).append((m.env.now, x.index)) or 0, pinned=pinned)
        return 0

    for i in range(cpus):
        bursts = sorted(plan[i])

        def script(task, bursts=bursts):  # type: ignore[no-untyped-def]
            for start, run_us, delta in bursts:
                if start > m.env.now:
                    yield sleep(start - m.env.now)
                if delta:
                    yield Call(lambda c, t, d=delta: arm(c, d))
                yield cpu(run_us * 1000)

        m.spawn(script, f"t{i}", affinity=[i])
    m.env.run(until=m.env.timeout(80 * MS))
    for k, earliest in armed:
        runs = fired.get(k, [])
        assert len(runs) == 1, (k, runs)
        t, _ = runs[0]
        # level-0 timers run one jiffy after their expiry at the latest (calc_index), plus the
        # time the CPU that runs them takes to leave idle
        assert earliest * J <= t <= (earliest + 1) * J + max(exits), (k, earliest, t)
