"""kernel.load_balance = "2.6.24": the load balancer of 2.6.24 (kernel/sched.c load_balance,
find_busiest_group, move_tasks, idle_balance, rebalance_domains; SD_MC_INIT values), checked by
hand on small machines with zero costs and HZ 1000. A nice-0 task weighs 1024, a real-time one
177522; each CPU is a group of its own, so a group's load is its CPU's load. Every test states
what the 'nr_running' rule (the other eras' balancer) would do instead, and checks that it does."""

import dataclasses

import pytest
from hypothesis import given

from sim.machine import CPU_NEWLY_IDLE, CPU_NOT_IDLE, Env, Machine
from sim.ops import Spawn, cpu, sleep
from sim.params import KernelConfig, MachineConfig
from sim.rng import Streams
from sim.units import MS

from .helpers import ZERO_COSTS, every_task
from .test_engine_properties import check_invariants, scenarios


def run(m, until):
    """Run until the absolute time ``until``."""
    m.env.run(until=m.env.timeout(until - m.env.now))


def build(per_cpu, rule="2.6.24", nohz=False, rt_on=()):
    """A machine with ``per_cpu[i]`` CPU hogs started on CPU i (pinned while they start, then free
    to move), and a pinned real-time hog on each CPU of ``rt_on``."""
    k = KernelConfig(hz=1000, preempt="voluntary", nohz_idle=nohz, load_balance=rule)  # type: ignore[arg-type]
    m = Machine(Env(), MachineConfig(cpus=len(per_cpu)), k, dataclasses.replace(ZERO_COSTS), Streams(1))

    def hog(task):
        yield cpu(10_000 * MS)

    tasks = []
    for c, n in enumerate(per_cpu):
        for i in range(n):
            tasks.append(m.spawn(hog, f"hog{c}.{i}", affinity=[c]))
    for c in rt_on:
        m.spawn(hog, f"rt{c}", policy="fifo", prio=50, affinity=[c])
    for t in tasks:
        t.affinity = None
    return m


def nr(m):
    return [c.nr_running for c in m.cpus]


def test_find_busiest_moves_one_task_for_a_difference_of_one():
    # loads 2048 / 1024 / 1024 / 1024 (idx 0: the weights now), seen from CPU 1: avg 1280,
    # imbalance min(2048 - 1280, 2048 - 1024, 1280 - 1024) = 256 < 1024 per task; small
    # imbalance: 2048 - 1024 + 1024 (fuzz) >= 2 * 1024, so one task's load. The nr_running rule
    # needs a difference of two tasks.
    m = build((2, 1, 1, 1))
    run(m, 1)
    busiest, imbalance = m._find_busiest_2624(m.cpus[1], CPU_NEWLY_IDLE, set())
    assert (busiest, imbalance) == (m.cpus[0], 1024)
    # within imbalance_pct: 3 tasks against 3 (no busiest), and the busiest must run two
    m = build((3, 3, 1, 1))
    run(m, 1)
    assert m._find_busiest_2624(m.cpus[1], CPU_NEWLY_IDLE, set()) == (None, 0)


def test_a_real_time_task_weighs_down_the_pulling_cpu():
    # CPU 1 runs one fair task and a runnable real-time one: its load 178546 dwarfs CPU 0's four
    # fair tasks (4096), so 2.6.24 pulls nothing; the nr_running rule sees 4 against 2 and pulls
    m = build((4, 1), rt_on=(1,))
    run(m, 1)
    assert m._find_busiest_2624(m.cpus[1], CPU_NEWLY_IDLE, set()) == (None, 0)
    assert m._pull_imbalance(m.cpus[1], 0, respect_hot=False, limit=1) == 1


def test_busy_cpus_balance_every_64_ms_and_pull_the_imbalance():
    # CPU 1 (one hog) balances as a busy CPU every balance_interval (1 ms) x busy_factor 64, on
    # cpu_load[1] (busy_idx 2). At jiffy 64: this_load 1024, CPU 0's 4096, avg 2560; imbalance
    # min(4096 - 2560, 4096 - 1024, 2560 - 1024) = 1536: move_tasks pulls until that much has
    # moved, i.e. two tasks (1536 - 1024 > 0, then < 0). The nr_running rule pulls a task every
    # sd_weight (2) ms, one at a time.
    m = build((4, 1))
    run(m, 63 * MS + 500_000)
    assert nr(m) == [4, 1]
    run(m, 64 * MS + 500_000)
    assert nr(m) == [2, 3]
    old = build((4, 1), rule="nr_running")
    run(old, 2 * MS + 500_000)
    assert nr(old) == [3, 2]


def test_a_newly_idle_cpu_pulls_up_to_the_imbalance():
    # CPU 1 runs a task that sleeps after 1 ms; idle_balance then sees 9216 on CPU 0 (nine hogs,
    # eight never ran: cache-cold) and nothing here: avg 4608, imbalance min(9216 - 4608,
    # 9216 - 1024, 4608) = 4608, so five tasks move (4608 -> 3584 -> ... -> -512). The
    # nr_running rule's newly idle CPU takes one.
    for rule, want in (("2.6.24", [4, 5]), ("nr_running", [8, 1])):
        m = build((9, 0), rule=rule)

        def nap(task):
            yield cpu(1 * MS)
            yield sleep(10_000 * MS)

        m.spawn(nap, "nap", affinity=[1])
        run(m, 1 * MS + 1000)
        assert nr(m) == want, rule


def test_cache_hot_tasks_stay_until_two_balances_failed():
    # A task that ran within sched_migration_cost (500 us) is not pulled (can_migrate_task:
    # task_hot) until nr_balance_failed > cache_nice_tries (1)
    m = build((3, 0))
    run(m, 1)
    now = m.env.now
    c0, c1 = m.cpus
    queued = [t for _, _, seq, t in sorted(c0.rq) if seq == t._rq_seq]
    for t in queued:
        t.run_ns, t.last_ran = 1, now  # they all just ran
    assert m._move_tasks_2624(c1, c0, 2048) == (0, False)
    c1.lb_failed = 2
    assert m._move_tasks_2624(c1, c0, 2048) == (2, False)


def test_an_idle_load_balancer_spreads_work_under_nohz():
    # NO_HZ: the three idle CPUs start tickless; CPU 0's first busy tick nominates the first of
    # them (CPU 1), which keeps its tick and balances itself and CPUs 2 and 3 every 1-4 ms
    # (CPU_IDLE, idle_idx 0): eight hogs end up two per CPU, and only the balancer ticked while
    # the others waited
    m = build((8, 0, 0, 0), nohz=True)
    run(m, 30 * MS)
    assert nr(m) == [2, 2, 2, 2]
    assert m.nohz_ilb == -1  # everyone is busy now: no idle load balancer


def test_cpu_load_decays_as_update_cpu_load():
    # cpu_load[i] = (cpu_load[i] (2^i - 1) + load) / 2^i at every tick, rounded up while the
    # load grows: after one tick with one task, [1024, 512, 256, 128, 64]
    m = build((1,))
    run(m, 1 * MS + 500_000)
    assert m.cpus[0].cpu_load == [1024, 512, 256, 128, 64]
    run(m, 2 * MS + 500_000)
    assert m.cpus[0].cpu_load == [1024, 768, 448, 240, 124]


def test_periodic_balance_is_busy_or_idle_by_the_tick():
    # rebalance_domains on a busy CPU waits balance_interval x 64 jiffies; the interval doubles
    # after a balanced pass (up to max_interval 4 ms)
    m = build((1, 1))
    run(m, 64 * MS + 500_000)
    assert m.cpus[1].lb_interval == 2
    assert m.cpus[1].lb_next == 64 + 64
    assert m._find_busiest_2624(m.cpus[1], CPU_NOT_IDLE, set()) == (None, 0)


@pytest.mark.parametrize(("fork", "want_cpu"), [("2.6.24", 0), ("idlest", 1)])
def test_fork_2624_starts_the_child_on_the_parents_cpu_and_runs_it_first(fork, want_cpu):
    # sched_fork finds no SD_BALANCE_FORK domain: the child is on the parent's CPU (CPU 0) even
    # though CPU 1 idles, and task_new_fair reschedules the parent, so the child's first 1 ms
    # of work runs before the parent's next one. 'idlest' puts it on the idle CPU 1.
    k = KernelConfig(hz=1000, preempt="voluntary", nohz_idle=False, fork_balance=fork)
    m = Machine(Env(), MachineConfig(cpus=2), k, dataclasses.replace(ZERO_COSTS), Streams(1))
    order = []

    def child(task):
        order.append(("child", m.env.now))
        yield cpu(1 * MS)

    def parent(task):
        yield Spawn(child, "child", wait=False, exec=False)
        order.append(("parent", m.env.now))
        yield cpu(1 * MS)

    m.spawn(parent, "parent", affinity=[0])
    tasks = every_task(m)
    run(m, 3 * MS)
    kid = next(t for t in tasks() if t.name == "child")
    assert kid.ran_cpu == want_cpu
    if fork == "2.6.24":
        assert [who for who, _ in order] == ["child", "parent"]
        assert dict(order)["parent"] == 1 * MS  # the parent waited for the child's 1 ms


@given(scenarios())
def test_substrate_invariants_under_2624_scheduling(sc):
    # the substrate's invariants (time monotonic, nothing lost or starved, one thing per CPU at a
    # time, CPU time conserved) on random machines and tasks with 2.6.24's wakeup placement, load
    # balancing and fork placement: in particular no runnable task is left behind on a CPU while
    # the NO_HZ idle load balancer's bookkeeping says nobody needs to balance
    cfg, pairs, spawner, seed = sc
    cfg = dict(cfg, kernel={"wake_affine": "2.6.24", "load_balance": "2.6.24", "fork_balance": "2.6.24"})
    check_invariants(cfg, pairs, spawner, seed)


def test_active_balance_pushes_one_task_through_the_migration_thread():
    # what load_balance does after more than cache_nice_tries + 2 failed passes: mark the busiest
    # CPU for active balance towards this one and wake its migration thread (SCHED_FIFO 99, made
    # on first use), which preempts the running task and pushes one queued task to push_cpu even
    # if it is cache-hot (move_one_task with the target's nr_balance_failed past
    # cache_nice_tries); then it sleeps until the next active balance
    m = build((3, 1))
    run(m, 1 * MS)
    c0, c1 = m.cpus
    for t in m.tasks.values():
        t.last_ran, t.run_ns = m.env.now, max(t.run_ns, 1)  # everything cache-hot
    assert m._move_tasks_2624(c1, c0, 1024) == (0, False)  # a plain pass moves nothing
    c0.active_balance, c0.push_cpu = True, 1
    c1.lb_failed = 2  # cache_nice_tries + 1, as load_balance leaves it
    m._wake_migration_2624(c0)
    run(m, 1 * MS + 100_000)
    assert nr(m) == [2, 2]
    k = c0.migration
    assert k is not None and k.prio == 99 and k.affinity == (0,) and not c0.active_balance
    assert k.state == 1  # asleep again (BLOCKED)
