"""The substrate's jiffy timers under ``kernel.timer_wheel``: when a timeout fires (the classic
wheel at its expiry jiffy, the 4.8+ wheel one granularity unit later, calc_index) and where (the
6.9+ pull: a non-pinned timer of an idle CPU runs on an active CPU, which the idle CPU sleeps
through), and the "pack" placement that spares a wakeup from interrupt context."""

from __future__ import annotations

import pytest

from sim.machine import Machine
from sim.ops import BLOCKED, Call, cpu
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
