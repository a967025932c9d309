"""The collector's microbenchmarks, replayed on the simulated machine.

Some parameters show only through an outcome that several costs and the scheduler shape
together (a pipe ping-pong's one-way time is a send, a wakeup, a switch, maybe an IPI and an
idle exit, and a receive). :mod:`calibration.fit` fits those parameters by running these
replicas on the model with common random numbers (the same seeds for every candidate) and
comparing with the measured medians. Each replica follows the item of the same name in
``calibration/collector/README.md``: same pinning, same message pattern, same timed span.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sim.channel import Channel
from sim.machine import CPU, Env, Machine
from sim.ops import Call, Op, Recv, Send, Sleep, Spawn, cpu
from sim.params import Costs, KernelConfig, MachineConfig
from sim.rng import Streams
from sim.task import Task
from sim.units import MS, US

if TYPE_CHECKING:
    from sim import scenario as sc

    from .profile import Profile

Preempt = Literal["none", "voluntary", "full"]


@dataclass(frozen=True)
class Target:
    """The measured machine as the replicas need it."""

    cpus: int
    hz: int
    preempt: Preempt
    sched: Literal["cfs", "eevdf"] = "cfs"
    """The fair class the profile's kernel runs (:attr:`calibration.profile.Profile.sched`)."""
    wake_affine: Literal["prev", "waker", "weight", "pack"] = "prev"
    """Its wakeup placement (:attr:`calibration.profile.Profile.wake_affine`): the replicas run
    under the same scheduler rules as the composites they are the fit for (a fork+exec+wait
    replica's parent is woken by the exiting child, so where it runs depends on the rule)."""
    fork_balance: Literal["idlest", "pack"] = "idlest"
    """Where its forked tasks start (:attr:`calibration.profile.Profile.fork_balance`)."""
    timer_wheel: Literal["classic", "v4.8", "v6.9"] = "classic"
    """Its timer wheel (:attr:`calibration.profile.Profile.timer_wheel`): when a jiffy timeout
    fires and on which CPU (the grace-period replica's FQS waits)."""
    nohz_stats_kick: bool = False
    """Its NO_HZ blocked-load kick (:attr:`calibration.profile.Profile.nohz_stats_kick`): a busy
    CPU's tick wakes an idle one every 32 ms."""
    rcu: tuple[tuple[str, Any], ...] = ()
    """Its ``[kernel.rcu]`` (:meth:`calibration.profile.Profile.rcu_section`), as pairs; the
    grace-period replica's RCU, today's Tree RCU when empty."""

    @classmethod
    def of(cls, profile: Profile) -> Target:
        """The measured machine of ``profile``: its kernel facts as the profile reads them; two
        CPUs or more when it measured across CPUs, else one; HZ 1000 when unknown."""
        kernel = profile.kernel_section()
        kernel["hz"] = profile.hz or 1000
        return cls(
            cpus=max(2, profile.cpus) if profile.cpus >= 2 else 1,
            rcu=tuple(profile.rcu_section().items()),
            **kernel,
        )

    def kernel(self) -> dict[str, Any]:
        """Its ``[kernel]`` keys (without ``rcu``): what a replica's machine is built with."""
        return {f: getattr(self, f) for f in ("hz", *KERNEL_RULES)}


KERNEL_RULES = ("preempt", "sched", "wake_affine", "fork_balance", "timer_wheel", "nohz_stats_kick")
"""The :class:`Target` fields that are ``[kernel]`` keys of the same name
(:meth:`calibration.profile.Profile.kernel_section`)."""


class _Clock:
    """Timestamps taken from inside task scripts (a zero-cost kernel call)."""

    def __init__(self, m: Machine) -> None:
        self.m = m
        self.marks: list[int] = []
        self.done = m.env.event()
        self.op = Call(self._mark)
        self.finish = Call(self._finish)

    def _mark(self, cpu: CPU, t: Task) -> int:
        self.marks.append(self.m.now)
        return 0

    def _finish(self, cpu: CPU, t: Task) -> int:
        if not self.done.triggered:
            self.done.succeed()
        return 0


def _machine(costs: Costs, target: Target, seed: int) -> Machine:
    return Machine(Env(), MachineConfig(cpus=target.cpus), KernelConfig(**target.kernel()), costs, Streams(seed))


def _run(m: Machine, clock: _Clock, limit_ns: int = 60_000 * MS) -> None:
    m.env.run(until=clock.done)
    if not clock.done.triggered:  # pragma: no cover - the replicas always finish
        raise RuntimeError("microbenchmark replica did not finish")


def _timed_exchange(clock: _Clock, send: Op, recv: Op, warm: int, total: int) -> Generator[Op, Any, None]:
    """The timing side of a ping-pong or a ring: ``total`` rounds of send then receive, with a
    mark after the ``warm`` first rounds and one at the end, then the replica's finish."""
    for i in range(total):
        if i == warm:
            yield clock.op
        yield send
        yield recv
    yield clock.op
    yield clock.finish


def pingpong(costs: Costs, target: Target, *, cross: bool, rounds: int = 300, warm: int = 30, seed: int = 1) -> float:
    """``context_switch`` / ``cross_cpu_wakeup`` / ``pipe_message`` ping-pong: two tasks pinned
    to cpu 0 (and cpu 1 with ``cross``) exchange one message each way over two pipes; the
    result is the mean one-way time (round trip / 2), as the collector reports it."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)
    ab, ba = Channel(m, "ab", 1024), Channel(m, "ba", 1024)
    send_ab, recv_ab, send_ba, recv_ba = Send(ab), Recv(ab), Send(ba), Recv(ba)
    total = warm + rounds

    def thread_a(task: Task) -> Generator[Op, Any, None]:
        yield from _timed_exchange(clock, send_ab, recv_ba, warm, total)

    def thread_b(task: Task) -> Generator[Op, Any, None]:
        for _ in range(total):
            yield recv_ab
            yield send_ba

    b = m.spawn(thread_b, "b", affinity=(1 if cross else 0,))
    m.spawn(thread_a, "a", affinity=(0,), thread_of=b)  # the collector's two threads: one mm
    _run(m, clock)
    t0, t1 = clock.marks
    return (t1 - t0) / (2 * rounds)


def stream(costs: Costs, target: Target, *, cross: bool, messages: int = 3000, warm: int = 1000, seed: int = 1) -> float:
    """``pipe_message`` stream series: a writer pinned to cpu 0 writes 100-byte messages back
    to back into one pipe (capacity as fs/pipe.c: 16 pages of 40 messages), a reader on cpu 0
    (or cpu 1 with ``cross``) reads them; the result is the reader's mean time per message."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)
    ch = Channel(m, "pipe", 16 * (4096 // 100))
    send, recv = Send(ch), Recv(ch)

    def writer(task: Task) -> Generator[Op, Any, None]:
        for _ in range(warm + messages):
            yield send

    def reader(task: Task) -> Generator[Op, Any, None]:
        for i in range(warm + messages):
            if i == warm:
                yield clock.op
            yield recv
        yield clock.op
        yield clock.finish

    r = m.spawn(reader, "reader", affinity=(1 if cross else 0,))
    m.spawn(writer, "writer", affinity=(0,), thread_of=r)  # two threads of the collector: one mm
    _run(m, clock)
    t0, t1 = clock.marks
    return (t1 - t0) / messages


def spawn_wait(costs: Costs, target: Target, *, exec_: bool, count: int = 40, warm: int = 3, seed: int = 1) -> float:
    """``fork_exec`` series ``fork_exec_wait`` (``exec_``) or ``fork_exit_wait``: one parent
    forks a child (which execs, or exits at once) and waits for it; mean time per child."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)

    def child(task: Task) -> Generator[Op, Any, None]:
        return
        yield  # a generator that does nothing: the process only (execs and) exits

    spawn = Spawn(child, "child", wait=True, exec=exec_)

    def parent(task: Task) -> Generator[Op, Any, None]:
        for i in range(warm + count):
            if i == warm:
                yield clock.op
            yield spawn
        yield clock.op
        yield clock.finish

    m.spawn(parent, "parent")
    _run(m, clock)
    t0, t1 = clock.marks
    return (t1 - t0) / count


def sleep_lateness(costs: Costs, target: Target, *, request: int = 1 * MS, count: int = 40, seed: int = 1) -> float:
    """``sleep_lateness``: mean of elapsed - requested for relative sleeps on an otherwise idle
    machine (the model has no timer slack: compare with the measured figure minus
    ``params.timer_slack_ns``)."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)
    op = Sleep(request)

    def sleeper(task: Task) -> Generator[Op, Any, None]:
        for _ in range(count):
            yield clock.op
            yield op
            yield clock.op
        yield clock.finish

    m.spawn(sleeper, "sleeper", affinity=(0,))
    _run(m, clock)
    marks = clock.marks
    late = [marks[i + 1] - marks[i] - request for i in range(0, len(marks), 2)]
    return sum(late) / len(late)


def wake_by_sleep_age(costs: Costs, target: Target, *, delay: int, trials: int = 30, seed: int = 1) -> float:
    """``wake_by_sleep_age`` at one delay: a sleeper pinned to cpu 1 marks the time and blocks
    (the collector's FUTEX_WAIT; here a one-message pipe read, the model's blocking wait), a
    waker pinned to cpu 0 spins until that mark plus ``delay``, marks again and wakes it (a
    write); the result is the median of woken-mark minus waker-mark. As in the collector both
    spin 50 us between trials and the waker starts a trial only once the sleeper has marked.
    The model wakes an idle CPU the same way whatever its idle age (IPI, ``idle_exit``), so its
    curve is flat past the first microsecond: this replica is a check of that, not a fit."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)
    ch = Channel(m, "futex", 1)
    send, recv = Send(ch), Recv(ch)
    marks = {"gen": 0, "sleep": 0, "wake": 0}
    lat: list[int] = []

    def mark_sleep(c: CPU, t: Task) -> int:
        marks["gen"] += 1
        marks["sleep"] = m.now
        return 0

    def mark_woke(c: CPU, t: Task) -> int:
        lat.append(m.now - marks["wake"])
        return 0

    def mark_wake(c: CPU, t: Task) -> int:
        marks["wake"] = m.now
        return 0

    def until_delay(c: CPU, t: Task) -> int:  # the waker spins until the sleeper's mark + delay
        return max(0, marks["sleep"] + delay - m.now)

    # pause: the collector's 50 us spin between trials; poll: the waker looks for the sleeper's
    # mark every 100 ns (the collector spins on it; a finer step only adds events, and the delay
    # itself is exact: until_delay spins to the nanosecond)
    pause, poll = cpu(50 * US), cpu(100)
    sleep_op, woke_op, wake_op, wait_op = Call(mark_sleep), Call(mark_woke), Call(mark_wake), Call(until_delay)

    def sleeper(task: Task) -> Generator[Op, Any, None]:
        for _ in range(trials):
            yield pause
            yield sleep_op
            yield recv
            yield woke_op
        yield clock.finish

    def waker(task: Task) -> Generator[Op, Any, None]:
        for i in range(1, trials + 1):
            while marks["gen"] < i:
                yield poll
            yield wait_op
            yield wake_op
            yield send

    s = m.spawn(sleeper, "sleeper", affinity=(1,))
    m.spawn(waker, "waker", affinity=(0,), thread_of=s)
    _run(m, clock)
    return float(sorted(lat)[len(lat) // 2])


def ring(
    costs: Costs, target: Target, *, members: int = 8, processes: bool, laps: int = 100, warm: int = 10, seed: int = 1
) -> float:
    """``context_switch_process`` ring series: ``members`` tasks pinned to cpu 0 pass one byte
    round a ring of pipes (member 0, the collector's timer thread, writes to member 1 and reads
    from the last); threads share one mm, processes each have their own; the result is ns per
    hop (one switch each), the collector's laps x members division. A check, not a fit: the
    model's switch costs the same whichever task comes next, so its per-hop time is the
    two-task ping-pong's one-way time (plus ``mm_switch`` and ``asid_miss`` for processes)
    whatever the ring's size; the machine's grows from two members to three (README,
    calibration)."""
    m = _machine(costs, target, seed)
    clock = _Clock(m)
    pipes = [Channel(m, f"ring{i}", 1024) for i in range(members)]
    total = warm + laps

    def timer(task: Task) -> Generator[Op, Any, None]:
        yield from _timed_exchange(clock, Send(pipes[1 % members]), Recv(pipes[0]), warm, total)

    def member(i: int) -> Callable[[Task], Generator[Op, Any, None]]:
        recv, send = Recv(pipes[i]), Send(pipes[(i + 1) % members])

        def script(task: Task) -> Generator[Op, Any, None]:
            for _ in range(total):
                yield recv
                yield send

        return script

    first: Task | None = None
    for i in range(1, members):
        t = m.spawn(member(i), f"member{i}", affinity=(0,), thread_of=None if processes else first)
        first = first or t
    m.spawn(timer, "timer", affinity=(0,), thread_of=None if processes else first)
    _run(m, clock)
    t0, t1 = clock.marks
    return (t1 - t0) / (laps * members)


def gp_latency_run(costs: Costs, target: Target, *, busy: bool, calls: int = 60, seed: int = 1) -> sc.Result:
    """The ``membarrier_global`` / ``membarrier_global_busy`` replica's run: a task pinned to
    cpu 0 calls synchronize_rcu() (what MEMBARRIER_CMD_GLOBAL waits for) 1 ms apart, the other
    CPUs idle or each running a user-mode spinner (the ``gp_latency`` workload,
    :mod:`models.workloads.gp_latency`, under the profile's RCU and timer wheel). Its
    ``latency["synchronize_ns"]`` summarises the calls, its ``series["latency"]`` is their
    distribution."""
    import models
    from sim import scenario as sc

    data: dict[str, Any] = {
        "scenario": {"name": "gp-latency-replica", "seed": seed},
        "machine": {"cpus": target.cpus},
        "kernel": {**target.kernel(), "rcu": dict(target.rcu) or {"era": "v6"}},
        "costs": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(costs).items()},
        "workload": {"kind": "gp_latency", "calls": calls, "busy": busy},
    }
    catalog = models.catalog()
    return sc.run(sc.validate(data, catalog), catalog, seed=seed)


def gp_latency(costs: Costs, target: Target, *, busy: bool, calls: int = 60, seed: int = 1, stat: str = "p50") -> float:
    """:func:`gp_latency_run`'s median latency in ns (the histogram's, buckets at most 1.6 %
    wide), or with ``stat = "mean"`` its mean. A check: the grace period is made of the tick,
    the FQS timeouts and where they run, the busy CPU's blocked-load kicks and the idle CPU's
    own wakeups (``Costs.idle_timers_per_s``, ``idle_hrtimers_per_s``) and the machine's other
    processes (``idle_task_wakeups_per_s``: which CPU goes idle last), none of which is fitted."""
    res = gp_latency_run(costs, target, busy=busy, calls=calls, seed=seed)
    return float(res.latency["synchronize_ns"][stat])


Replica = Callable[[Costs, Target, int], float]

REPLICAS: dict[str, Replica] = {
    "same_cpu_pingpong": lambda c, t, s: pingpong(c, t, cross=False, seed=s),
    "cross_cpu_pingpong": lambda c, t, s: pingpong(c, t, cross=True, seed=s),
    "same_cpu_stream": lambda c, t, s: stream(c, t, cross=False, seed=s),
    "cross_cpu_stream": lambda c, t, s: stream(c, t, cross=True, seed=s),
    "fork_exit_wait": lambda c, t, s: spawn_wait(c, t, exec_=False, seed=s),
    "fork_exec_wait": lambda c, t, s: spawn_wait(c, t, exec_=True, seed=s),
    "sleep_lateness_1ms": lambda c, t, s: sleep_lateness(c, t, request=1 * MS, seed=s),
    "sleep_lateness_100us": lambda c, t, s: sleep_lateness(c, t, request=100 * US, seed=s),
    "wake_1us": lambda c, t, s: wake_by_sleep_age(c, t, delay=1 * US, seed=s),
    "wake_4us": lambda c, t, s: wake_by_sleep_age(c, t, delay=4 * US, seed=s),
    "wake_40us": lambda c, t, s: wake_by_sleep_age(c, t, delay=40 * US, seed=s),
    "ring8_threads": lambda c, t, s: ring(c, t, processes=False, seed=s),
    "ring8_processes": lambda c, t, s: ring(c, t, processes=True, seed=s),
    "gp_idle": lambda c, t, s: gp_latency(c, t, busy=False, seed=s),
    "gp_busy": lambda c, t, s: gp_latency(c, t, busy=True, seed=s),
    # a mean over two modes needs more calls than a median within one (the share of each mode)
    "gp_idle_mean": lambda c, t, s: gp_latency(c, t, busy=False, calls=300, seed=s, stat="mean"),
    "gp_busy_mean": lambda c, t, s: gp_latency(c, t, busy=True, calls=300, seed=s, stat="mean"),
}
"""Simulated outcome name -> replica(costs, target, seed) -> ns."""


def mean_over_seeds(name: str, costs: Costs, target: Target, seeds: int) -> float:
    """The replica's outcome averaged over seeds 1..seeds (the same seeds for every call:
    common random numbers)."""
    fn = REPLICAS[name]
    return sum(fn(costs, target, s) for s in range(1, seeds + 1)) / seeds
