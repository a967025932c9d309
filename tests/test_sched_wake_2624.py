"""kernel.wake_affine = "2.6.24": try_to_wake_up of 2.6.24 (kernel/sched.c), checked by hand on
small machines. Loads are rq->load.weight (1024 a nice-0 task, 2 * 88761 a real-time task);
wake_idx 1 compares the lower (source_load) or higher (target_load) of cpu_load[0], sampled at
the last tick, and the weight now; imbalance = 100 + (125 - 100) / 2 = 112."""

import dataclasses

from sim.machine import RT_LOAD_WEIGHT, Env, Machine
from sim.ops import cpu, sleep
from sim.params import KernelConfig, MachineConfig
from sim.rng import Streams
from sim.units import MS, US

from .helpers import ZERO_COSTS


def run(m, until):
    m.env.run(until=m.env.timeout(until))


def hogs(per_cpu, ncpu=4, until=5 * MS):
    """A 2.6.24-placement machine with ``per_cpu[i]`` CPU hogs pinned to CPU i, run until a few
    ticks have sampled cpu_load[0], and a sleeping task to place (previous CPU 1)."""
    k = KernelConfig(hz=1000, preempt="voluntary", wake_affine="2.6.24")
    m = Machine(Env(), MachineConfig(cpus=ncpu), k, dataclasses.replace(ZERO_COSTS), Streams(1))

    def hog(task):
        yield cpu(1000 * MS)

    def idle(task):
        yield sleep(1000 * MS)

    w = m.spawn(idle, "wakee", affinity=[1])  # runs first, and sleeps
    for c, n in enumerate(per_cpu):
        for i in range(n):
            m.spawn(hog, f"hog{c}.{i}", affinity=[c])
    run(m, until)
    w.affinity = None
    return m, w


def test_run_queue_weight_and_the_tick_sample():
    m, _ = hogs((1, 2, 0, 0))
    assert [m._rq_weight_2624(c) for c in m.cpus] == [(1024, 1), (2048, 2), (0, 0), (0, 0)]
    assert [c.cpu_load[0] for c in m.cpus] == [1024, 2048, 0, 0]


def test_a_plain_wakeup_stays_on_an_equally_loaded_previous_cpu():
    # one task on every CPU (none idle, so wake_idle keeps the choice): tl = 1024, load = 1024; 1024 + target_load(prev) > tl_per_task and
    # 100 * (1024 + 1024) > 112 * 1024, so no wake affine (the 3.x 'waker' rule pulls on a tie)
    m, w = hogs((1, 1, 1, 1))
    waker, prev = m.cpus[0], m.cpus[1]
    assert m._select_cpu(w, waker) is prev
    m.kernel = dataclasses.replace(m.kernel, wake_affine="waker")
    m.wake_affine_2624, m.wake_affine_waker = False, True
    assert m._select_cpu(w, waker) is waker


def test_a_plain_wakeup_moves_when_the_previous_cpu_carries_one_task_more():
    # prev 2048: 100 * (1024 + 1024) <= 112 * 2048
    m, w = hogs((1, 2, 1, 1))
    assert m._select_cpu(w, m.cpus[0]) is m.cpus[0]


def test_a_real_time_task_in_the_wakers_tick_sample_keeps_the_wakee_where_it_was():
    # under PREEMPT_RT the tick has woken the softirq thread when update_cpu_load samples the
    # run queue: target_load(waker) = max(cpu_load[0], now) includes its 177522 until the next tick
    m, w = hogs((1, 2, 1, 1))
    waker = m.cpus[0]
    waker.cpu_load[0] = 1024 + RT_LOAD_WEIGHT
    assert m._select_cpu(w, waker) is m.cpus[1]


def test_a_sync_wakeup_pulls_a_cache_cold_task_only():
    # three tasks on the waker's CPU, one on the previous: a sync wakeup discounts the waker
    # (tl = 2048 > load 1024; 100 * 3072 > 112 * 1024), so a cache-hot wakee stays; one that last
    # ran sched_migration_cost (500 us) ago or more goes to the waker's CPU regardless of load
    m, w = hogs((3, 1, 1, 1))
    waker, prev = m.cpus[0], m.cpus[1]
    now = m.env.now
    w.last_ran = now - 100 * US
    assert m._select_cpu(w, waker, sync=True) is prev
    assert m._select_cpu(w, waker, sync=False) is prev
    w.last_ran = now - 500 * US
    assert m._select_cpu(w, waker, sync=True) is waker
    assert m._select_cpu(w, waker, sync=False) is prev


def test_wake_idle_moves_a_wakee_off_a_cpu_running_one_task_to_the_first_idle_one():
    # SD_WAKE_IDLE: the choice (prev, one task) is neither idle nor running more than one task
    m, w = hogs((1, 1, 0, 0))
    assert m._select_cpu(w, m.cpus[0]) is m.cpus[2]
    m, w = hogs((1, 2, 0, 0))  # the waker's CPU, chosen, runs one task: the first idle CPU
    assert m._select_cpu(w, m.cpus[0]) is m.cpus[2]
    m, w = hogs((2, 2, 0, 0))  # a tie at two tasks each: prev, busy enough to keep it
    assert m._select_cpu(w, m.cpus[0]) is m.cpus[1]
