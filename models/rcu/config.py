"""The ``[kernel.rcu]`` section: Tree RCU's configuration and costs.

Kernel defaults cite their file; costs that no collector item measures directly are marked
as estimates, and the netns story reports how sensitive its results are to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sim.config import knob
from sim.errors import ConfigError
from sim.units import S

NocbSpec = Literal["none", "all"] | tuple[int, ...]


@dataclass(frozen=True)
class RcuConfig:
    era: Literal["v3.9", "v3.13", "v6"] = knob(
        "v6",
        doc="which kernel's RCU to model: 'v3.9' (the 3.9-rc2 bisect kernels of the netns seed, "
        "81e5949/911af50: FQS every 3 jiffies, the first RCU_FAST_NO_HZ that pushes the grace period "
        "from idle entry, rcuo kthreads that poll for their grace period); 'v3.13' (per-CPU rcuo kthreads "
        "that each block until their own grace period, numbered-callback RCU_FAST_NO_HZ, stop-machine "
        "expedited GPs, rcu_barrier on every NOCB CPU); 'v6' (rcuog/rcuoc kthreads grouped by "
        "rcu_nocb_gp_stride, bypass and lazy lists, IPI-based expedited GPs, entraining rcu_barrier)",
        source="docs/kernel/rcu-nocb-netns.md, docs/kernel/rcu-3.9rc-era.md",
    )
    nocb: NocbSpec = knob(
        "none",
        doc="offloaded CPUs: 'none', 'all' (CONFIG_RCU_NOCB_CPU_ALL / rcu_nocbs=all) or a list of CPU numbers (rcu_nocbs=)",
        source="kernel/rcu/tree_nocb.h",
    )
    preemptible: bool = knob(
        False, doc="CONFIG_PREEMPT_RCU: readers may be preempted (blocked-tasks list)", source="kernel/rcu/tree_plugin.h"
    )
    fast_no_hz: bool = knob(
        True,
        doc="CONFIG_RCU_FAST_NO_HZ (eras v3.9 and v3.13; removed in v5.17): idle CPUs with callbacks push (v3.9) or accelerate (v3.13) them and wake every rcu_idle_gp_delay jiffies instead of keeping the tick",
        source="kernel/rcu/tree_plugin.h (v3.13)",
    )
    rcu_idle_gp_delay: int = knob(
        4,
        doc="RCU_FAST_NO_HZ wakeup period of an idle CPU with callbacks (jiffies)",
        min=1,
        max=1000,
        source="kernel/rcu/tree_plugin.h (v3.13); RCU_IDLE_GP_DELAY in kernel/rcutree_plugin.h (v3.9)",
    )
    fnh_advance_once_per_jiffy: bool = knob(
        False,
        doc="era v3.13 with fast_no_hz: the later RCU_FAST_NO_HZ (v3.18-v5.16, the 2015 kernels), whose "
        "rcu_try_advance_all_cbs() does its work at most once per jiffy (last_advance_all). It runs at idle exit "
        "and at an interrupt from idle (rcu_cleanup_after_idle) and when the tick stops (rcu_needs_cpu); "
        "rcu_gp_cleanup() leaves the GP kthread's own ready callbacks to it or to the next tick, and every idle "
        "entry recomputes the wakeup (round_up(jiffies + rcu_idle_gp_delay, rcu_idle_gp_delay)). So a CPU that "
        "ran the GP kthread through the end of a grace period re-enters idle with its callbacks ready and "
        "sleeps to that wakeup. False: the v3.13 model (advance at every idle entry and exit)",
        source="kernel/rcu/tree_plugin.h rcu_try_advance_all_cbs (throttle absent in v3.11-v3.13, present in "
        "v3.18 and v4.12 sources); kernel/rcu/tree.c rcu_irq_enter, rcu_gp_cleanup (v4.0); "
        "docs/kernel/membarrier-urcu-rcu-sync.md §3.4",
    )
    rcu_idle_flushes: int = knob(
        5,
        doc="v3.9 RCU_FAST_NO_HZ: pushes of the RCU state machine at idle entry (RCU_IDLE_FLUSHES)",
        min=0,
        max=100,
        source="kernel/rcutree_plugin.h (v3.9)",
    )
    rcu_idle_opt_flushes: int = knob(
        3,
        doc="v3.9 RCU_FAST_NO_HZ: of those, the ones done only while RCU has work for the CPU (RCU_IDLE_OPT_FLUSHES)",
        min=0,
        max=100,
        source="kernel/rcutree_plugin.h (v3.9)",
    )
    nocb_poll_jiffies: int = knob(
        1,
        doc="v3.9 (911af50): period of the rcuo kthread's timed waits for its grace period",
        min=1,
        max=1000,
        source="dae6e64's message ('repeated timed waits'); the period is unverified: docs/kernel/rcu-3.9rc-era.md §4",
    )
    jiffies_till_first_fqs: int | None = knob(
        None,
        doc="jiffies before the first force-quiescent-state scan (None: the kernel's default for the era and HZ)",
        min=0,
        max=100000,
        source="kernel/rcu/tree.c rcu_init_geometry",
    )
    jiffies_till_next_fqs: int | None = knob(
        None,
        doc="jiffies between later FQS scans (None: the kernel's default)",
        min=1,
        max=100000,
        source="kernel/rcu/tree.c rcu_init_geometry",
    )
    blimit: int = knob(10, doc="callbacks invoked per RCU softirq batch", min=1, max=1_000_000, source="kernel/rcu/tree.c")
    qhimark: int = knob(
        10000, doc="queue length above which the batch limit is lifted", min=1, max=10_000_000, source="kernel/rcu/tree.c"
    )
    qlowmark: int = knob(
        100, doc="queue length below which the batch limit returns", min=0, max=10_000_000, source="kernel/rcu/tree.c"
    )
    rcu_divisor: int = knob(7, doc="v6: batch = max(blimit, queue >> rcu_divisor)", min=0, max=64, source="kernel/rcu/tree.c")
    rcu_nocb_gp_stride: int | None = knob(
        None, doc="v6: CPUs per rcuog group (None: nr_cpus / int_sqrt(nr_cpus))", min=1, max=4096, source="kernel/rcu/tree_nocb.h"
    )
    lazy: bool = knob(
        False,
        doc="v6: CONFIG_RCU_LAZY: call_rcu() callbacks wait in the bypass list up to lazy_flush",
        source="kernel/rcu/tree_nocb.h",
    )
    lazy_flush: int = knob(
        10 * S,
        doc="v6: longest wait of lazy callbacks in the bypass list",
        unit="ns",
        min=1,
        source="kernel/rcu/tree_nocb.h: jiffies_lazy_flush = 10 * HZ",
    )
    rcu_expedited: bool = knob(
        False,
        doc="rcupdate.rcu_expedited / /sys/kernel/rcu_expedited: normal GP waits are expedited",
        source="kernel/rcu/update.c",
    )
    rcu_normal: bool = knob(
        False, doc="rcupdate.rcu_normal: expedited waits use normal GPs (wins over rcu_expedited)", source="kernel/rcu/update.c"
    )
    wake_from_gp: bool = knob(
        False,
        doc="v6: rcutree.rcu_normal_wake_from_gp: the GP kthread wakes synchronize_rcu() waiters at GP end instead of a callback",
        source="kernel/rcu/tree.c (2023 series)",
    )
    fanout_leaf: int = knob(
        16, doc="CONFIG_RCU_FANOUT_LEAF: CPUs per leaf rcu_node", min=2, max=64, source="init/Kconfig / kernel/rcu/Kconfig"
    )
    # -- costs (ns)
    cb_invoke: int = knob(
        200,
        doc="invoking one ordinary callback (e.g. a kfree)",
        unit="ns",
        min=0,
        source="estimate (a slab free); see the netns story's sensitivity rows",
    )
    call_rcu: int = knob(100, doc="call_rcu() enqueue", unit="ns", min=0, source="estimate (an irq-disabled list append)")
    rcu_core: int = knob(
        1_000,
        doc="one pass of the RCU softirq (rcu_core) besides callbacks",
        unit="ns",
        min=0,
        source="estimate; see the netns story's sensitivity rows",
    )
    gp_init: int = knob(
        2_000, doc="grace-period start, per rcu_node", unit="ns", min=0, source="estimate (lock round trip per node)"
    )
    gp_cleanup: int = knob(2_000, doc="grace-period end, per rcu_node", unit="ns", min=0, source="estimate")
    fqs_per_cpu: int = knob(
        200, doc="force-quiescent-state scan, per CPU examined", unit="ns", min=0, source="estimate (a remote dynticks read)"
    )
    exp_handler: int = knob(1_000, doc="expedited GP: IPI handler / stopper work per CPU", unit="ns", min=0, source="estimate")
    exp_kthread: bool = knob(
        False,
        doc="era v6: CONFIG_RCU_EXP_KTHREAD, the expedited-GP kthread worker runs SCHED_FIFO at kthread_prio "
        "(1, its default with RCU_BOOST, which this option needs) instead of SCHED_OTHER; Kconfig's default is y "
        "only with RCU_EXPERT, RCU_BOOST, !PREEMPT_RT and NR_CPUS <= 32 (distribution kernels: n)",
        source="kernel/rcu/Kconfig (RCU_EXP_KTHREAD); kernel/rcu/tree.c rcu_start_exp_gp_kworker(), kthread_prio",
    )

    def check(self, path: str) -> None:
        p = f"{path}." if path else ""
        if self.qlowmark > self.qhimark:
            raise ConfigError(f"{p}qlowmark", "is above qhimark", "keep qlowmark <= qhimark")
        if self.fnh_advance_once_per_jiffy and (self.era != "v3.13" or not self.fast_no_hz):
            raise ConfigError(
                f"{p}fnh_advance_once_per_jiffy",
                'only applies to era = "v3.13" with fast_no_hz = true',
                'set era = "v3.13" and fast_no_hz = true, or leave it false',
            )
        if self.exp_kthread and self.era != "v6":
            raise ConfigError(
                f"{p}exp_kthread",
                'only applies to era = "v6" (older kernels have no expedited-GP kthread worker)',
                'set era = "v6", or leave it false',
            )
        if isinstance(self.nocb, tuple) and len(set(self.nocb)) != len(self.nocb):
            raise ConfigError(f"{p}nocb", "lists a CPU twice", "list each CPU once")

    def offloaded(self, ncpus: int, path: str = "kernel.rcu") -> tuple[int, ...]:
        """The offloaded CPUs on a machine of ``ncpus`` CPUs."""
        if self.nocb == "none":
            return ()
        if self.nocb == "all":
            return tuple(range(ncpus))
        bad = [c for c in self.nocb if not 0 <= c < ncpus]
        if bad:
            raise ConfigError(
                f"{path}.nocb", f"names CPU {bad[0]}, but the machine has CPUs 0..{ncpus - 1}", "list CPUs of this machine"
            )
        return tuple(sorted(self.nocb))

    def fqs_jiffies(self, hz: int, ncpus: int) -> tuple[int, int]:
        """(first, next) FQS delays in jiffies, as rcu_init_geometry computes them (v3.11+);
        v3.9-3.10 used a constant 3 (RCU_JIFFIES_TILL_FORCE_QS)."""
        default = 1 + (hz > 250) + (hz > 500) + ncpus // 256
        if self.era == "v3.9":
            default = 3  # RCU_JIFFIES_TILL_FORCE_QS before 026ad28 (v3.11)
        first = self.jiffies_till_first_fqs if self.jiffies_till_first_fqs is not None else default
        nxt = self.jiffies_till_next_fqs if self.jiffies_till_next_fqs is not None else default
        return min(first, hz), max(1, min(nxt, hz))

    def gp_stride(self, ncpus: int) -> int:
        if self.rcu_nocb_gp_stride is not None:
            return self.rcu_nocb_gp_stride
        return max(1, ncpus // max(1, math.isqrt(ncpus)))
