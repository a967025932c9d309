"""The story pages' words: what each seed story is about, explained for a student.

Facts come from the seed documents (``shared/seeds``), ``docs/kernel/*.md`` and the models'
docstrings. Everything numeric the pages show beside these words (published figures, simulated
figures, validation rows) comes from :mod:`calibration.stories` and from runs, never from here.

A :class:`StoryPage` also says which bundled scenarios the page runs (the first that exists is
the default), which knobs it puts first (fnmatch patterns over the scenario's dotted keys, so a
knob a model adds later shows up when it matches), a quicker default size for interactive
runs, and named configurations to try.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StoryPage:
    story: str
    title: str
    icon: str
    seed_file: str
    headline: str
    explanation: str
    published: str
    try_next: tuple[str, ...]
    scenarios: tuple[str, ...]
    focus: tuple[str, ...]
    metrics: tuple[str, ...]
    quick: dict[str, dict[str, Any]] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    configs_from: str = ""  # "module:ATTRIBUTE" holding more named configurations
    further: tuple[str, ...] = ()  # glob patterns (from the repository root) of notes to read next
    ab: tuple[dict[str, Any], dict[str, Any]] | None = None  # A/B mode's default A and B


NETNS = StoryPage(
    story="netns-2014",
    title="netns and NOCB",
    icon=":material/hub:",
    seed_file="000_6efd1dc594362dee.txt",
    headline="Creating network namespaces got five times slower when every CPU's RCU callbacks were offloaded (CONFIG_RCU_NOCB_CPU_ALL), and one CPU beat four.",
    explanation="""
**RCU in one paragraph.** Read-copy-update lets readers walk shared data with no locks at all.
A writer that removes something cannot free it at once, because a reader may still hold a
pointer to it; instead it waits for a *grace period*: an interval after which every CPU has
passed through a *quiescent state* (a context switch, user mode or idle) and so no reader that
started before can still be running. The writer either blocks in `synchronize_rcu()` or hands
the free to `call_rcu()`, a *callback* that runs after the grace period. A grace-period kthread
(`rcu_sched` in 3.13) drives each grace period: it starts it, sleeps a few jiffies, then scans
the CPUs (*force quiescent state*, FQS) to report the idle ones.

**Where callbacks run.** Normally each CPU invokes its own callbacks in softirq, in batches of
`blimit` (10). With *callback offloading* (NOCB, "no callbacks"), an offloaded CPU never runs
them itself: per-CPU `rcuo` kernel threads do, so a CPU running a real-time or HPC job is not
interrupted. Commit 911af50 (merged for 3.10) added `CONFIG_RCU_NOCB_CPU_ALL`, which offloads
*every* CPU, and distributions turned it on.

**Why that hurt the fake routers.** The test script creates "fake routers": `ip netns add`,
a few `ip netns exec`, two veth pairs each. Every one of those waits for grace periods (mount
namespace teardown, network device unregistration). In 3.13, a `synchronize_rcu()` on an
offloaded CPU becomes a relay: queue the wake-me callback, wake the CPU's `rcuo` thread (often
on another, idle CPU: an IPI and an idle exit), which requests a grace period, which wakes the
GP kthread; at the end of the grace period the GP kthread wakes the `rcuo` thread again, which
invokes its whole batch and finally wakes the caller. Each `rcuo` thread waits for its *own*
grace period, so a callback that arrives while it is busy waits for a second one. rcusim does
not contain a "NOCB penalty": the slowdown has to appear from these wakeups, kthreads and
grace periods competing for the CPUs.

**Why one CPU wins.** On a single CPU, with non-preemptible RCU, `synchronize_rcu()` returns at
once: a CPU that is running this code is itself the only reader that could exist, so the grace
period is over by definition (`rcu_blocking_is_gp()`). Four CPUs pay real grace periods, a few
milliseconds each at HZ=250, several times per router.
""",
    published="""
* 4 CPUs, rate at the 500-routers mark: `ip netns add` **250 → 50 routers/s** with NOCB_ALL;
  with an `ip netns exec` per router **40 → 20 /s**.
* 1 CPU: no regression, and faster than 4 CPUs in every configuration.
* Later kernels: 4-CPU NOCB_ALL still about **half** the 1-CPU rate.
""",
    try_next=(
        "Switch `nocb` between `none` and `all` and run both: the chart keeps one line per run.",
        "Set `cpus` to 1 and compare with 4: which configuration depends on NOCB, and why does one CPU not care?",
        "Open the timeline around a grace period: find the `rcuos` kthreads and the `rcu_sched` GP kthread, and count the wakeups one `synchronize_rcu()` costs.",
        "Set `era` to `v6` (rcuog/rcuoc kthreads grouped by `rcu_nocb_gp_stride`) to see how the 3.17 leader/follower design changes the picture.",
        "Try `rcu_expedited = true`: expedited grace periods IPI every CPU instead of waiting for ticks.",
    ),
    scenarios=("netns-2014",),
    focus=(
        "kernel.rcu.nocb",
        "machine.cpus",
        "workload.steps",
        "workload.routers",
        "kernel.rcu.era",
        "kernel.rcu.rcu_expedited",
        "kernel.hz",
    ),
    metrics=("routers_per_s", "rate_at_*", "time_s", "rcu.grace_periods", "rcu.synchronize_mean_ms"),
    quick={"netns-2014": {"workload.routers": 200, "workload.report_every": 25, "workload.steps": "add"}},
    configs={
        "nocbno, 4 CPUs": {"kernel.rcu.nocb": "none", "machine.cpus": 4},
        "nocball, 4 CPUs": {"kernel.rcu.nocb": "all", "machine.cpus": 4},
        "nocbno, 1 CPU": {"kernel.rcu.nocb": "none", "machine.cpus": 1},
        "nocball, 1 CPU": {"kernel.rcu.nocb": "all", "machine.cpus": 1},
    },
    further=("docs/kernel/rcu-*.md", "docs/readme/rcu.md"),
    ab=({"kernel.rcu.nocb": "none"}, {"kernel.rcu.nocb": "all"}),
)

HACKBENCH = StoryPage(
    story="hackbench-rt-2008",
    title="hackbench and rt-mutex policies",
    icon=":material/lock:",
    seed_file="001_7a77242d456273ec.txt",
    headline="`hackbench 50` on a 4-way box: 17.1 s on 2.6.24.7-rt6, 8.1 s with lateral lock stealing, 4.9 s with adaptive spinning; vanilla 3.9 s.",
    explanation="""
**Sleeping spinlocks.** PREEMPT_RT makes almost the whole kernel preemptible by turning
`spinlock_t` into an *rt-mutex*: a lock whose waiters sleep instead of spinning, with priority
inheritance so a low-priority owner is boosted while a high-priority task waits. That keeps
latencies bounded, but a lock that used to be held for a few hundred nanoseconds can now make
its waiters go to sleep and be woken up, which costs microseconds.

**Strict handoff and convoys.** In 2.6.24-rt6 the release of a contended rt-mutex gave the lock
to the top waiter *before it ran*: the woken task became the *pending owner*. Until it was
scheduled (a wakeup, a wait in the run queue, a context switch), nobody else could take the lock,
not even a task already running on another CPU that wanted it for a moment. Meanwhile more
tasks arrived, found the lock taken and went to sleep too. Such a *convoy* feeds itself: every
acquisition pays a sleep, a wakeup and two context switches, and `hackbench` (groups of 20
senders and 20 receivers over UNIX sockets, all hammering the same socket and slab locks) spends
its time queueing.

**Lateral stealing.** rt7 let a *running* task of equal priority take the lock from a pending
owner that had not run yet (never from a real-time waiter, to keep RT behaviour fair). The lock
is then never reserved for a task that is off the CPU: hackbench went from 17.1 s to 8.1 s.

**Adaptive spinning.** Most hold times are shorter than a sleep and wakeup, so rt7 also lets a
waiter *spin* while the owner is running on a CPU and sleep only when it is not. That brought
hackbench to 4.85 s, within 25% of the vanilla kernel's 3.9 s. In rcusim the policies are small
variations of one rt-mutex model (`kernel.locks.policy`); the times come from the convoys the
scheduler and the locks produce, not from a speed factor per policy.
""",
    published="""
* 2.6.24.7 vanilla: **3.9 s**; 2.6.24.7-rt6 (strict handoff): **17.1 s** (median of 10 runs);
  + lateral stealing: **8.13 s**; + rearranged xchg: 8.16 s; + adaptive spinning (rt7): **4.86 s**.
* Strict handoff also had 3-5 times the run-to-run spread of the other kernels.
""",
    try_next=(
        "Run `strict`, then `lateral`, then `adaptive` and compare the time per hackbench 50.",
        "Switch `preempt_rt` off with `preempt = voluntary` (the vanilla kernel) for the reference point.",
        "Look at the lock counters: `locks.sleeps`, `locks.steals`, `locks.spins`; where do the convoys form?",
        "Open the timeline with `strict`: the lock rows show who owns each lock and, in the pending-owner colour, "
        "how long a lock stays reserved for a woken task that has not run yet. Then switch to `lateral`.",
        "Switch `transport` to `pipe` (hackbench -pipe): no skb, so no per-CPU slab lock, and the pipe's mutex "
        "is an rt_mutex that rt7 never lets anyone steal laterally.",
        "Use A/B mode with several seeds to see whether the policy's effect is larger than the noise.",
        "Set `groups` to 50 and `loops` to 10 for the story's full size (about 30 s of computing).",
    ),
    scenarios=("hackbench-rt-2008",),
    focus=(
        "kernel.locks.policy",
        "kernel.locks.preempt_rt",
        "kernel.preempt",
        "machine.cpus",
        "workload.groups",
        "workload.loops",
        "workload.transport",
    ),
    metrics=("time_s_at_100_loops", "time_s", "locks.contended", "locks.sleeps", "locks.steals", "locks.spins"),
    quick={"hackbench-rt-2008": {"workload.groups": 10, "workload.loops": 5}},
    configs_from="models.locks:CONFIGS",
    further=("docs/kernel/rtmutex*.md", "docs/readme/locks.md"),
    ab=({"kernel.locks.policy": "strict"}, {"kernel.locks.policy": "lateral"}),
)

URCU = StoryPage(
    story="urcu-membarrier-2020",
    title="membarrier and userspace RCU",
    icon=":material/memory:",
    seed_file="002_7703e2ccbef3488d.txt",
    headline="liburcu moving from MEMBARRIER_CMD_SHARED (waits for a grace period) to PRIVATE_EXPEDITED (IPIs, never blocks): writes 237 → 6,516 in 10 s.",
    explanation="""
**Userspace RCU.** liburcu brings RCU to applications: readers are almost free, and a writer's
`synchronize_rcu()` waits until every reader thread has been seen outside a read-side critical
section. The hard part is making the readers' memory accesses visible to the writer without
making readers pay a full memory barrier each time.

**membarrier.** The `membarrier()` system call does that work on the writer's side: it makes
every running thread of the process execute a memory barrier. `MEMBARRIER_CMD_SHARED` (now
`GLOBAL`) achieves this by waiting for a kernel grace period: cheap for the system but slow for
the caller, milliseconds per call. `MEMBARRIER_CMD_PRIVATE_EXPEDITED` instead sends an IPI to
the CPUs currently running the process's threads and returns as soon as they answer:
microseconds, never a sleep.

**What the seed measured.** On a 2-vCPU KVM guest, `test_urcu 6 2 10` (6 readers, 2 writers,
10 s) wrote 237 times with the blocking command and 6,516 times with the expedited one, while
reads fell from 6.07e9 to 4.10e9 because the IPIs now interrupt the readers. The `urcu-bp`
flavor went from 6.44e8 to 6.53e9 reads once it could use membarrier instead of fences.
""",
    published="""
* `test_urcu 6 2 10`, 2 vCPUs: reads **6.07e9 → 4.10e9**, writes **237 → 6,516**.
* `test_urcu_bp`: reads **6.44e8 → 6.53e9**; membarrier calls in 10 s: **607 → 835,874**.
""",
    try_next=(
        "Switch `membarrier` between `shared` (blocking) and `private_expedited` and compare writes per second.",
        "Compare the urcu flavors (memb, mb, signal, bp): who pays, readers or writers?",
        "Look at the timeline: grace periods for the blocking command, IPIs for the expedited one.",
    ),
    scenarios=("urcu-membarrier-2020",),
    focus=(
        "workload.membarrier",
        "workload.flavor",
        "kernel.membarrier.era",
        "workload.readers",
        "workload.writers",
        "workload.duration",
        "machine.cpus",
    ),
    metrics=("writes_per_s", "reads_per_s", "writes", "reads", "urcu.membarrier_calls", "membarrier.ipis", "urcu.grace_periods"),
    quick={"urcu-membarrier-2020": {"workload.duration": "300 ms"}},
    configs={
        "SHARED (blocking)": {"workload.membarrier": "shared"},
        "PRIVATE_EXPEDITED": {"workload.membarrier": "private_expedited"},
    },
    ab=({"workload.membarrier": "shared"}, {"workload.membarrier": "private_expedited"}),
    further=("docs/kernel/*membarrier*.md", "docs/kernel/*urcu*.md", "docs/readme/sync.md"),
)

RCU_SYNC = StoryPage(
    story="rcu-sync-2015",
    title="rcu_sync and percpu-rwsem",
    icon=":material/sync:",
    seed_file="003_30e3c4a3efe5332b.txt",
    headline="rcu_sync let percpu-rwsem writers skip grace periods: 1000 trace-event toggles took 13.3 s instead of 67.5 s with plain synchronize_sched().",
    explanation="""
**percpu-rwsem.** A reader-writer semaphore for data that is read constantly and written
rarely: readers only bump a per-CPU counter, with no shared cache line, as long as no writer is
around. A writer must first switch every reader to the slow, shared path, and it can only be
sure that all readers have seen the switch after a grace period.

**The cost of a write.** Before 2015 each write paid `synchronize_sched_expedited()` twice
(when entering and when leaving the writer side); with plain `synchronize_sched()` each write
pays normal grace periods, several milliseconds each. Toggling trace events, which takes the
semaphore for writing each time, becomes a sequence of grace-period waits.

**rcu_sync.** Oleg Nesterov's rcu_sync is a small state machine (IDLE, PENDING, PASSED and a
callback state) in front of the grace periods: the first writer pays one grace period; writers
that follow while the readers are still on the slow path pay nothing; leaving queues a callback
instead of waiting. A burst of 1000 writes then costs one synchronous grace period in all, plus
a few asynchronous ones.
""",
    published="""
* 1000 trace-event enable/disable pairs, 2 CPUs, KVM: **13.5 s** with `synchronize_sched_expedited()`,
  **67.5 s** with plain `synchronize_sched()`, **13.3 s** with rcu_sync (1-3 grace periods in all).
""",
    try_next=(
        "Switch `writer_sync` between `expedited`, `normal` and `rcu_sync` and compare the time per pair.",
        "Count the grace periods in the timeline for each mode.",
        "Space the writes out: when does rcu_sync fall back to paying a grace period per write?",
    ),
    scenarios=("rcu-sync-2015",),
    focus=("kernel.percpu_rwsem.writer_sync", "kernel.percpu_rwsem.rcu_sync_era", "workload.pairs", "machine.cpus", "kernel.hz"),
    metrics=("total_s", "ms_per_pair", "rcu.synchronize_calls", "rcu.expedited_gps", "rcu.grace_periods", "percpu_rwsem.*"),
    quick={"rcu-sync-2015": {"workload.pairs": 100}},
    configs={
        "expedited": {"kernel.percpu_rwsem.writer_sync": "expedited"},
        "normal GPs": {"kernel.percpu_rwsem.writer_sync": "normal"},
        "rcu_sync": {"kernel.percpu_rwsem.writer_sync": "rcu_sync"},
    },
    ab=({"kernel.percpu_rwsem.writer_sync": "normal"}, {"kernel.percpu_rwsem.writer_sync": "rcu_sync"}),
    further=("docs/kernel/*rcu-sync*.md", "docs/kernel/*rcu_sync*.md", "docs/kernel/*percpu*.md", "docs/readme/sync.md"),
)

TIMERS = StoryPage(
    story="timers-2023",
    title="timer placement: push vs pull",
    icon=":material/timer:",
    seed_file="004_4966f5407572de7a.txt",
    headline="The timer pull model (v6.9) replaced the push heuristic for timers of idle CPUs: enqueue+dequeue 145 ns → 109 ns, dbench within ±8%.",
    explanation="""
**Timers and idle CPUs.** The kernel keeps timers in a per-CPU *timer wheel*. A CPU that goes
idle wants to stay idle as long as possible (deep idle states save power but take long to
leave), so a timer that nobody needs on that particular CPU should not wake it up.

**Push.** Until v6.9 the kernel decided at *enqueue* time: `get_nohz_timer_target()` kept a new
timer on the local CPU only if that CPU was busy; otherwise it walked the scheduling domains
looking for a busy CPU and queued the timer there. That walk costs time on every enqueue, and
the guess can be wrong: the busy CPU may go idle before the timer expires.

**Pull.** The timer-migration hierarchy (Anna-Maria Behnsen's series) queues every timer
locally, which is cheap. When a CPU goes idle, it hands its first non-pinned ("global") timer to
its group of 8 CPUs; one still-active CPU per group, the *migrator*, expires the idle CPUs'
global timers from its tick. So the decision moves from enqueue time to expiry time, when it is
known who is awake. A side effect the series describes is a "ping pong": a timer expired
remotely wakes a task back on the idle CPU, which re-arms the timer there and goes idle again.
""",
    published="""
* Timer enqueue + dequeue loop on an isolated CPU: **145 ns → 109 ns** (about -25%).
* dbench, 1..1024 client pairs, menu and teo governors: throughput changes between **-8% and +8%**.
* Idle: deep idle residency "not downgraded"; a remote-expiry ping pong on mostly idle machines.
""",
    try_next=(
        "Switch `timer_migration` between `push` and `pull` on the enqueue scenario and compare ns per enqueue+dequeue.",
        "On the idle scenario, compare idle wakeups per second and remote expiries; find the ping pong in the timeline's timer track.",
        "On dbench, change the number of pairs: where does the sign of the change flip?",
    ),
    scenarios=("timers-enqueue", "timers-idle", "timers-dbench"),
    focus=(
        "kernel.timers.timer_migration",
        "kernel.timers.governor",
        "machine.cpus",
        "workload.pairs",
        "workload.sleepers",
        "workload.busy_fraction",
    ),
    metrics=(
        "ns_per_enqueue_dequeue",
        "requests_per_s",
        "timers.idle_wakeups_per_s",
        "timers.remote_expiries",
        "timers.pingpong",
        "sleeper_periods_per_s",
    ),
    quick={"timers-dbench": {"machine.cpus": 16, "workload.pairs": 8}},
    configs={"push": {"kernel.timers.timer_migration": "push"}, "pull": {"kernel.timers.timer_migration": "pull"}},
    further=("docs/kernel/timer*.md", "docs/readme/timers.md"),
    ab=({"kernel.timers.timer_migration": "push"}, {"kernel.timers.timer_migration": "pull"}),
)

STORY_PAGES: dict[str, StoryPage] = {p.story: p for p in (NETNS, HACKBENCH, URCU, RCU_SYNC, TIMERS)}


def named_configs(page: StoryPage) -> dict[str, dict[str, Any]]:
    """The page's named configurations, and those a model module publishes (e.g. the four
    kernels of the hackbench story in ``models.locks.CONFIGS``)."""
    out = dict(page.configs)
    if page.configs_from:
        from importlib import import_module

        mod, _, attr = page.configs_from.partition(":")
        try:
            extra = getattr(import_module(mod), attr, {}) or {}
        except ImportError:
            extra = {}
        for name, over in extra.items():
            out[str(name)] = dict(over)
    return out


HOME = """
rcusim simulates the Linux kernel mechanisms that decide how well a machine scales: CPUs and
the scheduler, RCU grace periods and callback offloading, rt-mutex handoff policies,
percpu-rwsem and rcu_sync, membarrier and userspace RCU, and timer placement. A workload runs
as scripts of kernel primitives on simulated CPUs; every effect you see comes out of those
mechanisms competing for the CPUs, not out of a formula.

**Where to start**

* **Stories** (left): each page retells a real kernel measurement (a "seed story"), explains
  the mechanism behind it, shows the published figures beside the simulated ones, and lets you
  turn the knobs that mattered.
* **Workload lab**: pick a machine (the bundled profile of the development machine, a profile
  you collected with `rcusim collect`, or hand-set CPUs and HZ), a workload and its size, and
  any kernel knob.
* **A/B mode**: two configurations side by side over several seeds, with the difference, its
  confidence interval and a verdict in plain words.

Every run can be downloaded as the scenario TOML (so `rcusim run FILE` reproduces it), the
results as CSV and the trace as Chrome trace-event JSON (open it at ui.perfetto.dev).
"""
