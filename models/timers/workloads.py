"""Workloads of the timers-2023 story (the pull-model series' own tests, see the seed
004_4966f5407572de7a.txt and docs/kernel/timers.md).

* ``timer-loop``: a timer enqueued and dequeued in a loop (mod_timer + timer_delete), 1000
  times per measurement, on one CPU that is not a timer housekeeping CPU, while a quarter of
  the other CPUs are kept busy; the figure is the time per enqueue+dequeue.
* ``dbench-like``: X client/server pairs. A client does some work, arms a retransmit-style
  timeout, sends a request and waits for the reply, then cancels the timeout; the server
  handles the request and, every few requests, sleeps a jiffy in schedule_timeout() (waiting
  for I/O). Throughput is requests per second.
* ``idle-sleepers``: a mostly idle machine with periodic schedule_timeout() sleepers, per-CPU
  kernel timers that re-arm themselves from their callback (delayed work), and one light
  background task: where idle wakeups, remote expiries and the remote-expiry ping pong show.

Each workload stops itself after its measurement window, so no scenario duration is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sim.channel import Channel
from sim.config import knob
from sim.errors import ConfigError
from sim.machine import CPU, Machine
from sim.ops import Call, CpuWork, Recv, Send, Sleep, Syscall
from sim.stats import LogHistogram
from sim.task import Task
from sim.units import MS, US, S

from .ops import ScheduleTimeout, TimerArm, TimerCancel
from .wheel import Timer

SEED = "seed 004_4966f5407572de7a.txt"


def _model(m: Machine) -> Any:
    model = getattr(m, "models", {}).get("timers")
    if model is None:
        raise ConfigError("workload.kind", "needs the timers mechanism", "install models.timers (it is in the default catalog)")
    return model


def _stop_after(m: Machine, ns: int) -> None:
    def stop() -> None:
        if not m.done.triggered:
            m.done.succeed()

    m.call_at(ns, stop)


# ---------------------------------------------------------------------------- timer-loop
@dataclass(frozen=True)
class TimerLoopConfig:
    loops: int = knob(1000, doc="enqueue+dequeue pairs per measurement", min=1, max=10_000_000, source=SEED)
    repetitions: int = knob(20, doc="measurements (the seed: 'repeated several times')", min=1, max=100_000, source=SEED)
    cpu: int = knob(0, doc="the isolated CPU running the loop (list it in kernel.timers.nohz_full)", min=0, source=SEED)
    busy_fraction: float = knob(0.25, doc="fraction of the other CPUs kept busy", min=0.0, max=1.0, source=SEED)
    busy_placement: Literal["spread", "first", "last"] = knob(
        "spread",
        doc="which of the other CPUs are busy: 'spread' every (1/fraction)-th CPU after the loop CPU, 'first' "
        "the next ones, 'last' the highest numbered (the seed does not say)",
        source="assumption: the seed does not say which CPUs were busy",
    )
    timeout: int = knob(100 * MS, doc="expiry of the looping timer (never reached)", unit="ns", min=1, source="assumption")
    warmup: int = knob(1 * MS, doc="time before the first measurement (busy CPUs start)", unit="ns", min=0, source="assumption")

    def check_machine(self, machine: Any, path: str) -> None:
        if self.cpu >= machine.cpus:
            raise ConfigError(
                f"{path}.cpu", f"CPU {self.cpu} does not exist on a {machine.cpus}-CPU machine", "pick a CPU below machine.cpus"
            )

    def busy_cpus(self, ncpus: int) -> list[int]:
        others = [c for c in range(ncpus) if c != self.cpu]
        k = int(self.busy_fraction * len(others))
        if k == 0:
            return []
        if self.busy_placement == "first":
            order = [(self.cpu + i) % ncpus for i in range(1, ncpus)]
            return sorted(order[:k])
        if self.busy_placement == "last":
            return others[-k:]
        step = max(1, round(1 / self.busy_fraction)) if self.busy_fraction else ncpus
        order = [(self.cpu + i) % ncpus for i in range(1, ncpus)]
        picked = [c for i, c in enumerate(order, start=1) if i % step == 0][:k]
        return sorted(picked)


class TimerLoop:
    """The enqueue/dequeue micro-benchmark of the pull-model series (its 'Enqueue' test)."""

    def __init__(self, m: Machine, cfg: TimerLoopConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.model = _model(m)
        self.busy = cfg.busy_cpus(len(m.cpus))
        self.samples: list[float] = []
        self.t0 = 0
        self.finished = False
        for c in self.busy:
            m.spawn(self._spin, f"busy/{c}", affinity=(c,))
        m.spawn(self._loop, "timer-loop", affinity=(cfg.cpu,), kthread=True)

    def _spin(self, task: Task):
        op = CpuWork(100 * US)
        while not self.finished:
            yield op

    def _start(self, cpu: CPU, t: Task) -> int:
        self.t0 = self.m.now
        return 0

    def _stop(self, cpu: CPU, t: Task) -> int:
        self.samples.append((self.m.now - self.t0) / self.cfg.loops)
        return 0

    def _loop(self, task: Task):
        cfg = self.cfg
        timer = Timer("loop-timer")
        arm, cancel = TimerArm(timer, cfg.timeout), TimerCancel(timer)
        start, stop = Call(self._start), Call(self._stop)
        if cfg.warmup:
            yield CpuWork(cfg.warmup, user=False)
        for _ in range(cfg.repetitions):
            yield start
            for _ in range(cfg.loops):
                yield arm
                yield cancel
            yield stop
        self.finished = True
        self.m.done.succeed()

    def progress(self) -> float:
        return len(self.samples) / self.cfg.repetitions

    def metrics(self) -> dict[str, float]:
        s = self.samples
        return {
            "ns_per_enqueue_dequeue": sum(s) / len(s) if s else float("nan"),
            "measurements": float(len(s)),
            "busy_cpus": float(len(self.busy)),
        }


# ---------------------------------------------------------------------------- dbench-like
@dataclass(frozen=True)
class DbenchConfig:
    pairs: int = knob(8, doc="client/server pairs (dbench's X)", min=1, max=100_000, source=SEED)
    client_work: int = knob(20 * US, doc="client user work per request", unit="ns", min=0, source="assumption")
    server_work: int = knob(
        20 * US, doc="server kernel work per request (the file operation)", unit="ns", min=0, source="assumption"
    )
    timeout: int = knob(
        200 * MS,
        doc="timeout armed by the client for each request and cancelled by the reply (a global timer)",
        unit="ns",
        min=0,
        source="include/net/tcp.h TCP_RTO_MIN (200 ms)",
    )
    sleep_every: int = knob(
        128, doc="the server sleeps on average once every this many requests, at random (0: never)", min=0, source="assumption"
    )
    sleep_jiffies: int = knob(1, doc="length of the server's schedule_timeout() sleep", min=0, max=100_000, source="assumption")
    warmup: int = knob(20 * MS, doc="time before counting requests", unit="ns", min=0, source="assumption")
    run_for: int = knob(100 * MS, doc="measurement window after the warmup", unit="ns", min=1, source="assumption")


class Dbench:
    """X pairs of client and server processes exchanging requests over pipes."""

    def __init__(self, m: Machine, cfg: DbenchConfig) -> None:
        self.m = m
        self.cfg = cfg
        _model(m)
        self.done_ops = 0
        self.counted = 0
        self.lat_hist = LogHistogram()
        self.start = cfg.warmup
        for p in range(cfg.pairs):
            req = Channel(m, f"req{p}", 1)
            rep = Channel(m, f"rep{p}", 1)
            m.spawn(self._server(req, rep, p), f"server/{p}")
            m.spawn(self._client(req, rep, p), f"client/{p}")
        _stop_after(m, cfg.warmup + cfg.run_for)

    def _client(self, req: Channel, rep: Channel, p: int):
        cfg = self.cfg
        timer = Timer(f"rto/{p}")
        work = CpuWork(cfg.client_work) if cfg.client_work else None
        arm, cancel = TimerArm(timer, cfg.timeout), TimerCancel(timer)
        send, recv = Send(req), Recv(rep)
        m = self.m

        def script(task: Task):
            while True:
                if work is not None:
                    yield work
                t0 = m.now
                yield arm
                yield send
                yield recv
                yield cancel
                self.done_ops += 1
                if t0 >= self.start:
                    self.counted += 1
                    self.lat_hist.add(m.now - t0)

        return script

    def _server(self, req: Channel, rep: Channel, p: int):
        cfg = self.cfg
        work = Syscall(cfg.server_work)
        nap = ScheduleTimeout(jiffies=cfg.sleep_jiffies) if cfg.sleep_every else None
        send, recv = Send(rep), Recv(req)
        rng = self.m.streams.get(f"dbench/{p}")  # the same draws whatever the placement policy

        def script(task: Task):
            gaps = rng.geometric(1 / cfg.sleep_every, 4096).tolist() if cfg.sleep_every else []
            gaps.reverse()
            left = gaps.pop() if gaps else 0
            while True:
                yield recv
                yield work
                if nap is not None:
                    left -= 1
                    if left <= 0:
                        yield nap
                        if not gaps:
                            gaps = rng.geometric(1 / cfg.sleep_every, 4096).tolist()
                            gaps.reverse()
                        left = gaps.pop()
                yield send

        return script

    def progress(self) -> float:
        return min(1.0, self.m.now / (self.cfg.warmup + self.cfg.run_for))

    def metrics(self) -> dict[str, float]:
        return {
            "requests_per_s": self.counted / (self.cfg.run_for / S),
            "requests": float(self.counted),
            "pairs": float(self.cfg.pairs),
        }

    def latency(self) -> dict[str, LogHistogram]:
        return {"request_latency_ns": self.lat_hist}


# ---------------------------------------------------------------------------- idle-sleepers
@dataclass(frozen=True)
class IdleSleepersConfig:
    sleepers: int = knob(8, doc="tasks sleeping periodically in schedule_timeout()", min=0, max=100_000, source=SEED)
    period: int = knob(
        30 * MS, doc="each sleeper's schedule_timeout() (rounded up to jiffies)", unit="ns", min=1, source="assumption"
    )
    stagger: bool = knob(
        True, doc="start sleeper i i jiffies late, so that their timers do not all expire in one jiffy", source="assumption"
    )
    work: int = knob(20 * US, doc="work a sleeper does each time it wakes", unit="ns", min=0, source="assumption")
    kernel_timer_period: int = knob(
        250 * MS,
        doc="period of one self-re-arming global kernel timer per CPU (delayed work; 0: none)",
        unit="ns",
        min=0,
        source="assumption (kernel/workqueue.c delayed work re-armed from its work)",
    )
    background_cpu: int = knob(0, doc="CPU of the light background task", min=0, source="assumption")
    background_busy: int = knob(
        300 * US, doc="the background task's work per period (0: none)", unit="ns", min=0, source="assumption"
    )
    background_period: int = knob(
        3 * MS, doc="the background task's period (it sleeps with nanosleep, an hrtimer)", unit="ns", min=1, source="assumption"
    )
    run_for: int = knob(2 * S, doc="simulated time", unit="ns", min=1, source="assumption")

    def check_machine(self, machine: Any, path: str) -> None:
        if self.background_cpu >= machine.cpus:
            raise ConfigError(
                f"{path}.background_cpu",
                f"CPU {self.background_cpu} does not exist on a {machine.cpus}-CPU machine",
                "pick a CPU below machine.cpus",
            )


class IdleSleepers:
    """A mostly idle machine: periodic schedule_timeout() sleepers and kernel timers."""

    def __init__(self, m: Machine, cfg: IdleSleepersConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.model = _model(m)
        self.periods = 0
        self.lateness = LogHistogram()
        for i in range(cfg.sleepers):
            m.spawn(self._sleeper, f"sleeper/{i}")
        if cfg.background_busy:
            m.spawn(self._background, "background", affinity=(cfg.background_cpu,))
        if cfg.kernel_timer_period:
            for c in range(len(m.cpus)):
                self._kernel_timer(c)
        _stop_after(m, cfg.run_for)

    def _sleeper(self, task: Task):
        cfg = self.cfg
        m = self.m
        tick = m.tick_ns
        jiffies = -(-cfg.period // tick)
        nap = ScheduleTimeout(jiffies=jiffies)
        work = CpuWork(cfg.work) if cfg.work else None
        idx = int(task.name.rsplit("/", 1)[1])
        if cfg.stagger and idx:
            yield ScheduleTimeout(jiffies=idx)
        while True:
            t0 = m.now
            yield nap
            self.periods += 1
            self.lateness.add(max(0, m.now - t0 - jiffies * tick))
            if work is not None:
                yield work

    def _background(self, task: Task):
        cfg = self.cfg
        work = CpuWork(cfg.background_busy)
        nap = Sleep(max(0, cfg.background_period - cfg.background_busy))
        while True:
            yield work
            yield nap

    def _kernel_timer(self, cpu: int) -> None:
        """A global timer armed once on ``cpu`` (at boot) that re-arms itself from its
        callback, in softirq context, on whatever CPU expires it."""
        model = self.model
        period_j = -(-self.cfg.kernel_timer_period // self.m.tick_ns)

        def fn(c: CPU, t: Timer) -> int:
            return model.mod_timer(c, t, period_j, self.m.now + period_j * self.m.tick_ns)

        timer = Timer(f"kworker-timer/{cpu}", fn)
        # armed at boot on its CPU; the first expiry is staggered so they do not all align
        model.mod_timer(self.m.cpus[cpu], timer, period_j + cpu, self.m.now)

    def progress(self) -> float:
        return min(1.0, self.m.now / self.cfg.run_for)

    def metrics(self) -> dict[str, float]:
        secs = self.m.now / S
        return {
            "sleeper_periods": float(self.periods),
            "sleeper_periods_per_s": self.periods / secs if secs else float("nan"),
            "sleep_lateness_us_mean": self.lateness.mean / 1000 if self.lateness.n else float("nan"),
        }

    def latency(self) -> dict[str, LogHistogram]:
        return {"sleep_lateness_ns": self.lateness}


def build_loop(m: Machine, cfg: TimerLoopConfig) -> TimerLoop:
    return TimerLoop(m, cfg)


def build_dbench(m: Machine, cfg: DbenchConfig) -> Dbench:
    return Dbench(m, cfg)


def build_idle(m: Machine, cfg: IdleSleepersConfig) -> IdleSleepers:
    return IdleSleepers(m, cfg)
