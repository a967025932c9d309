"""Fitting rcusim's cost parameters (:class:`sim.params.Costs`) to a measurement profile.

Two kinds of estimate, each recorded with its method and the profile items it reads:

* **direct**: a measurement *is* the parameter, or a difference of two measurements isolates
  it (e.g. ``wakeup`` = median of ``write()`` calls that wake a reader - median of plain
  ``write()`` calls). See :data:`DIRECT` for every formula, and :data:`MM_SWITCH` for
  ``mm_switch`` (process minus thread ping-pong), which a profile without the
  ``context_switch_process`` item leaves at 0, with a warning.
* **fit**: a parameter shows only through an outcome the scheduler shapes (a ping-pong's
  one-way time, a fork+wait). :mod:`calibration.microbench` replays those benchmarks on the
  model; SciPy's ``least_squares`` finds the parameters whose simulated medians match the
  measured ones, with common random numbers (seeds 1..N for every candidate). See :data:`FITTED`.

Confidence intervals come from a bootstrap over the raw samples of every item used: each
replicate resamples the samples, recomputes every median and the direct estimates, and moves
the fitted parameters by the linearised fit (the Jacobian of the simulated outcomes with
respect to every parameter, by central differences at the optimum).

Workload knobs come from component items of the composites, measured on their own
(:data:`WORKLOAD_DIRECT`: ``tool_work`` of the netns workload from ``tool_exec``; its
``register_netdev`` and ``lo_up`` from ``veth_link``; its ``setup_net`` from
``netns_create``; ``futex_op`` of the pi_futex workload from ``pi_futex_uncontended``); a
profile without them keeps the knobs' priors, with a warning. They never change a Costs field.

The held-back composite benchmarks (:data:`HELD_BACK`) are never read here: they are what
``rcusim validate --profile`` predicts. Parameters no user-space measurement isolates
(:data:`NOT_MEASURED`) keep their documented defaults and say so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.errors import ConfigError
from sim.params import Costs

from .microbench import REPLICAS, Target, mean_over_seeds
from .profile import Profile

HELD_BACK: dict[str, str] = {
    "messaging": "perf bench sched messaging style groups over pipes (validated: rcusim validate --profile)",
    "netns_script": "the netns-2014 fake-router script with the real ip and sysctl (validated: rcusim validate --profile)",
    "pi_futex_handoff": "PI-futex (rt-mutex) throughput at several thread counts (validated: rcusim validate --profile)",
    "futex_handoff": "futex mutex handoff under contention (held back, not yet compared: no plain-futex mutex workload)",
}
"""Composite benchmarks never used in any fit: their role is to be predicted."""

# measured quantity -> (item, series label or None for the item's own samples)
QUANTITIES: dict[str, tuple[str, str | None]] = {
    "syscall": ("syscall", None),
    "clock_read": ("pipe_costs", "clock_read"),
    "pipe_write": ("pipe_costs", "write"),
    "pipe_read": ("pipe_costs", "read"),
    "wake_local": ("pipe_costs", "write_wakes_local_reader"),
    "wake_remote": ("pipe_costs", "write_wakes_remote_reader"),
    "write_after_sleep": ("pipe_costs", "write_after_sleep"),
    "irq_tick": ("irq_cost", "tick"),
    "irq_ipi": ("irq_cost", "ipi"),
    "ipi_round_trip": ("irq_cost", "ipi_round_trip"),
    "membarrier_no_ipi": ("membarrier_private_expedited", "no_other_threads"),
    "irq_hrtimer": ("irq_cost", "hrtimer"),
    "fork_call": ("fork_exec", "fork_call"),
    "fork_exit_wait": ("fork_exec", "fork_exit_wait"),
    "fork_exec_wait": ("fork_exec", "fork_exec_wait"),
    "pingpong_1b_same": ("context_switch", None),
    "pingpong_same": ("pipe_message", "same_cpu_pingpong"),
    "pingpong_1b_cross": ("cross_cpu_wakeup", None),
    "pingpong_cross": ("pipe_message", "cross_cpu_pingpong"),
    "stream_same": ("pipe_message", "same_cpu_stream"),
    "stream_cross": ("pipe_message", "cross_cpu_stream"),
    "sleep_1ms": ("sleep_lateness", "1ms"),
    "sleep_100us": ("sleep_lateness", "100us"),
    "wake_1us": ("wake_by_sleep_age", "d_1000ns"),
    "wake_4us": ("wake_by_sleep_age", "d_4000ns"),
    "wake_40us": ("wake_by_sleep_age", "d_40000ns"),
}
COMPONENTS: dict[str, tuple[str, str | None]] = {
    "tool_true": ("tool_exec", "true"),
    "tool_ip": ("tool_exec", "ip_version"),
    "tool_sysctl": ("tool_exec", "sysctl_read"),
    "pi_lock_unlock": ("pi_futex_uncontended", "lock_unlock_pair"),
    "pi_syscall": ("pi_futex_uncontended", "syscall_baseline"),
    "veth_one_queue": ("veth_link", "create_one_queue"),
    "rtnl_baseline": ("veth_link", "request_baseline"),
    "lo_up": ("veth_link", "lo_up"),
    "netns_unshare": ("netns_create", "create_with_alive"),
}
"""Quantities of the composites' component items (collector 0.3.0): optional, they set workload
knobs (:data:`WORKLOAD_DIRECT`), never a Costs field."""

MM_QUANTITIES: dict[str, tuple[str, str | None]] = {
    "pingpong_1b_process": ("context_switch_process", None),
    "pingpong_1b_threads": ("context_switch_process", "threads"),
    "ring8_processes": ("context_switch_process", "ring8_processes"),
    "ring8_threads": ("context_switch_process", "ring8_threads"),
}
"""The same-CPU ping-pong between two processes and its interleaved thread baseline (collector
0.5.0), and a ring of 8 processes and of 8 threads on one CPU: optional, they set
``Costs.mm_switch`` (:data:`MM_SWITCH`) and ``Costs.asid_miss`` (:data:`ASID_MISS`)."""

GP_QUANTITIES: dict[str, tuple[str, str | None]] = {
    "gp_idle": ("membarrier_global", None),
    "gp_busy": ("membarrier_global_busy", None),
    "gp_idle_mean": ("membarrier_global", None),
    "gp_busy_mean": ("membarrier_global_busy", None),
}
"""MEMBARRIER_CMD_GLOBAL latency (a normal grace period) with the other CPUs idle and busy:
checks only, never fitted. The ``_mean`` rows compare means: with two modes (7 and 15 ms
on the development machine) the mean says how often a call took the fast one, which the
median does not."""


def _where(q: str) -> tuple[str, str | None]:
    for table in (QUANTITIES, COMPONENTS, MM_QUANTITIES, GP_QUANTITIES):
        if q in table:
            return table[q]
    raise KeyError(q)


CROSS_CPU = {
    "wake_1us",
    "wake_4us",
    "wake_40us",
    "stream_cross",
    "wake_remote",
    "irq_ipi",
    "ipi_round_trip",
    "membarrier_no_ipi",
    "pingpong_1b_cross",
    "pingpong_cross",
}


def _m(q: str) -> str:
    item, series = _where(q)
    return f"{item}.{series}" if series else item


@dataclass(frozen=True)
class Direct:
    """A parameter computed from medians of measured quantities."""

    param: str
    inputs: tuple[str, ...]
    formula: str
    fn: Callable[[Mapping[str, float]], float]
    cross_cpu: bool = False


DIRECT: tuple[Direct, ...] = (
    Direct("syscall", ("syscall",), "syscall median", lambda m: m["syscall"]),
    Direct(
        "pipe_send0",
        ("pipe_write", "clock_read", "syscall"),
        "pipe_costs.write - pipe_costs.clock_read - syscall (medians): one isolated write()",
        lambda m: m["pipe_write"] - m["clock_read"] - m["syscall"],
    ),
    Direct(
        "pipe_recv0",
        ("pipe_read", "clock_read", "syscall"),
        "pipe_costs.read - pipe_costs.clock_read - syscall (medians): one isolated read()",
        lambda m: m["pipe_read"] - m["clock_read"] - m["syscall"],
    ),
    Direct(
        "wakeup",
        ("wake_local", "write_after_sleep"),
        "pipe_costs.write_wakes_local_reader - pipe_costs.write_after_sleep (medians): try_to_wake_up paid by the writer",
        lambda m: m["wake_local"] - m.get("write_after_sleep", m["pipe_write"]),
    ),
    Direct(
        "ipi_send",
        ("wake_remote", "wake_local"),
        "pipe_costs.write_wakes_remote_reader - pipe_costs.write_wakes_local_reader (medians): the IPI to the idle CPU",
        lambda m: m["wake_remote"] - m["wake_local"],
        cross_cpu=True,
    ),
    Direct(
        "ipi_handler",
        ("irq_ipi",),
        "irq_cost.ipi median: the gap a function-call IPI makes in a user-mode spinner",
        lambda m: m["irq_ipi"],
        cross_cpu=True,
    ),
    Direct(
        "ipi_latency",
        ("ipi_round_trip", "membarrier_no_ipi", "irq_ipi"),
        "irq_cost.ipi_round_trip - membarrier_private_expedited.no_other_threads - irq_cost.ipi (medians): send to handler start",
        lambda m: m["ipi_round_trip"] - m["membarrier_no_ipi"] - m["irq_ipi"],
        cross_cpu=True,
    ),
    Direct(
        "tick",
        ("irq_tick",),
        "irq_cost.tick median of the long mode (see long_mode): the gap the tick makes in a user-mode spinner",
        lambda m: m["irq_tick"],
    ),
    Direct(
        "timer_irq",
        ("irq_hrtimer",),
        "irq_cost.hrtimer median: the gap of an hrtimer interrupt with no waiter",
        lambda m: m["irq_hrtimer"],
    ),
    Direct("fork", ("fork_call",), "fork_exec.fork_call median: fork() as the parent sees it", lambda m: m["fork_call"]),
)


@dataclass(frozen=True)
class Fitted:
    """A parameter fitted through simulated outcomes."""

    param: str
    outcomes: tuple[str, ...]
    formula: str
    cross_cpu: bool = False


FITTED: tuple[Fitted, ...] = (
    Fitted(
        "pipe_scale",
        ("stream_same", "stream_cross"),
        "pipe streams (pipe_message.same_cpu_stream, .cross_cpu_stream) simulated vs measured, fitting one factor "
        "on the isolated write() and read() costs (pipe_costs: write/read - clock_read - syscall), which set the split",
    ),
    Fitted(
        "context_switch",
        ("pingpong_1b_same", "pingpong_same"),
        "same-CPU pipe ping-pong (context_switch, pipe_message.same_cpu_pingpong) simulated vs measured",
    ),
    Fitted(
        "idle_exit",
        ("pingpong_1b_cross", "pingpong_cross"),
        "cross-CPU pipe ping-pong (cross_cpu_wakeup, pipe_message.cross_cpu_pingpong) simulated vs measured",
        cross_cpu=True,
    ),
    Fitted("exit", ("fork_exit_wait",), "fork_exec.fork_exit_wait (fork, child exits, waitpid) simulated vs measured"),
    Fitted("exec", ("fork_exec_wait",), "fork_exec.fork_exec_wait (fork, exec /bin/true, waitpid) simulated vs measured"),
)

# measured outcome -> microbench replica
OUTCOME_REPLICA: dict[str, str] = {
    "stream_same": "same_cpu_stream",
    "stream_cross": "cross_cpu_stream",
    "pingpong_1b_same": "same_cpu_pingpong",
    "pingpong_same": "same_cpu_pingpong",
    "pingpong_1b_cross": "cross_cpu_pingpong",
    "pingpong_cross": "cross_cpu_pingpong",
    "fork_exit_wait": "fork_exit_wait",
    "fork_exec_wait": "fork_exec_wait",
}

CHECKS: dict[str, str] = {
    "sleep_1ms": "sleep_lateness_1ms",
    "sleep_100us": "sleep_lateness_100us",
    "wake_1us": "wake_1us",
    "wake_4us": "wake_4us",
    "wake_40us": "wake_40us",
    "ring8_threads": "ring8_threads",
    "ring8_processes": "ring8_processes",
    "gp_idle": "gp_idle",
    "gp_busy": "gp_busy",
    "gp_idle_mean": "gp_idle_mean",
    "gp_busy_mean": "gp_busy_mean",
}
"""Microbenchmarks predicted (not fitted) as consistency checks: sleep lateness (measured minus
the thread's timer slack, which the model does not have), a cross-CPU wakeup 1, 4 and 40 us
after the wakee went to sleep (collector 0.12.0's ``wake_by_sleep_age``; the model wakes an idle
CPU the same way whatever its idle age, the machine does not: docs/notes/bundled-profile.md), and the
rings of 8 threads and of 8 processes on one CPU (``context_switch_process``: only their
difference enters a fit, ``asid_miss``; their level checks the switch cost the two-task
ping-pong fitted when more than two tasks take turns), and the normal grace period of
``membarrier(GLOBAL)`` with the other CPUs idle and busy (the tick, the FQS timeouts, the timer
wheel and where its timers run, the profile's RCU parameters, the idle CPUs' own timers), as a
median and as a mean."""

GP_NOTE = (
    "median; on the development machine the busy distribution has two modes, 7 and 15 ms: the FQS "
    "timeout runs on the busy CPU (timer migration) unless the idle CPU woke in the jiffy before it and so "
    "kept it (README, rcu)"
)

GP_MEAN_NOTE = (
    "mean: how often a call takes the other mode. Busy: the fast one, when the idle CPU woke in the jiffy "
    "before the FQS timeout and so kept it and ticked for it; idle: the slow one, when a task ran on the other "
    "CPU, which then went idle last and took the timeout (README, rcu: the nohz blocked-load kick, the idle CPU's "
    "own timers idle_timers_per_s and idle_hrtimers_per_s, the other processes idle_task_wakeups_per_s; 0 "
    "without the idle_wakeups item)"
)

RING_NOTE = (
    "median, ns per hop; the model's switch costs the same whichever task comes next, the machine's does not "
    "(docs/notes/bundled-profile.md: rings of 2 to 40 members)"
)

NOT_MEASURED: dict[str, str] = {
    "migration": "no collector item isolates the cache refill after a migration",
    "balance": "no collector item isolates one load-balancing pass",
    "softirq_entry": "no collector item isolates softirq entry/exit",
    "idle_task_work": "no collector item times the other processes' runs (a perf trace of the development machine: "
    "36.6 us median, sim/params.py)",
}

JITTER_INPUTS = ("pipe_write", "pipe_read")
# A fitted anchor further off than this after the fit gets a warning: on a profile whose items
# agree the fit matches every anchor within 5-7 %, so 10 % means the inputs disagree, not that
# the fit is coarse.
FIT_MISS = 0.10


@dataclass(frozen=True)
class OptionalDirect:
    """A Costs field computed from medians of an item older profiles lack: without it the field
    keeps its default (``sim/params.py``), with a warning."""

    param: str
    inputs: tuple[str, ...]
    formula: str
    fn: Callable[[Mapping[str, float]], float]
    missing: str


MM_SWITCH = OptionalDirect(
    "mm_switch",
    ("pingpong_1b_process", "pingpong_1b_threads"),
    "context_switch_process - context_switch_process.threads (medians): a same-CPU 1-byte pipe ping-pong between "
    "two processes minus the same between two threads, interleaved in one item; per one-way trip one switch, which "
    "between processes also switches the address space (kernel/sched/core.c context_switch: switch_mm_irqs_off "
    "when next->mm != prev->active_mm) and refills the TLB and caches",
    lambda m: m["pingpong_1b_process"] - m["pingpong_1b_threads"],
    "context_switch_process",
)
"""``mm_switch`` is direct: the thread ping-pong the other fits replay pays no mm switch in the
model, so the difference of the two ping-pongs is the parameter. It is fixed before the fit
(the fork replicas switch between processes and pay it)."""

ASID_MISS = OptionalDirect(
    "asid_miss",
    ("ring8_processes", "ring8_threads", "pingpong_1b_process", "pingpong_1b_threads"),
    "(context_switch_process.ring8_processes - .ring8_threads) - mm_switch (medians): per hop of a ring of 8 "
    "processes on one CPU beyond a ring of 8 threads, less the switch between two processes that keep their "
    "PCIDs; 8 mms are more than x86's 6 per-CPU PCIDs (TLB_NR_DYN_ASIDS), so every hop takes a new ASID and "
    "flushes (arch/x86/mm/tlb.c choose_new_asid)",
    lambda m: (m["ring8_processes"] - m["ring8_threads"]) - max(0.0, m["pingpong_1b_process"] - m["pingpong_1b_threads"]),
    "context_switch_process",
)
"""``asid_miss`` is direct too: what a switch costs beyond ``mm_switch`` when the mm has lost its
PCID; a profile of collector 0.5.0 before the ring series keeps 0, with a warning."""


def _idle_rate(
    profile: Profile, param: str, value: float, n: float, seconds: float, formula: str, inputs: tuple[str, ...]
) -> Estimate:
    """A rate ``value`` of ``idle_wakeups`` from ``n`` events in ``seconds``, with the 95 % interval
    of a Poisson count."""
    half = 1.96 * math.sqrt(max(n, 0.0)) / seconds if seconds > 0 else 0.0
    note = f"idle_wakeups collected {profile.collected('idle_wakeups')}"
    return Estimate(param, value, max(0.0, value - half), value + half, "direct", formula, inputs, note)


def _unmeasured(param: str, why: str, fix: str = "") -> Estimate:
    """A rate the profile does not measure: 0 (the model runs as before it existed)."""
    return Estimate(param, 0.0, None, None, "default", f"not measured: {why}", (), fix)


def idle_wakeup_estimates(profile: Profile, warnings: list[str] | None = None) -> tuple[Estimate, Estimate, Estimate]:
    """``Costs.idle_timers_per_s``, ``idle_hrtimers_per_s`` and ``idle_task_wakeups_per_s`` from
    ``idle_wakeups``. The first two are an idle CPU's
    TIMER softirqs (timer-wheel expiries: a wakeup that runs a tick) and its other local timer
    interrupts (hrtimers), per second, while every other CPU spins; the measured CPUs' totals
    (``params.events`` / ``params.seconds``), 95 % intervals as Poisson counts. Collector
    0.13.0's item counted only the local timer interrupts: all are taken as hrtimers then (on
    the development machine 26 of 284 were wheel timers), with a warning. Without the item both
    are 0, with a warning.

    The third, ``Costs.idle_task_wakeups_per_s``, is the runs of the machine's other tasks in
    the same windows (collector 0.15.0's series ``context_switches``, two switches a run); the
    hrtimer interrupts that woke them are then no longer bare ones, so ``idle_hrtimers_per_s``
    keeps only what is left of the local timer interrupts (at least 0: a run can also be woken
    by another CPU). Before 0.15.0 it is 0 and the hrtimers stay as they were.

    Why the split matters: a wheel timer wakes an idle CPU at a tick edge, and that tick from
    idle notes an RCU quiescent state; an hrtimer wakes it between ticks, and only makes it
    look at its timers again on its way back to idle (kernel/time/timer.c: a timer due by the
    next jiffy then stays with it). On the development machine most are a task's hrtimer
    sleeps (a trace of the idle CPU: 22 a second hrtimer_wakeup, 9 tick_nohz_handler)."""
    item = profile.items.get("idle_wakeups")

    if item is None or item.status != "ok":
        why = "the profile has no usable idle_wakeups item (collector < 0.13.0)"
        if warnings is not None:
            warnings.append(
                f"idle_timers_per_s, idle_hrtimers_per_s: {why}; both stay 0, so the model's idle CPUs wake for "
                "nothing but its own timers (collect idle_wakeups and merge it into the profile to measure them)"
            )
        fix = (
            "collect it: rcusim-collector --items idle_wakeups --out NEW.json, then "
            "python -m calibration.profile --merge PROFILE NEW.json --out PROFILE"
        )
        return (
            _unmeasured("idle_timers_per_s", why, fix),
            _unmeasured("idle_hrtimers_per_s", why, fix),
            _unmeasured("idle_task_wakeups_per_s", why, fix),
        )
    seconds = float(item.params.get("seconds") or 0.0)
    events = float(item.params.get("events") or 0.0)
    wheel = item.get_series("timer_softirq")
    switches = item.get_series("context_switches")
    no_tasks = _unmeasured(
        "idle_task_wakeups_per_s",
        "the idle_wakeups item has no context_switches series (collector < 0.15.0)",
        "re-collect idle_wakeups with collector 0.15.0",
    )
    if wheel is None or seconds <= 0:
        # collector 0.13.0: the local timer interrupts only, their rate from the windows' median gap
        gap = float(item.stats.median or 0.0)
        rate = 1e9 / gap if gap > 0 else 0.0
        n = rate * item.samples_total * float(item.params.get("window_ns", 0)) / 1e9
        if warnings is not None:
            warnings.append(
                "idle_timers_per_s: the idle_wakeups item of collector 0.13.0 does not tell the wheel timers from "
                "the hrtimers; all are taken as hrtimers (re-collect idle_wakeups with collector 0.14.0)"
            )
        return (
            _unmeasured("idle_timers_per_s", "collector 0.13.0's item has no split"),
            _idle_rate(
                profile,
                "idle_hrtimers_per_s",
                rate,
                n,
                n / rate if rate > 0 else 0.0,
                "1e9 / idle_wakeups median: the local timer interrupts of an idle CPU while every other CPU spins, per second "
                "(collector 0.13.0: all taken as hrtimers)",
                ("idle_wakeups",),
            ),
            no_tasks,
        )
    n_wheel = float(wheel.params.get("events") or 0.0)
    n_hr = max(0.0, events - n_wheel)
    tasks = no_tasks
    if switches is not None:
        n_runs = float(switches.params.get("events") or 0.0) / 2.0
        tasks = _idle_rate(
            profile,
            "idle_task_wakeups_per_s",
            n_runs / seconds,
            n_runs,
            seconds,
            "idle_wakeups.context_switches params events / 2 / seconds: the runs of other tasks on a CPU the "
            "collector leaves idle while every other spins (a switch in and one out each), per second; on the "
            "development machine the sandbox's tool process, kworkers, kcompactd, the RCU GP kthread (a perf trace)",
            ("idle_wakeups.context_switches",),
        )
        n_hr = max(0.0, n_hr - n_runs)
    return (
        _idle_rate(
            profile,
            "idle_timers_per_s",
            n_wheel / seconds,
            n_wheel,
            seconds,
            "idle_wakeups.timer_softirq params events / seconds: the TIMER softirqs of an idle CPU while every other CPU "
            "spins, per second: its timer-wheel expiries, each at a tick (kernel/time/timer.c run_timer_softirq)",
            ("idle_wakeups.timer_softirq",),
        ),
        _idle_rate(
            profile,
            "idle_hrtimers_per_s",
            n_hr / seconds,
            n_hr,
            seconds,
            "idle_wakeups params events / seconds - the same of .timer_softirq: the idle CPU's local timer interrupts "
            "that ran no wheel timer (hrtimers: a task's sleep or timeout), per second"
            + ("" if switches is None else ", less idle_task_wakeups_per_s (those woke a task), at least 0"),
            ("idle_wakeups", "idle_wakeups.timer_softirq") + (() if switches is None else ("idle_wakeups.context_switches",)),
        ),
        tasks,
    )


def other_call_rcu_estimate(profile: Profile) -> Estimate:
    """``Costs.other_call_rcu_per_s`` from ``idle_wakeups.gp_kthread`` (collector 0.16.0): the RCU
    grace-period kthread's sleeps while every CPU is idle, halved. On an idle machine each grace
    period someone asks for is a wakeup of the kthread to start it and one for the FQS scan that
    ends it (a second scan adds one: the estimate is then a little high; a call_rcu() that joins
    a grace period already asked for is not counted: then low). 95 % interval as a Poisson
    count. Before 0.16.0 it is 0 (the model's idle machine asks for no grace period of its own)."""
    item = profile.items.get("idle_wakeups")
    s = item.get_series("gp_kthread") if item is not None and item.status == "ok" else None
    seconds = float(s.params.get("seconds") or 0.0) if s is not None else 0.0
    if s is None or seconds <= 0:
        return _unmeasured(
            "other_call_rcu_per_s",
            "the idle_wakeups item has no gp_kthread series (collector < 0.16.0)",
            "re-collect idle_wakeups with collector 0.16.0",
        )
    n = float(s.params.get("events") or 0.0) / 2.0
    return _idle_rate(
        profile,
        "other_call_rcu_per_s",
        n / seconds,
        n,
        seconds,
        "idle_wakeups.gp_kthread params events / 2 / seconds: the grace periods the idle machine's other activity "
        "asks for, per second (the GP kthread sleeps twice in each: its start, the FQS scan that ends it)",
        ("idle_wakeups.gp_kthread",),
    )


NETNS_TOOL_RUNS = {"ip": 6, "sysctl": 1}
"""Tool runs per router of the collector's fake-router script as the ``netns`` workload runs it
(``steps = "full"``, no helpers): ``ip netns add``, two ``ip netns exec`` (each an ``ip`` that
execs ``ip link set lo up`` or ``sysctl -w``) and two ``ip link add``: six ``ip`` images, one
``sysctl`` (models/workloads/netns.py applies ``tool_work`` once per program and once per exec
of ``ip netns exec``)."""


@dataclass(frozen=True)
class WorkloadDirect:
    """A workload knob computed from medians of a component item (a ``[workload.KIND]`` entry of
    the params file); without the item the knob keeps its prior, and the fit report says so."""

    workload: str
    param: str
    inputs: tuple[str, ...]
    formula: str
    fn: Callable[[Mapping[str, float]], float]
    missing: str


def _tool_work(m: Mapping[str, float]) -> float:
    n = NETNS_TOOL_RUNS
    extra = n["ip"] * (m["tool_ip"] - m["tool_true"]) + n["sysctl"] * (m["tool_sysctl"] - m["tool_true"])
    return extra / (n["ip"] + n["sysctl"])


WORKLOAD_DIRECT: tuple[WorkloadDirect, ...] = (
    WorkloadDirect(
        "netns",
        "tool_work",
        ("tool_ip", "tool_sysctl", "tool_true"),
        "(6 x (tool_exec.ip_version - tool_exec.true) + 1 x (tool_exec.sysctl_read - tool_exec.true)) / 7 (medians): "
        "what an ip or sysctl run costs beyond fork + exec + exit of /bin/true (which Costs.fork/exec/exit already "
        "model), weighted by the script's 6 ip and 1 sysctl images per router",
        _tool_work,
        "tool_exec",
    ),
    WorkloadDirect(
        "netns",
        "setup_net",
        ("netns_unshare",),
        "netns_create.create_with_alive (median): unshare(CLONE_NEWNET) timed inside the child that calls it, "
        "with 0..K namespaces alive (setup_net and every pernet init, net/core/net_namespace.c copy_net_ns)",
        lambda m: m["netns_unshare"],
        "netns_create",
    ),
    WorkloadDirect(
        "netns",
        "register_netdev",
        ("veth_one_queue", "rtnl_baseline"),
        "(veth_link.create_one_queue - veth_link.request_baseline) / 2 (medians): an RTM_NEWLINK of a veth pair "
        "(peer in another namespace) asking for one TX and one RX queue per end, so that veth_newlink trims nothing "
        "and waits for no grace period, beyond a refused RTNL request's round trip; per device",
        lambda m: (m["veth_one_queue"] - m["rtnl_baseline"]) / 2,
        "veth_link",
    ),
    WorkloadDirect(
        "netns",
        "lo_up",
        ("lo_up", "rtnl_baseline"),
        "veth_link.lo_up - veth_link.request_baseline (medians): RTM_NEWLINK setting lo up in a fresh namespace "
        "(dev_open and the NETDEV_UP notifiers) beyond a refused RTNL request's round trip",
        lambda m: m["lo_up"] - m["rtnl_baseline"],
        "veth_link",
    ),
    WorkloadDirect(
        "pi_futex",
        "futex_op",
        ("pi_lock_unlock", "pi_syscall"),
        "pi_futex_uncontended.lock_unlock_pair / 2 - pi_futex_uncontended.syscall_baseline (medians): a FUTEX_LOCK_PI "
        "or FUTEX_UNLOCK_PI call on an unowned word (hash, hash-bucket lock, cmpxchg of the word; no pi_state, no "
        "rt-mutex) beyond system call entry and exit",
        lambda m: m["pi_lock_unlock"] / 2 - m["pi_syscall"],
        "pi_futex_uncontended",
    ),
)


def workload_prior(workload: str, param: str) -> float:
    """The documented default of a workload knob (its prior when no item measures it)."""
    if workload == "netns":
        from models.workloads.netns import NetnsConfig

        return float(getattr(NetnsConfig(), param))
    from models.workloads.pi_futex import PiFutexConfig

    return float(getattr(PiFutexConfig(), param))


@dataclass(frozen=True)
class Estimate:
    param: str
    value: float
    low: float | None
    high: float | None
    method: str  # "direct" | "fit" | "spread" | "default"
    formula: str
    inputs: tuple[str, ...]
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "value": self.value,
            "ci95": None if self.low is None else [self.low, self.high],
            "method": self.method,
            "formula": self.formula,
            "inputs": list(self.inputs),
            "note": self.note,
        }


@dataclass(frozen=True)
class OutcomeRow:
    name: str
    item: str
    measured: float
    simulated: float
    role: str  # "fitted" | "check"
    note: str = ""

    @property
    def rel_error(self) -> float:
        return (self.simulated - self.measured) / self.measured if self.measured else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "item": self.item,
            "measured_ns": self.measured,
            "simulated_ns": self.simulated,
            "rel_error": self.rel_error,
            "role": self.role,
            "note": self.note,
        }


@dataclass
class Calibration:
    """The result of :func:`calibrate`."""

    profile_source: str
    target: Target
    seeds: int
    bootstrap: int
    estimates: dict[str, Estimate]
    outcomes: list[OutcomeRow]
    warnings: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    """Workload knobs set from component items (:data:`WORKLOAD_DIRECT`): kind -> knob -> estimate."""
    tick_busy: TickTable = field(default_factory=lambda: TickTable((), "", ()))
    """``Costs.tick_busy``: a table copied from the profile, not an estimate (:func:`tick_table`)."""
    other_gaps: GapTable = field(default_factory=lambda: GapTable((), 0, "", ()))
    """``Costs.other_gaps`` and ``other_gaps_per_s``, copied from the profile (:func:`gap_table`)."""

    def workload_mapping(self) -> dict[str, dict[str, int]]:
        return {k: {p: int(round(e.value)) for p, e in v.items()} for k, v in self.workload.items()}

    def costs(self) -> Costs:
        """The calibrated costs as a params file holds them (ns rounded, jitter_cv to 3 places)."""
        return make_costs(self.costs_mapping())

    def costs_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(Costs):
            if f.name == "tick_busy":
                out[f.name] = [list(r) for r in self.tick_busy.rows]
                continue
            if f.name == "other_gaps":
                out[f.name] = list(self.other_gaps.gaps)
                continue
            if f.name == "other_gaps_per_s":
                out[f.name] = self.other_gaps.per_s
                continue
            v = self.estimates[f.name].value
            out[f.name] = round(v, 3) if f.name in FLOAT_COSTS else int(round(v))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile_source,
            "machine": self.machine,
            "target": dataclasses.asdict(self.target),
            "seeds": self.seeds,
            "bootstrap": self.bootstrap,
            "held_back_items": sorted(HELD_BACK),
            "costs": self.costs_mapping(),
            "parameters": [self.estimates[f.name].to_json() for f in dataclasses.fields(Costs) if f.name not in TABLES],
            "tick_busy": {
                "rows": len(self.tick_busy.rows),
                "formula": self.tick_busy.formula,
                "inputs": list(self.tick_busy.inputs),
            },
            "other_gaps": {
                "gaps": len(self.other_gaps.gaps),
                "per_s": self.other_gaps.per_s,
                "formula": self.other_gaps.formula,
                "inputs": list(self.other_gaps.inputs),
            },
            "workload": {k: [e.to_json() for e in v.values()] for k, v in self.workload.items()},
            "outcomes": [o.to_json() for o in self.outcomes],
            "warnings": list(self.warnings),
        }


# ------------------------------------------------------------------ measurements


MIXED: frozenset[str] = frozenset({"irq_tick"})
"""Quantities whose samples mix the event with much shorter gaps of another origin: their
estimate is the median of the long mode (:func:`long_mode`), not of all samples."""


def long_mode(x: np.ndarray, separation: float = 10.0) -> np.ndarray:
    """The samples of the upper of two modes, when ``x`` has two modes whose medians differ by
    more than ``separation`` times; else ``x``. The split is Otsu's threshold on log values
    (the cut between sorted samples that maximises the between-class variance).

    Why: ``irq_cost.tick`` keeps every gap over the collector's threshold (300 ns) at the
    tick's phase, and on the development machine 406 of its 948 gaps are 0.3-0.4 us next to
    16-30 us ticks: their median (16.5 us) sits at the lower edge of the ticks, whose own
    median is 18.7 us. A gap that short is not the tick handler's run (the first clock read
    after an interrupt, or a seqcount retry while the tick updates the vDSO time, are
    candidates [inference]), so the tick is the long mode."""
    xs = np.sort(np.asarray(x, dtype=float))
    if xs.size < 4 or xs[0] <= 0:
        return xs
    lx = np.log(xs)
    n = xs.size
    k = np.arange(1, n)  # split after index k-1: lower = lx[:k]
    c = np.cumsum(lx)
    mean_lo = c[:-1] / k
    mean_hi = (c[-1] - c[:-1]) / (n - k)
    score = k * (n - k) * (mean_hi - mean_lo) ** 2
    cut = int(np.argmax(score)) + 1
    lo, hi = xs[:cut], xs[cut:]
    if float(np.median(hi)) > separation * float(np.median(lo)):
        return hi
    return xs


def _samples(profile: Profile, q: str) -> tuple[np.ndarray, float]:
    """The stored samples of quantity ``q`` and the median over *all* samples (the collector
    stores a subsample when there were more than ``max_samples``); for :data:`MIXED`
    quantities the long mode of the stored samples and its median."""
    item, series = _where(q)
    src = profile.series(item, series) if series else profile.item(item)
    arr = np.asarray(src.samples, dtype=float)
    if arr.size == 0:
        raise ConfigError(f"{profile.source}: items.{item}", "has no stored samples", "re-collect it with rcusim collect")
    if q in MIXED:
        arr = long_mode(arr)
        return arr, float(np.median(arr))
    full = src.stats.median
    return arr, float(full) if full is not None else float(np.median(arr))


MIN_SAMPLES = 20
"""Below this many stored samples a quantity's resampled medians (the bootstrap) and spread
(jitter_cv) are too coarse to trust, and calibrate says so (``collect --max-samples`` caps
what the collector stores; ``--quick`` stores at least 30)."""


def _stored_samples(profile: Profile, q: str) -> int:
    """How many samples of quantity ``q`` the profile stores (before any mode filter)."""
    item, series = _where(q)
    src = profile.series(item, series) if series else profile.item(item)
    return len(src.samples)


CHECK_ONLY = frozenset({"wake_1us", "wake_4us", "wake_40us"})
"""Quantities read only for :data:`CHECKS` rows: no estimate uses them (optional: collector 0.12.0)."""
OPTIONAL = {"write_after_sleep", *CHECK_ONLY}
"""Quantities a profile of an older collector lacks; the fit falls back (and warns)."""


def _needed(cross: bool) -> list[str]:
    return [q for q in QUANTITIES if cross or q not in CROSS_CPU]


def _available(profile: Profile, q: str) -> bool:
    """The quantity's item ran and its series exists with samples (a wake_by_sleep_age delay at
    which the sleeper never slept has none)."""
    item, series = _where(q)
    it = profile.items.get(item)
    if it is None or it.status != "ok":
        return False
    if series is None:
        return True
    s = it.get_series(series)
    return s is not None and bool(s.samples)


def robust_cv(x: np.ndarray) -> float:
    """Coefficient of variation of the central 90 % of ``x`` (5 % trimmed at each end): the
    spread of ordinary calls, without the rare long interruptions a single-call sample can
    contain (a MAD would be 0 here: single calls are quantised at the clock's resolution)."""
    xs = np.sort(x)
    k = int(0.05 * xs.size)
    core = xs[k : xs.size - k] if xs.size - 2 * k >= 2 else xs
    mean = float(np.mean(core))
    if mean <= 0 or core.size < 2:
        return 0.0
    return float(np.std(core, ddof=1) / mean)


def make_costs(values: Mapping[str, Any]) -> Costs:
    """Costs from estimated values at the precision a params file holds them (durations in
    whole ns, the rates per second and jitter_cv to 3 places), so that the fit's own runs, its
    checks and every later run from the written file simulate the same machine, bit for bit: a
    rate that differs in its 7th digit still changes when each random event falls."""
    base = Costs()
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(Costs):
        v = values.get(f.name, getattr(base, f.name))
        if f.name == "tick_busy":
            kw[f.name] = tuple(tuple(max(0, int(x)) for x in row) for row in v)
        elif f.name == "other_gaps":
            kw[f.name] = tuple(max(0, int(x)) for x in v)
        else:
            kw[f.name] = round(max(0.0, float(v)), 3) if f.name in FLOAT_COSTS else max(0, int(round(v)))
    return Costs(**kw)


FLOAT_COSTS = frozenset(f.name for f in dataclasses.fields(Costs) if f.type in (float, "float"))
"""The Costs fields kept as measured (the rates per second and jitter_cv), not rounded to an
integer: a rate of 1.6 a second rounded to 2 would be a quarter too high."""


TABLES = ("tick_busy", "other_gaps", "other_gaps_per_s")
"""Costs fields copied from the profile as measured (tables and the gaps' rate), not estimates."""


@dataclass(frozen=True)
class GapTable:
    """``Costs.other_gaps`` and ``other_gaps_per_s`` as :func:`gap_table` reads them."""

    gaps: tuple[int, ...]
    per_s: float
    formula: str
    inputs: tuple[str, ...]


def gap_table(profile: Profile, warnings: list[str] | None = None, apply: bool = True) -> GapTable:
    """``Costs.other_gaps`` from ``irq_cost.other_gaps`` (collector 0.11.0+): the stored gaps of
    a lone user-mode spinner away from the tick's window (a subsample of them when there were
    more than the collector keeps: a distribution, so that is fine) and their rate,
    ``params.per_s``. Empty, with a warning, for an older profile: the model then has none.
    With ``apply`` false (``rcusim calibrate`` without ``--other-gaps``) the table is empty and
    its formula says what was measured and left out.

    Why they exist: on the development machine (a virtual machine) a busy CPU is away 400-850
    times a second for 0.3-60 us besides its tick (host exits and short preemptions of the
    virtual CPU; an rdtsc loop sees the same gaps, so they are not clock artefacts); each can
    delay a lock handoff or a wakeup. Why they are left out by default: in the model they start
    PI-futex convoys the way the kernel does (a waiter delayed while it is the pending owner
    makes the next contender sleep), but far more often than the machine lets them: with them the
    two-thread model sleeps 0.22 times per operation, without them 0.065-0.075, the machine
    0.02-0.08 (traces, voluntary switches), and a trace of the machine's convoys shows its handoffs to be the
    model's (docs/notes/bundled-profile.md). So the convoys dominate: the two-thread composite went from
    +35 % to -25..-32 % on the 14:16 profile (a side run's gaps over 1 us) and, on two collector 0.12.0
    runs, from -16..-28 % to -57..-59 % and from -64 % to -73 %; the three-thread one to -17..-46 %
    [model measurement, Nov 2026; docs/notes/bundled-profile.md]."""
    it = profile.items.get("irq_cost")
    s = it.get_series("other_gaps") if it is not None and it.status == "ok" else None
    per_s = float(s.params.get("per_s", 0) or 0) if s is not None else 0.0
    if s is None or not s.samples or per_s <= 0:
        if warnings is not None:
            warnings.append(
                "other_gaps: the profile has no usable irq_cost.other_gaps series (collector < 0.11.0); the model "
                "has no interruptions besides the tick and its own (re-collect irq_cost to measure them)"
            )
        return GapTable((), 0, "", ())
    if not apply:
        return GapTable(
            (),
            0,
            f"not applied (rcusim calibrate --other-gaps applies them): irq_cost.other_gaps measured {per_s:.0f} per "
            f"second, median {float(np.median(s.samples)):.0f} ns",
            (),
        )
    gaps = tuple(int(round(v)) for v in s.samples)
    formula = (
        f"irq_cost.other_gaps: {len(gaps)} stored gaps of {s.samples_total}, median {float(np.median(gaps)):.0f} ns, "
        f"{per_s:.0f} per second (params.per_s)"
    )
    return GapTable(gaps, round(per_s, 3), formula, ("irq_cost.other_gaps",))


@dataclass(frozen=True)
class TickTable:
    """``Costs.tick_busy`` as :func:`tick_table` reads it from a profile."""

    rows: tuple[tuple[int, ...], ...]
    formula: str
    inputs: tuple[str, ...]


def tick_table(profile: Profile, warnings: list[str] | None = None) -> TickTable:
    """``Costs.tick_busy`` from ``irq_cost.tick_busy`` (collector 0.10.0+): the rows of the
    series (one value per CPU per jiffy, every CPU spinning), keeping the rows in which every
    value reaches the long mode of ``irq_cost.tick`` (:func:`long_mode`: a jiffy in which one
    CPU's window held only a short gap missed that CPU's tick). Empty, with
    a warning, for an older profile: the model's ticks are then ``tick`` x jitter.

    Why a table and not a spread: the CPUs' ticks start at the same jiffy edge and share the
    host, so their lengths go together, and their difference (who comes back first) decides
    races such as a PI-futex handoff's; a lognormal fitted to the same rows (a shared and a
    per-CPU sigma) put the 2-thread PI-futex composite 20-35 % below the table's result, its
    tails being too thin [model measurement, Nov 2026]."""
    it = profile.items.get("irq_cost")
    s = it.get_series("tick_busy") if it is not None and it.status == "ok" else None
    ncpu = int(s.params.get("cpus", 0)) if s is not None else 0
    if s is None or ncpu < 1 or not s.samples or len(s.samples) % ncpu or s.samples_total != len(s.samples):
        # (a subsample would break the rows: the collector keeps them all, at most max_samples / cpus)
        if warnings is not None and profile.cpus >= 2:
            if s is None:
                why = "the profile has no irq_cost.tick_busy series (collector < 0.10.0, or irq_cost not ok)"
            elif s.samples_total != len(s.samples):
                why = (
                    f"irq_cost.tick_busy keeps {len(s.samples)} of its {s.samples_total} values (collected with a "
                    "small --max-samples), and a subsample breaks its rows"
                )
            else:
                why = "irq_cost.tick_busy has no complete row (one value per CPU per jiffy)"
            warnings.append(
                f"tick_busy: {why}; the model's ticks are tick x jitter, independent on every CPU "
                "(re-collect irq_cost, with the default --max-samples, to measure them together)"
            )
        return TickTable((), "", ())
    flat = np.asarray(s.samples, dtype=float)
    rows = flat.reshape(-1, ncpu)
    # the tick's long mode comes from irq_cost.tick, which has both modes in numbers (one CPU's
    # short gaps are separate samples there); in tick_busy a short gap is summed into its jiffy's
    # value, so a value below that floor is a jiffy whose tick fell outside the window
    tick = profile.series("irq_cost", "tick").samples
    floor = float(np.min(long_mode(np.asarray(tick, dtype=float)))) if tick else 0.0
    keep = rows[np.all(rows >= floor, axis=1)]
    if not len(keep):
        if warnings is not None:
            warnings.append(
                f"tick_busy: no row of irq_cost.tick_busy has every CPU's value in the tick's long mode (>= {floor:.0f} "
                "ns); the model's ticks are tick x jitter (collect irq_cost again on a quiet machine)"
            )
        return TickTable((), "", ())
    formula = (
        f"irq_cost.tick_busy rows ({ncpu} CPUs, cpu_list {s.params.get('cpu_list')}): {len(keep)} of {len(rows)} "
        f"jiffies, those with every CPU's value in the long mode (>= {floor:.0f} ns)"
    )
    return TickTable(tuple(tuple(int(round(v)) for v in r) for r in keep), formula, ("irq_cost.tick_busy",))


def _direct_values(med: Mapping[str, float], cross: bool, base: Costs, warnings: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in DIRECT:
        if d.cross_cpu and not cross:
            out[d.param] = float(getattr(base, d.param))
            continue
        v = d.fn(med)
        if v < 0:
            if warnings is not None:
                warnings.append(f"{d.param}: {d.formula} is negative ({v:.0f} ns); set to 0")
            v = 0.0
        out[d.param] = v
    return out


def _jitter(samples: Mapping[str, np.ndarray], clock: float) -> float:
    return float(np.mean([robust_cv(samples[q] - clock) for q in JITTER_INPUTS]))


# ------------------------------------------------------------------ the simulated fit


PIPE_SCALED = {"pipe_send": "pipe_send0", "pipe_recv": "pipe_recv0"}
"""Costs fields set as ``pipe_scale`` x an isolated-call estimate."""


def _values(fitted: Mapping[str, float], direct: Mapping[str, float]) -> dict[str, float]:
    out = {**direct, **fitted}
    scale = fitted.get("pipe_scale")
    if scale is not None:
        for field_name, base_name in PIPE_SCALED.items():
            out[field_name] = scale * direct[base_name]
    return out


class _Model:
    """Simulated outcomes as a function of (fitted, direct) parameter vectors."""

    def __init__(self, target: Target, seeds: int, fitted: list[str], replicas: list[str], fixed: Mapping[str, float]):
        self.target = target
        self.seeds = seeds
        self.fitted = fitted
        self.replicas = replicas
        self.fixed = dict(fixed)
        self.evaluations = 0

    def costs(self, theta: np.ndarray, direct: Mapping[str, float]) -> Costs:
        return make_costs({**self.fixed, **_values(dict(zip(self.fitted, theta, strict=True)), direct)})

    def run(self, theta: np.ndarray, direct: Mapping[str, float]) -> dict[str, float]:
        costs = self.costs(theta, direct)
        self.evaluations += 1
        return {r: mean_over_seeds(r, costs, self.target, self.seeds) for r in self.replicas}

    def run_seeds(self, theta: np.ndarray, direct: Mapping[str, float]) -> dict[str, list[float]]:
        """Each replica's outcome per seed (1..seeds): :meth:`run` is their mean, bit for bit."""
        costs = self.costs(theta, direct)
        self.evaluations += 1
        return {r: [REPLICAS[r](costs, self.target, s) for s in range(1, self.seeds + 1)] for r in self.replicas}


def seed_noise(values: Sequence[float]) -> float:
    """The standard error of the mean of one replica's per-seed outcomes: how far another set
    of seeds would move the simulated outcome the fit matched (0 with one seed, where it cannot
    be told)."""
    if len(values) < 2:
        return 0.0
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def calibrate(
    profile: Profile,
    *,
    seeds: int = 3,
    bootstrap: int = 400,
    rng_seed: int = 0,
    progress: Callable[[str, float], None] | None = None,
    other_gaps: bool = False,
) -> Calibration:
    """Fit every :class:`~sim.params.Costs` field to ``profile`` (see the module docstring).
    ``other_gaps``: also copy the measured interruptions into ``Costs.other_gaps`` (off by
    default; :func:`gap_table` says why)."""
    from scipy.optimize import least_squares

    if seeds < 1:
        raise ConfigError("--seeds", f"{seeds} is below 1", "use at least one seed")
    if bootstrap < 0:
        raise ConfigError("--bootstrap", f"{bootstrap} is negative", "use 0 (no intervals) or more")

    def step(what: str, frac: float) -> None:
        if progress is not None:
            progress(what, frac)

    warnings: list[str] = []
    cross = profile.cpus >= 2
    if not cross:
        warnings.append("one CPU measured: ipi_send, ipi_handler, ipi_latency and idle_exit keep their defaults")
    hz = profile.hz
    if hz is None:
        warnings.append("HZ unknown: the replicas use 1000")
    target = Target.of(profile)
    base = Costs()

    step("reading samples", 0.0)
    needed = [q for q in _needed(cross) if q not in OPTIONAL or _available(profile, q)]
    if "write_after_sleep" not in needed:
        warnings.append(
            "wakeup: pipe_costs.write_after_sleep is missing (older collector): the baseline is the hot write(), "
            "so wakeup includes the slower first write after an idle period; re-collect pipe_costs"
        )
    loaded = {q: _samples(profile, q) for q in needed}
    stored = {q: _stored_samples(profile, q) for q in loaded if q not in CHECK_ONLY}
    few = [f"{q} {n}" for q, n in stored.items() if n < MIN_SAMPLES]
    if few:
        warnings.append(
            f"few stored samples ({', '.join(few)}; fewer than {MIN_SAMPLES}): the bootstrap intervals and jitter_cv "
            "rest on them and are rough; re-collect with the default --max-samples"
        )
    # the bootstrap resamples what the estimates use, not the check-only quantities (so that a
    # check added to CHECKS leaves every interval as it was)
    samples = {q: v for q, (v, _) in loaded.items() if q not in CHECK_ONLY}
    med = {q: m for q, (_, m) in loaded.items()}
    # the bootstrap moves each median by how much the stored samples' median moves
    sub_med = {q: float(np.median(v)) for q, v in samples.items()}
    direct = _direct_values(med, cross, base, warnings)
    jitter = _jitter(samples, med["clock_read"])
    mm = optional_direct(profile, MM_SWITCH, bootstrap, rng_seed, warnings)
    asid = optional_direct(profile, ASID_MISS, bootstrap, rng_seed, warnings)
    idle_timers, idle_hrtimers, idle_tasks = idle_wakeup_estimates(profile, warnings)
    other_rcu = other_call_rcu_estimate(profile)
    fixed = {
        "jitter_cv": jitter,
        "mm_switch": mm.value,
        "asid_miss": asid.value,
        "idle_timers_per_s": idle_timers.value,
        "idle_hrtimers_per_s": idle_hrtimers.value,
        "idle_task_wakeups_per_s": idle_tasks.value,
        "other_call_rcu_per_s": other_rcu.value,
        **{p: float(getattr(base, p)) for p in NOT_MEASURED},
    }

    fitted = [f for f in FITTED if cross or not f.cross_cpu]
    names = [f.param for f in fitted]
    outcomes = list(dict.fromkeys(o for f in fitted for o in f.outcomes if o in med))
    replicas = sorted({OUTCOME_REPLICA[o] for o in outcomes})
    model = _Model(target, seeds, names, replicas, fixed)
    meas = np.array([med[o] for o in outcomes])

    # starting point: the additive reading of each outcome
    d = direct
    send0, recv0 = d["pipe_send0"], d["pipe_recv0"]
    guess = {
        "pipe_scale": (med["stream_same"] - 2 * d["syscall"]) / max(1.0, send0 + recv0),
        "context_switch": med["pingpong_1b_same"] - d["syscall"] - send0 - recv0 - d["wakeup"],
        "idle_exit": med.get("pingpong_1b_cross", 0.0)
        - med["pingpong_1b_same"]
        + d["wakeup"]
        - d["ipi_latency"]
        - d["ipi_handler"],
        "exit": med["fork_exit_wait"] - d["fork"],
        "exec": med["fork_exec_wait"] - med["fork_exit_wait"],
    }
    x0 = np.array([max(1.0 if n == "pipe_scale" else 100.0, guess[n]) for n in names])

    def residuals(theta: np.ndarray) -> np.ndarray:
        sim = model.run(theta, direct)
        return np.array([sim[OUTCOME_REPLICA[o]] for o in outcomes]) / meas - 1.0

    step("fitting (simulated microbenchmarks)", 0.1)
    sol = least_squares(residuals, x0, bounds=(0.0, np.inf), x_scale=x0, diff_step=0.02, max_nfev=60)
    theta = np.maximum(sol.x, 0.0)
    at_theta = model.run_seeds(theta, direct)  # the means, and their seed noise for the intervals
    sim_at = {r: sum(v) / model.seeds for r, v in at_theta.items()}  # = model.run(theta, direct)
    for n, v in zip(names, theta, strict=True):
        if v <= (0.01 if n == "pipe_scale" else 1.0):
            warnings.append(f"{n}: the fit reached 0 (the other parameters already explain the outcomes)")

    # Jacobians for the linearised bootstrap: outcomes vs fitted and vs direct parameters
    estimates_ci: dict[str, tuple[float, float]] = {}
    if bootstrap > 0:
        step("bootstrap: Jacobian", 0.5)
        direct_names = [p for p in direct if not (p in ("ipi_send", "ipi_handler", "ipi_latency") and not cross)]
        jac_theta = np.zeros((len(replicas), len(names)))
        jac_direct = np.zeros((len(replicas), len(direct_names)))
        for j in range(len(names)):
            h = max(0.01 if names[j] == "pipe_scale" else 50.0, 0.05 * theta[j])
            up, dn = theta.copy(), theta.copy()
            up[j] += h
            dn[j] = max(0.0, dn[j] - h)
            a, b = model.run(up, direct), model.run(dn, direct)
            jac_theta[:, j] = [(a[r] - b[r]) / (up[j] - dn[j]) for r in replicas]
        for j, p in enumerate(direct_names):
            h = max(20.0, 0.05 * direct[p])
            a = model.run(theta, {**direct, p: direct[p] + h})
            b = model.run(theta, {**direct, p: max(0.0, direct[p] - h)})
            width = direct[p] + h - max(0.0, direct[p] - h)
            jac_direct[:, j] = [(a[r] - b[r]) / width for r in replicas]
        step("bootstrap: resampling", 0.8)
        rng = np.random.default_rng(rng_seed)
        idx = [replicas.index(OUTCOME_REPLICA[o]) for o in outcomes]
        s0 = np.array([sim_at[r] for r in replicas])
        # the fit matched simulated means over a few seeds: other seeds would have moved them by
        # about their standard error, and the fit with them (a 4th-digit change of a rate moved
        # the bundled context_switch by 10 ns, more than the measurements' interval). Each
        # replicate draws that noise too, from its own generator (the measurements' draws stay
        # those of rng_seed)
        noise_sd = np.array([seed_noise(at_theta[r]) for r in replicas])
        noise_rng = np.random.default_rng([rng_seed, 1])

        def shift(ob: np.ndarray, dd: np.ndarray, s: np.ndarray = s0) -> np.ndarray:
            """The fitted parameters' step that minimises sum(((s + Jd dd + Jt dt)[rows] / ob -
            1)^2) over dt: the linearised refit for measured outcomes ``ob``, direct changes
            ``dd`` and simulated outcomes ``s`` at the fit."""
            w = 1.0 / ob
            dt, *_ = np.linalg.lstsq(jac_theta[idx, :] * w[:, None], 1.0 - (s + jac_direct @ dd)[idx] * w, rcond=None)
            return np.asarray(dt)

        # the fit does not meet every anchor exactly (its outcomes are simulated, and two anchors
        # of one parameter disagree), so the linearised refit of the unresampled data already
        # steps away from theta: the replicates are taken relative to that step, so that the
        # interval is about theta, not about the linear model's own exact solution
        dt0 = shift(np.array([med[o] for o in outcomes]), np.zeros(len(direct_names)))
        draws: dict[str, list[float]] = {p: [] for p in [*direct, *names, *PIPE_SCALED, "jitter_cv"]}
        for _ in range(bootstrap):
            mb = {q: med[q] + float(np.median(rng.choice(v, size=v.size, replace=True))) - sub_med[q] for q, v in samples.items()}
            db = _direct_values(mb, cross, base, None)
            dd = np.array([db[p] - direct[p] for p in direct_names])
            sb = s0 + noise_rng.normal(0.0, 1.0, len(replicas)) * noise_sd
            dt = shift(np.array([mb[o] for o in outcomes]), dd, sb) - dt0
            tb = np.maximum(theta + dt, 0.0)
            for p in direct:
                draws[p].append(db[p])
            for n, v in zip(names, tb, strict=True):
                draws[n].append(float(v))
            if "pipe_scale" in names:
                for field_name, base_name in PIPE_SCALED.items():
                    draws[field_name].append(float(tb[names.index("pipe_scale")]) * db[base_name])
            draws["jitter_cv"].append(
                float(
                    np.mean(
                        [
                            robust_cv(rng.choice(samples[q], size=samples[q].size, replace=True) - mb["clock_read"])
                            for q in JITTER_INPUTS
                        ]
                    )
                )
            )
        for p, vals in draws.items():
            if vals:
                lo, hi = np.percentile(vals, [2.5, 97.5])
                estimates_ci[p] = (float(lo), float(hi))

    step("checks", 0.95)
    estimates: dict[str, Estimate] = {}
    for dm in DIRECT:
        if dm.param in PIPE_SCALED.values():
            continue  # internal: the isolated-call estimates behind pipe_send / pipe_recv
        used = not (dm.cross_cpu and not cross)
        lo, hi = estimates_ci.get(dm.param, (None, None))
        estimates[dm.param] = Estimate(
            dm.param,
            direct[dm.param],
            lo,
            hi,
            "direct" if used else "default",
            dm.formula if used else "one CPU measured: no cross-CPU item",
            tuple(_m(q) for q in dm.inputs if q in samples) if used else (),
        )
    fitted_values = _values(dict(zip(names, (float(x) for x in theta), strict=True)), direct)
    for ft in FITTED:
        targets = list(PIPE_SCALED) if ft.param == "pipe_scale" else [ft.param]
        for param in targets:
            if ft.param in names:
                lo, hi = estimates_ci.get(param, (None, None))
                note = ""
                if ft.param == "pipe_scale":
                    scale = float(theta[names.index("pipe_scale")])
                    note = f"pipe_scale {scale:.3f} x isolated {direct[PIPE_SCALED[param]]:.0f} ns"
                estimates[param] = Estimate(
                    param, fitted_values[param], lo, hi, "fit", ft.formula, tuple(_m(o) for o in ft.outcomes), note
                )
            else:
                estimates[param] = Estimate(
                    param, float(getattr(base, param)), None, None, "default", "one CPU measured: no cross-CPU item", ()
                )
    lo, hi = estimates_ci.get("jitter_cv", (None, None))
    estimates["jitter_cv"] = Estimate(
        "jitter_cv",
        jitter,
        lo,
        hi,
        "spread",
        "CV of the central 90 % of single write() and read() calls (clock read removed), averaged",
        tuple(_m(q) for q in JITTER_INPUTS),
    )
    for p, why in NOT_MEASURED.items():
        estimates[p] = Estimate(p, float(getattr(base, p)), None, None, "default", f"not measured: {why}", ())
    estimates[mm.param] = mm
    estimates[asid.param] = asid
    estimates[idle_timers.param] = idle_timers
    estimates[idle_hrtimers.param] = idle_hrtimers
    estimates[idle_tasks.param] = idle_tasks
    estimates[other_rcu.param] = other_rcu

    rows: list[OutcomeRow] = []
    for o in outcomes:
        rows.append(OutcomeRow(o, _m(o), med[o], sim_at[OUTCOME_REPLICA[o]], "fitted"))
    for r in rows:
        if abs(r.rel_error) > FIT_MISS:
            warnings.append(
                f"fitted anchor {r.name} ({r.item}) is {r.rel_error:+.0%} off after the fit: the costs measured "
                "directly leave the fitted ones no room to match it (a fitted cost at or near 0 says which); "
                "an item measured while the machine was slower or faster than for the others is the usual cause "
                "(compare the items' medians with another collection, or collect again)"
            )
    workload = workload_estimates(profile, bootstrap, rng_seed, warnings)
    ticks = tick_table(profile, warnings)
    gaps = gap_table(profile, warnings, apply=other_gaps)
    m = profile.machine
    machine = {
        "host": profile.uname.nodename,
        "kernel": m.kernel_release,
        "cpu_model": m.cpu_model,
        "cpus": profile.cpus,
        "hz": hz,
        "preempt": profile.preempt,
        "hypervisor": m.hypervisor_flag,
        "collected": profile.start_time,
        "mode": profile.options.mode,
    }
    cal = Calibration(profile.source, target, seeds, bootstrap, estimates, rows, warnings, machine, workload, ticks, gaps)
    # the checks run the calibrated model as the params file holds it, measured tables included
    # (the fitted replicas above keep ``tick`` x jitter: README, calibration), so that a check is
    # what any later run from the file gives
    costs = cal.costs()
    slack = float(profile.item("sleep_lateness").params.get("timer_slack_ns") or 0)
    for q, replica in CHECKS.items():
        if q in med:
            measured = med[q]
        elif (q in MM_QUANTITIES or q in GP_QUANTITIES) and _available(profile, q):  # optional items
            measured = _samples(profile, q)[1]
            if q.endswith("_mean"):
                mean = profile.item(_where(q)[0]).stats.mean
                measured = float(mean) if mean is not None else measured
        else:
            continue
        sim = mean_over_seeds(replica, costs, target, seeds)
        if q.startswith("sleep"):
            rows.append(OutcomeRow(q, _m(q), measured - slack, sim, "check", f"measured median minus timer slack {slack:.0f} ns"))
        elif q.startswith("ring"):
            rows.append(OutcomeRow(q, _m(q), measured, sim, "check", RING_NOTE))
        elif q.startswith("gp_"):
            rows.append(OutcomeRow(q, _m(q), measured, sim, "check", GP_MEAN_NOTE if q.endswith("_mean") else GP_NOTE))
        else:
            rows.append(
                OutcomeRow(q, _m(q), measured, sim, "check", "median; the model's wakeup of an idle CPU ignores its idle age")
            )
    step("done", 1.0)
    return cal


def calibration_gaps(profile: Profile) -> tuple[list[str], list[str]]:
    """The items :func:`calibrate` needs (the quantities it always reads) that ``profile``
    lacks: (not collected, collected but not usable); ``rcusim collect`` says them after a
    partial collection instead of a next step that would fail."""
    missing: dict[str, None] = {}
    unusable: dict[str, None] = {}
    for q in _needed(profile.cpus >= 2):
        if q in OPTIONAL:
            continue
        name, series = _where(q)
        it = profile.items.get(name)
        if it is None:
            missing[name] = None
            continue
        src = it.get_series(series) if series else it
        if not _available(profile, q) or src is None or not src.samples:
            unusable[name] = None
    return list(missing), [n for n in unusable if n not in missing]


def optional_direct(
    profile: Profile, od: OptionalDirect, bootstrap: int = 0, rng_seed: int = 0, warnings: list[str] | None = None
) -> Estimate:
    """``od`` on ``profile``: the medians' formula, with a bootstrap interval over the item's stored
    samples (its own generator, so the other intervals do not depend on whether the item is
    there); the field's default, with a warning, when the item is missing or not ok."""
    default = float(getattr(Costs(), od.param))
    if not all(_available(profile, q) for q in od.inputs):
        why = f"the profile has no usable {od.missing} item or series (collector < 0.5.0)"
        if warnings is not None:
            warnings.append(
                f"{od.param}: {why}; it keeps its default {default:.0f} ns "
                f"(collect {od.missing} and merge it into the profile to measure it)"
            )
        return Estimate(
            od.param,
            default,
            None,
            None,
            "default",
            f"not measured: {why}",
            (),
            f"collect it: rcusim-collector --items {od.missing} --out NEW.json, then "
            "python -m calibration.profile --merge PROFILE NEW.json --out PROFILE",
        )
    loaded = {q: _samples(profile, q) for q in od.inputs}
    med = {q: m for q, (_, m) in loaded.items()}
    value = od.fn(med)
    lo = hi = None
    if bootstrap > 0:
        rng = np.random.default_rng([rng_seed, 2])
        sub = {q: float(np.median(v)) for q, (v, _) in loaded.items()}
        draws = [
            max(
                0.0,
                od.fn(
                    {
                        q: med[q] + float(np.median(rng.choice(v, size=v.size, replace=True))) - sub[q]
                        for q, (v, _) in loaded.items()
                    }
                ),
            )
            for _ in range(bootstrap)
        ]
        lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    if value < 0:
        if warnings is not None:
            warnings.append(f"{od.param}: {od.formula} is negative ({value:.0f} ns); set to 0")
        value = 0.0
    note = f"{od.missing} collected {profile.collected(od.missing)}"
    return Estimate(od.param, value, lo, hi, "direct", od.formula, tuple(_m(q) for q in od.inputs), note)


def workload_estimates(
    profile: Profile, bootstrap: int = 0, rng_seed: int = 0, warnings: list[str] | None = None
) -> dict[str, dict[str, Estimate]]:
    """:data:`WORKLOAD_DIRECT` on ``profile``: each knob from its component item's medians, with a
    bootstrap interval over that item's stored samples (its own generator, so the Costs intervals
    do not depend on whether the item is there); the prior, with a warning, when the item is
    missing or not ok (a profile of an older collector)."""
    out: dict[str, dict[str, Estimate]] = {}
    rng = np.random.default_rng([rng_seed, 1])
    for wd in WORKLOAD_DIRECT:
        section = out.setdefault(wd.workload, {})
        if not all(_available(profile, q) for q in wd.inputs):
            prior = workload_prior(wd.workload, wd.param)
            why = f"the profile has no usable {wd.missing} item (an older collector)"
            section[wd.param] = Estimate(
                wd.param,
                prior,
                None,
                None,
                "default",
                f"prior: {why}; the knob keeps its documented default",
                (),
                f"collect it: rcusim-collector --items {wd.missing} --out NEW.json, then "
                "python -m calibration.profile --merge PROFILE NEW.json --out PROFILE",
            )
            if warnings is not None:
                warnings.append(
                    f"workload.{wd.workload}.{wd.param}: {why}; it keeps its prior {prior:.0f} ns "
                    f"(collect {wd.missing} and merge it into the profile to measure it)"
                )
            continue
        loaded = {q: _samples(profile, q) for q in wd.inputs}
        med = {q: m for q, (_, m) in loaded.items()}
        value = wd.fn(med)
        lo = hi = None
        if bootstrap > 0:
            sub = {q: float(np.median(v)) for q, (v, _) in loaded.items()}
            draws = [
                wd.fn(
                    {
                        q: med[q] + float(np.median(rng.choice(v, size=v.size, replace=True))) - sub[q]
                        for q, (v, _) in loaded.items()
                    }
                )
                for _ in range(bootstrap)
            ]
            lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
        note = f"{wd.missing} collected {profile.collected(wd.missing)}"
        if value < 0:
            if warnings is not None:
                warnings.append(f"workload.{wd.workload}.{wd.param}: {wd.formula} is negative ({value:.0f} ns); set to 0")
            value = 0.0
        section[wd.param] = Estimate(wd.param, value, lo, hi, "direct", wd.formula, tuple(_m(q) for q in wd.inputs), note)
    return out
