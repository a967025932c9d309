"""The substrate's configuration: machine, scheduler knobs and costs.

Defaults: kernel defaults cite their file; costs are measured on the project's development
machine by the native collector (its first bundled profile, kept as
``calibration/profiles/history/dev-2026-11-22T0210.json``, item named in each ``source``; the
seed stories and scenarios inherit them, so later collections do not move them) and are replaced
by a profile's figures when a run is given one (``--profile``, ``--params``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from .config import knob
from .errors import ConfigError
from .units import MS, US, fmt_ns

PROFILE = "dev profile 2026-11-22T02:10Z (calibration/profiles/history/dev-2026-11-22T0210.json)"


@dataclass(frozen=True)
class MachineConfig:
    """The simulated hardware."""

    cpus: int = knob(4, doc="CPUs online (1..1024)", min=1, max=1024, source="scenario")
    name: str = knob("generic", doc="a label for the machine, shown in results", source="scenario")


@dataclass(frozen=True)
class KernelConfig:
    """Scheduler-level kernel configuration (CONFIG_* and sysctls).

    The fair-class model is CFS as in kernels 2.6.23..6.5 (kernel/sched/fair.c), the era of the
    seed stories (``sched = "eevdf"`` swaps in EEVDF's wakeup preemption and slices); its sysctls are the unscaled defaults, multiplied at boot by
    ``1 + ilog2(min(cpus, 8))`` as ``get_update_sysctl_factor()`` does (SCHED_TUNABLESCALING_LOG).
    """

    hz: int = knob(1000, doc="CONFIG_HZ: scheduler tick frequency", min=24, max=10000, source="kernel/Kconfig.hz")
    preempt: Literal["none", "voluntary", "full"] = knob(
        "voluntary",
        doc="preemption model: 'none'/'voluntary' preempt kernel code only at op boundaries "
        "(return to user, cond_resched); 'full' preempts kernel code too, outside preempt-disabled regions",
        source="kernel/Kconfig.preempt",
    )
    nohz_idle: bool = knob(True, doc="CONFIG_NO_HZ_IDLE: stop the tick on idle CPUs", source="kernel/time/Kconfig")
    nohz_stats_kick: bool = knob(
        False,
        doc="the NO_HZ blocked-load update: while an idle CPU still has load from a task it ran (PELT decays it to "
        "0 in about 345 ms), a busy CPU's tick sends the first idle CPU an IPI every 32 ms (LOAD_AVG_PERIOD), "
        "whose SCHED softirq updates the idle CPUs' averages (nohz_balancer_kick with NOHZ_STATS_KICK); it "
        "wakes that CPU. Off: only a busy CPU with waiting tasks kicks an idle one (to pull)",
        source="kernel/sched/fair.c nohz_balancer_kick, _nohz_idle_balance (next_blocked = now + LOAD_AVG_PERIOD); "
        "kernel/sched/sched-pelt.h LOAD_AVG_MAX_N; a profile of a 4.17+ kernel turns it on",
    )
    timer_wheel: Literal["classic", "v4.8", "v6.9"] = knob(
        "classic",
        doc="the kernel timers the models arm by jiffies (schedule_timeout, the RCU GP kthread's FQS wait, "
        "rcuo and bypass timers): 'classic' (the cascading wheel before 4.8: a timer fires at the tick of its "
        "expiry jiffy, on the CPU that armed it), 'v4.8' (calc_index rounds the expiry up by the level's "
        "granularity, so a timeout of j jiffies fires at the (j+1)-th tick, between j and j+1 jiffies later; "
        "still on the arming CPU; also a 6.9+ kernel with timer_migration=0) or 'v6.9' (as 'v4.8', with the "
        "timer-migration hierarchy's pull of timer_migration=1: a non-pinned timer of a CPU in NO_HZ idle "
        "expires on an active CPU at its tick, and the idle CPU is not woken for it; with every CPU idle its "
        "own CPU wakes)",
        source="kernel/time/timer.c calc_index (4.8), kernel/time/timer_migration.c tmigr_handle_remote (6.9)",
    )
    wake_affine: Literal["prev", "waker", "weight", "pack", "2.6.24"] = knob(
        "prev",
        doc="where select_task_rq_fair sends a wakeup: 'prev' (4.x+ wake_affine_idle: the wakee's previous CPU "
        "if it is idle, else an idle CPU near it, else the less loaded of previous and waker CPU), 'waker' "
        "(2.6.3x-3.x wake_affine: the waker's CPU when it is no busier than the previous one, else the previous; "
        "then an idle CPU near the choice) or 'weight' (4.14+: wake_affine_idle, then wake_affine_weight with the "
        "WF_SYNC discount of a pipe wakeup: the waker's CPU unless its load, the waker's own taken off and the "
        "wakee's added, exceeds the previous CPU's, the wakee's taken off, by half the domain's imbalance_pct; a "
        "CPU's load is its runnable weight averaged at the tick, a task's its PELT average; wake_wide is not "
        "modelled; then select_idle_sibling) or 'pack' (a measured guest "
        "kernel's rule: the waker's CPU whenever the waker runs alone there, even if another CPU idles; else as "
        "'weight'; measured for wakeups from a task; a wakeup from interrupt context is placed as 'weight' "
        "places it, as a trace of the GP kthread woken from a busy CPU's timer softirq shows) or '2.6.24' (try_to_wake_up of 2.6.24: the waker's CPU for a sync wakeup of a "
        "cache-cold task, else only when the previous CPU's load (the lower of its weight at the last tick and now) is "
        "at least the waker CPU's (the higher one, less the waker on a sync wakeup) plus the wakee, over 1.12; a "
        "real-time task weighs 173 nice-0 tasks, so under PREEMPT_RT the softirq thread woken by every tick keeps "
        "non-sync wakeups on their previous CPU; then wake_idle: an idle CPU if the choice runs one task)",
        source="kernel/sched/fair.c select_task_rq_fair, wake_affine, wake_affine_idle, wake_affine_weight, "
        "select_idle_sibling; kernel/sched/topology.c sd_init (imbalance_pct 117); 'pack': collector item "
        "wake_placement (no mainline source: see Machine._select_cpu_weight); '2.6.24': kernel/sched.c try_to_wake_up, "
        "wake_idle, source_load, target_load, update_cpu_load, set_load_weight; include/linux/topology.h SD_MC_INIT",
    )
    fork_balance: Literal["idlest", "pack", "2.6.24"] = knob(
        "idlest",
        doc="where a forked task starts: 'idlest' (mainline wake_up_new_task -> select_task_rq_fair with "
        "SD_BALANCE_FORK: the idlest allowed CPU, searched from the parent's, so an idle CPU when there is one), "
        "'pack' (a measured guest kernel's rule: the parent's CPU whenever the parent runs alone there, even "
        "if another CPU idles; else as 'idlest') or '2.6.24' (sched_fork -> sched_balance_self finds no domain with "
        "SD_BALANCE_FORK in SD_MC_INIT/SD_CPU_INIT: the parent's CPU, and the child runs first: it takes the "
        "parent's vruntime if smaller and the parent is rescheduled, sysctl_sched_child_runs_first = 1; "
        "START_DEBIT is not modelled)",
        source="kernel/sched/core.c wake_up_new_task; kernel/sched/fair.c select_task_rq_fair, "
        "sched_balance_find_dst_cpu; 'pack': collector item wake_placement, series fork (no mainline source); "
        "'2.6.24': kernel/sched.c sched_fork, sched_balance_self, wake_up_new_task; kernel/sched_fair.c "
        "task_new_fair; include/linux/topology.h",
    )
    load_balance: Literal["nr_running", "2.6.24"] = knob(
        "nr_running",
        doc="periodic, idle and newly-idle load balancing: 'nr_running' (the run queues' task counts: a CPU pulls "
        "from the busiest while they differ by two or more tasks, one task per periodic pass every sd_weight ms "
        "(under sched = 'eevdf' up to 32, as detach_tasks), a newly idle CPU pulls one waiting task, a busy CPU's "
        "tick kicks an idle one to pull) or '2.6.24' (load_balance of 2.6.24 with SD_MC_INIT's values: "
        "find_busiest_group on rq->load.weight and the tick-decayed cpu_load[] (busy_idx 2, idle and newidle "
        "idx 0), imbalance_pct 125, a real-time task weighing 173 nice-0 tasks; move_tasks pulls up to the "
        "imbalance's weight (at most 33 tasks looked at), cache-hot tasks only after two failures, active "
        "balance by the migration thread after four; every 1-4 ms on an idle CPU, 64-256 ms on a busy one "
        "(busy_factor 64); idle_balance on a CPU about to idle; under NO_HZ one idle CPU keeps its tick and "
        "balances for the others)",
        source="'2.6.24': kernel/sched.c load_balance, find_busiest_group, find_busiest_queue, move_tasks, "
        "balance_tasks, can_migrate_task, task_hot, load_balance_newidle, idle_balance, active_load_balance, "
        "rebalance_domains, run_rebalance_domains, trigger_load_balance, select_nohz_load_balancer, "
        "update_cpu_load; kernel/sched_fair.c load_balance_fair; include/linux/topology.h SD_MC_INIT; "
        "'nr_running': kernel/sched/fair.c (see sim/machine.py Machine._pull_imbalance)",
    )
    gentle_fair_sleepers: bool = knob(
        True,
        doc="place_entity: a waking sleeper gets at most sched_latency / 2 of vruntime credit (GENTLE_FAIR_SLEEPERS, "
        "2.6.32+); false gives the whole sched_latency, as 2.6.23-2.6.31 did",
        source="kernel/sched/features.h GENTLE_FAIR_SLEEPERS; 2.6.24 kernel/sched_fair.c place_entity",
    )
    sched_latency: int = knob(
        6 * MS, doc="sysctl_sched_latency before CPU scaling", unit="ns", min=100 * US, source="kernel/sched/fair.c"
    )
    sched_min_granularity: int = knob(
        750 * US, doc="sysctl_sched_min_granularity before CPU scaling", unit="ns", min=1, source="kernel/sched/fair.c"
    )
    sched_wakeup_granularity: int = knob(
        1 * MS, doc="sysctl_sched_wakeup_granularity before CPU scaling", unit="ns", min=0, source="kernel/sched/fair.c"
    )
    sched: Literal["cfs", "eevdf"] = knob(
        "cfs",
        doc="fair-class wakeup preemption and slices: 'cfs' (2.6.23-6.5: a wakee preempts when its vruntime is "
        "wakeup_granularity behind, sleepers get sched_latency / 2 of credit, the tick ends a slice of the period) or "
        "'eevdf' (6.6+, as 6.18 with its default features: the eligible task with the earliest virtual deadline "
        "runs; the current task keeps the CPU while it is eligible and inside its slice (RUN_TO_PARITY); a woken "
        "task keeps the lag it slept with (PLACE_LAG) and preempts only if it would be picked; an ineligible "
        "sleeper stays queued until picked or woken (DELAY_DEQUEUE, DELAY_ZERO); the context switch is charged "
        "to the next task)",
        source="kernel/sched/fair.c (__pick_eevdf, set_protect_slice, update_curr, check_preempt_wakeup_fair, "
        "place_entity, update_entity_lag, dequeue_entity, requeue_delayed_entity, set_next_entity); "
        "kernel/sched/features.h",
    )
    sched_base_slice: int = knob(
        700 * US,
        doc="eevdf: sysctl_sched_base_slice before CPU scaling (the request size of every task)",
        unit="ns",
        min=1,
        source="kernel/sched/fair.c sysctl_sched_base_slice (0.75 ms in 6.6, 0.70 ms in later kernels; the release of "
        "the change is unverified, and 50 us either way is far below the tick)",
    )
    sched_migration_cost: int = knob(
        500 * US,
        doc="sysctl_sched_migration_cost: a task that ran more recently than this is cache-hot and not pulled by load balancing",
        unit="ns",
        min=0,
        source="kernel/sched/fair.c",
    )

    def check(self, path: str) -> None:
        if self.sched_min_granularity > self.sched_latency:
            raise ConfigError(
                f"{path}.sched_min_granularity" if path else "sched_min_granularity",
                "is larger than sched_latency",
                "keep sched_min_granularity <= sched_latency",
            )


MAX_COST = 10 * 1000 * MS
"""The largest value a duration in ``Costs`` may take: every one is the time of a single
operation (a switch, a wakeup, an exec), so a value of seconds is a unit mistake (a plain number
is nanoseconds), and one of years would leave the run with nothing to simulate before
``scenario.max_time`` while looking like a workload too large to finish."""


@dataclass(frozen=True)
class Costs:
    """Time the machine spends on basic operations (ns). Every one is a parameter that a
    profile can set; jitter_cv spreads them (lognormal, mean 1)."""

    context_switch: int = knob(
        655,
        doc="switching from one task to another on a CPU",
        unit="ns",
        min=0,
        source=f"{PROFILE}: fit of the same-CPU pipe ping-pong (context_switch, pipe_message.same_cpu_pingpong)",
    )
    mm_switch: int = knob(
        0,
        doc="a context switch into a task of another address space, beyond context_switch: switch_mm_irqs_off "
        "(CR3 write, ASID/PCID choice) and the TLB and cache refill after it; charged only when the next task's "
        "mm differs from the CPU's active mm (threads share their process's mm; kernel threads borrow the "
        "previous one, lazy TLB, and pay nothing)",
        unit="ns",
        min=0,
        source="not measured by default (0): kernel/sched/core.c context_switch, switch_mm_irqs_off only when "
        "next->mm != prev->active_mm; a profile with the context_switch_process item sets it (rcusim calibrate: "
        "process minus thread same-CPU ping-pong, medians)",
    )
    asid_miss: int = knob(
        0,
        doc="a switch into an mm that owns none of the CPU's 6 PCIDs (x86 TLB_NR_DYN_ASIDS, given out round "
        "robin), beyond mm_switch: a new ASID whose TLB is flushed, and the refill after it; with more than six "
        "processes taking turns on a CPU every switch pays it",
        unit="ns",
        min=0,
        source="not measured by default (0): arch/x86/mm/tlb.c choose_new_asid (need_flush for a new slot); a "
        "profile with the context_switch_process item sets it (rcusim calibrate: ring of 8 processes minus ring "
        "of 8 threads minus mm_switch, medians)",
    )
    wakeup: int = knob(
        1_201,
        doc="try_to_wake_up as paid by the waker",
        unit="ns",
        min=0,
        source=f"{PROFILE}: pipe_costs write_wakes_local_reader - write (medians)",
    )
    ipi_latency: int = knob(
        4_797,
        doc="from sending an IPI to the handler starting on the target",
        unit="ns",
        min=0,
        source=f"{PROFILE}: irq_cost ipi_round_trip - membarrier_private_expedited no_other_threads - irq_cost ipi (medians)",
    )
    ipi_send: int = knob(
        6_130,
        doc="sending an IPI, paid by the sending CPU when a wakeup needs one (an APIC ICR write; "
        "a VM exit in a guest without IPI virtualization)",
        unit="ns",
        min=0,
        source=f"{PROFILE}: pipe_costs write_wakes_remote_reader - write_wakes_local_reader (medians)",
    )
    ipi_handler: int = knob(
        7_621,
        doc="a reschedule / function-call IPI handler",
        unit="ns",
        min=0,
        source=f"{PROFILE}: irq_cost ipi median (gap in a user-mode spinner)",
    )
    idle_exit: int = knob(
        11_860,
        doc="leaving the idle state until the CPU runs code",
        unit="ns",
        min=0,
        source=f"{PROFILE}: fit of the cross-CPU pipe ping-pong (cross_cpu_wakeup, pipe_message.cross_cpu_pingpong)",
    )
    migration: int = knob(
        2_000,
        doc="cache refill when a task first runs on another CPU",
        unit="ns",
        min=0,
        source="not measured (no collector item isolates it): estimate",
    )
    tick: int = knob(
        16_539,
        doc="the scheduler tick interrupt handler",
        unit="ns",
        min=0,
        source=f"{PROFILE}: irq_cost tick median (gap in a user-mode spinner)",
    )
    tick_busy: tuple[tuple[int, ...], ...] = knob(
        (),
        doc="the tick handler's duration on every CPU in one jiffy with all CPUs busy, jiffy by jiffy (one "
        "list per measured jiffy, one value per CPU in CPU order); when given, each jiffy's ticks take one "
        "measured list drawn at random, CPU i its value i mod the list's length, instead of tick x jitter. "
        "The ticks of one jiffy are not independent (they start together and see the same host), and "
        "how far apart they end decides races such as who reaches a handed-over lock first",
        unit="ns",
        min=0,
        source="collector: irq_cost.tick_busy (a spinner on every CPU; rcusim calibrate copies it); "
        "empty (tick x jitter) without one",
    )
    other_gaps: tuple[int, ...] = knob(
        (),
        doc="interruptions that are neither the tick nor anything modelled (on a virtual machine mostly the "
        "host's: exits and short preemptions of the virtual CPU; on bare metal SMIs and unmodelled interrupts): "
        "their durations; each busy CPU is paused for one drawn at random, other_gaps_per_s times a second "
        "(Poisson arrivals); an idle CPU does not notice one",
        unit="ns",
        min=0,
        source="collector: irq_cost.other_gaps (a lone user-mode spinner's gaps away from the tick; "
        "rcusim calibrate --other-gaps copies them); empty (none) by default",
    )
    other_gaps_per_s: float = knob(
        0.0,
        doc="how often other_gaps come, per CPU and second",
        min=0,
        max=1_000_000,
        source="collector: irq_cost.other_gaps params.per_s (rcusim calibrate --other-gaps); 0 (none) by default",
    )
    idle_timers_per_s: float = knob(
        0.0,
        doc="wakeups of an idle CPU by timer-wheel timers of its own (per CPU and second, Poisson arrivals): the "
        "pinned timers of everything the model leaves out (per-CPU housekeeping, networking, workqueues). Each "
        "fires at the next tick edge, so an idle CPU runs a tick for it (and notes what the tick notes, e.g. an "
        "RCU quiescent state) and goes back to idle; a busy CPU's tick runs it at no extra cost",
        min=0,
        max=100_000,
        source="collector: idle_wakeups series timer_softirq (TIMER softirqs of an idle CPU while every other "
        "CPU spins: the wheel timers that woke it; rcusim calibrate takes their total over the measured time); "
        "0 (none) by default",
    )
    idle_hrtimers_per_s: float = knob(
        0.0,
        doc="wakeups of an idle CPU by hrtimers of its own (per CPU and second, Poisson arrivals): a task's "
        "nanosleep or poll timeout and the like, at any time, not at a tick edge. The CPU leaves idle for "
        "an interrupt of timer_irq and goes back; no tick runs, so it notes no quiescent state, but it looks at "
        "its timers again on the way back (a timer due at the next jiffy then stays with it). A busy CPU's "
        "are among its measured other_gaps",
        min=0,
        max=100_000,
        source="collector: idle_wakeups (the local timer interrupts of an idle CPU while every other CPU spins, "
        "less its TIMER softirqs and, from collector 0.15.0, less idle_task_wakeups_per_s; rcusim calibrate); 0 "
        "(none) by default",
    )
    idle_task_wakeups_per_s: float = knob(
        0.0,
        doc="wakeups of the machine's other processes (a daemon's or a tool's poll loop), per second, Poisson "
        "arrivals: one task, not pinned, that sleeps on an hrtimer and runs idle_task_work each time it wakes. "
        "Woken on the CPU it last ran on, it stays there while that CPU is idle and moves only when the "
        "placement finds it busy; each seed draws the CPU it starts on (where a machine's other processes "
        "sit is not measured). On an idle machine its runs decide which CPU goes idle last, and so which CPU "
        "the timer-migration hierarchy wakes for the idle CPUs' global timers",
        min=0,
        max=100_000,
        source="collector: idle_wakeups series context_switches (the context switches on a CPU the collector "
        "leaves idle while every other spins; rcusim calibrate halves them: a run is a switch in and a switch "
        "out); 0 (none) by default",
    )
    other_call_rcu_per_s: float = knob(
        0.0,
        doc="call_rcu() calls of the machine's other activity, per second (Poisson arrivals, each on a CPU drawn "
        "at random; the RCU model posts them): on an idle machine each asks for a grace period of its own, so a "
        "synchronize_rcu() caller can find one under way and wait for its end and then a whole one",
        min=0,
        max=100_000,
        source="collector: idle_wakeups series gp_kthread (the RCU grace-period kthread's sleeps while every CPU "
        "is idle; rcusim calibrate halves them: on an idle machine a grace period is a wakeup to start it and "
        "one for the FQS scan that ends it); 0 (none) by default",
    )
    idle_task_work: int = knob(
        36_600,
        doc="CPU time of one idle_task_wakeups_per_s run",
        unit="ns",
        min=0,
        source="development machine, a perf trace of the idle CPUs during membarrier(GLOBAL) calls (session 11, "
        "docs/kernel/rcu-nocb-netns.md section 8): the sandbox's tool process, the task that woke most often "
        "there (20 times a second), ran a median 36.6 us (p10 33.4, p90 40.7) from its switch in to its "
        "switch out; the collector does not measure it",
    )
    timer_irq: int = knob(
        13_260,
        doc="an hrtimer interrupt that wakes a sleeper",
        unit="ns",
        min=0,
        source=f"{PROFILE}: irq_cost hrtimer median (gap in a user-mode spinner)",
    )
    syscall: int = knob(130, doc="system call entry and exit", unit="ns", min=0, source=f"{PROFILE}: syscall median")
    fork: int = knob(
        77_656, doc="fork() as paid by the parent", unit="ns", min=0, source=f"{PROFILE}: fork_exec fork_call median"
    )
    exec: int = knob(
        489_327,
        doc="execve() and process start, paid by the child",
        unit="ns",
        min=0,
        source=f"{PROFILE}: fit of fork_exec fork_exec_wait",
    )
    exit: int = knob(
        86_675, doc="process exit and reaping", unit="ns", min=0, source=f"{PROFILE}: fit of fork_exec fork_exit_wait"
    )
    pipe_send: int = knob(
        163,
        doc="writing a 100-byte message to a pipe",
        unit="ns",
        min=0,
        source=f"{PROFILE}: fit of pipe_message same_cpu_stream and cross_cpu_stream",
    )
    pipe_recv: int = knob(
        163,
        doc="reading a 100-byte message from a pipe",
        unit="ns",
        min=0,
        source=f"{PROFILE}: fit of pipe_message same_cpu_stream and cross_cpu_stream",
    )
    softirq_entry: int = knob(
        200,
        doc="entering and leaving softirq processing",
        unit="ns",
        min=0,
        source="not measured (no collector item isolates it): estimate",
    )
    balance: int = knob(
        2_000,
        doc="one load-balancing pass that moves a task",
        unit="ns",
        min=0,
        source="not measured (no collector item isolates it): estimate",
    )
    jitter_cv: float = knob(
        0.024,
        doc="coefficient of variation applied to every cost",
        min=0.0,
        max=2.0,
        source=f"{PROFILE}: CV of the central 90% of single pipe_costs write and read calls",
    )

    def check(self, path: str) -> None:
        for f in dataclasses.fields(self):
            if f.metadata.get("unit") != "ns":
                continue
            v = getattr(self, f.name)
            if isinstance(v, int) and v > MAX_COST:
                where = f"{path}.{f.name}" if path else f.name
                raise ConfigError(
                    where,
                    f"{fmt_ns(v)} is above {fmt_ns(MAX_COST)}: a cost is the time of one operation",
                    "a plain number is nanoseconds; give a unit, e.g. '50 us'",
                )
        if self.other_gaps_per_s and not self.other_gaps:
            where = f"{path}.other_gaps" if path else "other_gaps"
            raise ConfigError(
                where, "is empty while other_gaps_per_s is not 0", "give the gaps' durations, or set other_gaps_per_s = 0"
            )
        for i, row in enumerate(self.tick_busy):
            if not row:
                where = f"{path}.tick_busy[{i}]" if path else f"tick_busy[{i}]"
                raise ConfigError(where, "is an empty jiffy", "give one tick duration per CPU, e.g. [18000, 17500]")
