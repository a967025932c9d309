"""Hand-checked timelines: every cost is chosen, no jitter, so times are exact."""

from sim.channel import Channel
from sim.machine import IDLE
from sim.ops import Recv, Send, cpu, sleep
from sim.task import DONE
from sim.units import MS, US

from .helpers import every_task, machine


def run(m, until):
    m.env.run(until=m.env.timeout(until))


def _logging(m, log):
    """Scripts named ``name`` that run 10 us on a CPU, then log ``(name, now)``."""

    def script(name):
        def s(task):
            yield cpu(10_000)
            log.append((name, m.now))

        return s

    return script


def test_two_tasks_one_cpu_known_switch_cost():
    m = machine(cpus=1, context_switch=1000)
    log = []
    script = _logging(m, log)

    a = m.spawn(script("a"), "a")
    b = m.spawn(script("b"), "b")
    run(m, 100 * US)
    # a: switch 1000 then 10 us; b: switch 1000 then 10 us
    assert log == [("a", 11_000), ("b", 22_000)]
    assert a.state == DONE and b.state == DONE
    assert m.cpus[0].switches == 2
    assert a.run_ns == 10_000 and b.wait_ns == 11_000


def test_wakeup_across_cpus():
    m = machine(
        cpus=2, pipe_send=500, pipe_recv=300, wakeup=200, ipi_latency=1000, ipi_handler=100, idle_exit=5000, context_switch=1000
    )
    ch = Channel(m, "p")
    from sim.stats import LogHistogram

    ch.latency = LogHistogram()
    got = []

    def receiver(task):
        got.append((yield Recv(ch)))

    def sender(task):
        yield cpu(20_000)
        yield Send(ch, "hello")

    b = m.spawn(receiver, "b", affinity=[1])
    a = m.spawn(sender, "a", affinity=[0])
    run(m, 1 * MS)
    # both CPUs: kick IPI 1000 + idle exit 5000 + handler 100 + switch 1000 = 7100
    # a: 20 us of work -> 27100, send 500 -> 27600 (message queued, B woken), wakeup 200 -> exits 27800
    # CPU1: IPI at 28600, idle exit -> 33600, handler -> 33700, switch -> 34700, recv 300 -> 35000
    assert a.ended == 27_800
    assert b.ended == 35_000
    assert got == ["hello"]
    assert ch.latency.lo == ch.latency.hi == 34_700 - 27_600
    assert m.cpus[1].ipis == 2 and m.cpus[0].ipis == 1


def test_tick_runs_on_busy_cpu_and_stops_on_idle_cpu():
    m = machine(cpus=2, hz=1000, tick=1000)

    def spin(task):
        yield cpu(10_500_000)

    t = m.spawn(spin, "spin", affinity=[0])
    run(m, 30 * MS)
    # ticks at 1..10 ms while the task runs, each adding 1 us to its wall time
    assert m.cpus[0].ticks == 10
    assert t.ended == 10_500_000 + 10 * 1000
    assert m.cpus[1].ticks == 0  # NO_HZ idle: an idle CPU has no tick
    assert m.cpus[0].state == IDLE and not m.cpus[0].tick_on


def test_periodic_tick_without_nohz_wakes_idle_cpus():
    m = machine(cpus=2, hz=1000, nohz_idle=False, tick=1000, idle_exit=2000)
    run(m, 20 * MS + 500 * US)
    assert m.cpus[0].ticks == 20 and m.cpus[1].ticks == 20
    assert m.cpus[1].idle_exits == 20
    # time is conserved: each tick costs idle exit + handler, the rest is idle
    acc = m.cpus[1].acc
    m.finish_accounting()
    assert sum(m.cpus[1].acc) == m.now
    assert acc[4] == 20 * 1000  # irq state


def test_sleep_wakes_by_timer_interrupt():
    m = machine(cpus=1, timer_irq=700, context_switch=1000, wakeup=200)
    times = []

    def s(task):
        yield sleep(50_000)
        times.append(m.now)

    m.spawn(s, "sleeper")
    run(m, 1 * MS)
    # start: switch 1000; sleep until 51000; timer irq at 51000 on the idle CPU:
    # irq 700 (+ wakeup 200 paid in the irq) -> 51900, switch 1000 -> 52900
    assert times == [52_900]


def test_rt_task_preempts_fair_task_on_wakeup():
    m = machine(cpus=1, context_switch=1000, timer_irq=0)
    order = []

    def fair(task):
        yield cpu(100_000)
        order.append(("fair", m.now))

    def rt(task):
        yield sleep(10_000)
        yield cpu(5_000)
        order.append(("rt", m.now))

    m.spawn(rt, "rt", policy="fifo", prio=50)
    m.spawn(fair, "fair")
    run(m, 1 * MS)
    # rt: switch (1000), sleeps at 1000 until 11000; fair: switch 1000 -> runs from 2000;
    # at 11000 the timer wakes rt, which preempts fair at once (user mode): switch -> 12000, runs 5 us -> 17000
    # fair: 9 us done by 11000; switch back 1000 -> 18000 + 91 us -> 109000
    assert order == [("rt", 17_000), ("fair", 109_000)]


def test_cut_segment_ends_a_spin_early():
    from sim.ops import Call

    m = machine(cpus=2, context_switch=1000)
    seen = []

    def spin(cpu_, t):
        def after(c, task):
            seen.append(m.now)
            return 0

        t.post = after
        return 1_000_000  # spin for up to 1 ms

    def spinner(task):
        yield Call(spin)

    def releaser(task):
        yield cpu(20_000)
        m.cut_segment(s, delay=100)

    s = m.spawn(spinner, "spinner", affinity=[0])
    m.spawn(releaser, "releaser", affinity=[1])
    run(m, 2 * MS)
    # both start at 1000 (switch); releaser cuts at 21000 + 100
    assert seen == [21_100]
    assert s.run_ns == 20_100


def test_set_prio_boost_requeues_and_preempts():
    m = machine(cpus=1, context_switch=1000)
    order = []

    def worker(name, ns):
        def s(task):
            yield cpu(ns)
            order.append(name)

        return s

    a = m.spawn(worker("a", 50_000), "a")
    b = m.spawn(worker("b", 10_000), "b")
    m.call_at(5_000, m.set_prio, b, 10)  # boost b to RT while a runs
    run(m, 1 * MS)
    assert order == ["b", "a"]
    assert a.nivcsw == 1


def test_machine_events_and_simpy_events_at_one_time_fire_in_creation_order():
    # call_at, interrupts and SimPy timeouts share SimPy's (time, priority, event id) order:
    # events due at the same time fire in the order they were made, whatever their kind.
    m = machine(cpus=1)
    seen = []

    def irq(tag):
        def fn(c):
            seen.append(tag)
            return 0

        return fn

    m.env.timeout(1000).callbacks.append(lambda _e: seen.append("timeout 1"))
    m.call_at(1000, seen.append, "call 1")
    m.interrupt(m.cpus[0], 0, irq("irq 1"), delay=1000)
    m.env.timeout(1000).callbacks.append(lambda _e: seen.append("timeout 2"))
    m.call_at(1000, seen.append, "call 2")
    m.call_at(500, seen.append, "call 0")
    run(m, 1 * MS)
    # the interrupt arrives third, but its handler runs when the idle CPU has left idle: an
    # action the arrival schedules (idle exit of 0 ns here), so after everything made before it
    assert seen == ["call 0", "timeout 1", "call 1", "timeout 2", "call 2", "irq 1"]
    assert m.events == 7  # three call_at, the interrupt, its idle exit and irq time, the tick armed on idle exit


def test_mm_switch_is_charged_only_when_the_address_space_changes():
    # kernel/sched/core.c context_switch(): switch_mm_irqs_off only when next has an mm and it is
    # not the CPU's active one; a kernel thread borrows the previous mm (lazy TLB).
    m = machine(cpus=1, context_switch=1000, mm_switch=300)
    log = []
    script = _logging(m, log)

    p = m.spawn(script("p"), "p")  # a process: its own mm
    t = m.spawn(script("t"), "t", thread_of=p)  # a thread of p: the same mm
    k = m.spawn(script("k"), "k", kthread=True)  # no mm: borrows p's
    t2 = m.spawn(script("t2"), "t2", thread_of=p)  # p's mm is still the active one
    q = m.spawn(script("q"), "q")  # another process: a new mm
    p2 = m.spawn(script("p2"), "p2", thread_of=p)  # back to p's mm
    assert p.mm == t.mm == t2.mm == p2.mm != q.mm and k.mm == 0 and p.mm and q.mm
    run(m, 1 * MS)
    # p: idle mm 0 -> p's (switch 1000 + mm 300) + 10 us = 11300; t: 1000 + 10 us = 22300;
    # k: 1000 + 10 us = 33300; t2: still p's mm, 44300; q: 1300 + 10 us = 55600; p2: 1300 + 10 us
    assert log == [("p", 11_300), ("t", 22_300), ("k", 33_300), ("t2", 44_300), ("q", 55_600), ("p2", 66_900)]
    assert m.cpus[0].active_mm == p.mm


def test_spawn_op_threads_share_the_parent_mm_and_processes_get_their_own():
    from sim.ops import Spawn

    m = machine(cpus=1, context_switch=1000, mm_switch=300, fork=0, exit=0)
    kids = []

    def child(task):
        yield cpu(1_000)

    def parent(task):
        kids.append((yield Spawn(child, "thr", wait=True, exec=False, thread=True)))
        kids.append((yield Spawn(child, "proc", wait=True, exec=False)))

    par = m.spawn(parent, "parent")
    run(m, 1 * MS)
    thr, proc = kids
    assert thr.mm == par.mm and proc.mm not in (0, par.mm)


def test_asid_miss_when_more_mms_take_turns_than_the_cpu_has_pcids():
    # arch/x86/mm/tlb.c choose_new_asid: an mm without one of the CPU's TLB_NR_DYN_ASIDS slots gets
    # the next slot round robin and a flush; one that has a slot switches without a flush.
    from sim.machine import TLB_NR_DYN_ASIDS

    def laps(n):
        m = machine(cpus=1, context_switch=1000, mm_switch=300, asid_miss=5000)
        log = []

        def script(name):
            def s(task):
                for _ in range(3):
                    yield cpu(10_000)
                    log.append((name, m.now))
                    yield sleep(1)  # block: the others run in turn

            return s

        for i in range(n):
            m.spawn(script(i), f"p{i}")
        run(m, 10 * MS)
        return m, [t for _, t in log]

    # six processes: each misses once (its first switch-in), then every switch finds its PCID
    m, times = laps(TLB_NR_DYN_ASIDS)
    first = [t2 - t1 for t1, t2 in zip([0, *times[:5]], times[:6], strict=True)]
    assert first == [1000 + 300 + 5000 + 10_000] * 6
    later = [t2 - t1 for t1, t2 in zip(times[6:], times[7:], strict=False)]
    assert later and all(d == 1000 + 300 + 10_000 for d in later)
    # seven: round robin evicts the mm that comes next, every switch misses
    m, times = laps(TLB_NR_DYN_ASIDS + 1)
    deltas = [t2 - t1 for t1, t2 in zip([0, *times], times, strict=False)]
    assert all(d == 1000 + 300 + 5000 + 10_000 for d in deltas)


def _stepped_and_run(name, overrides):
    """The scenario built twice: once run by Env.run (the inlined loop), once one event at a
    time by Env.step (the CPU's methods); both to the workload's end."""
    from pathlib import Path

    import models
    from sim import scenario as sc

    cat = models.catalog()
    data = sc.load(Path(__file__).resolve().parents[1] / "scenarios" / f"{name}.toml")
    for section, values in overrides.items():
        data[section].update(values)
    scn = sc.validate(data, cat)
    out = []
    for stepped in (False, True):
        m, wl = sc.build(scn, cat)
        tasks = every_task(m)
        if stepped:
            while not m.done.triggered:
                m.env.step()
        else:
            m.env.run(until=m.done)
        out.append(
            (
                m.env.now,
                m.events,
                dict(wl.metrics()),
                [(t.name, t.run_ns, t.vruntime, t.wait_ns, t.nvcsw, t.nivcsw, t.migrations) for t in tasks()],
                [(c.switches, c.ticks, c.ipis, tuple(c.acc)) for c in m.cpus],
            )
        )
    return out


def test_step_reproduces_run_event_for_event():
    # Env.step is not the loop Env.run inlines: same results, bit for bit, or one of them is wrong
    for name, overrides in (
        ("messaging-demo", {"workload": {"groups": 2, "loops": 10}}),
        ("hackbench-rt-2008", {"workload": {"groups": 1, "loops": 3}}),
    ):
        ran, stepped = _stepped_and_run(name, overrides)
        assert ran[0] > 0 and ran[1] > 1000
        assert stepped == ran, name


def test_vplain_and_attn_hold_at_every_event():
    # Task.vplain caches (prio 0, no vcredit, weight 1024) for the loop's charge; a write of prio
    # or vcredit that forgets update_vplain would charge vruntime wrongly without failing elsewhere
    from pathlib import Path

    import models
    from sim import scenario as sc

    cat = models.catalog()
    seen = set()
    for name, overrides in (
        ("messaging-demo", {"kernel": {"sched": "eevdf"}, "workload": {"groups": 2, "loops": 10}}),
        ("hackbench-rt-2008", {"workload": {"groups": 1, "loops": 5}}),
    ):
        data = sc.load(Path(__file__).resolve().parents[1] / "scenarios" / f"{name}.toml")
        for section, values in overrides.items():
            data[section].update(values)
        m, _ = sc.build(sc.validate(data, cat), cat)
        while not m.done.triggered:
            m.env.step()
            for c in m.cpus:
                # CPU.attn is set whenever an irq, a softirq or a reschedule is pending (the
                # loop's one test at a segment's end)
                assert c.attn or not (c.irqs or c.softirq_pending or c.need_resched), (name, c.index)
                t = c.curr
                if t is not None:
                    assert t.vplain == (not t.prio and not t.vcredit and t.weight == 1024), (name, t)
                    seen.add((bool(t.prio), bool(t.vcredit)))
    assert {(False, False), (True, False), (False, True)} <= seen  # each case was met


def test_vplain_follows_a_priority_boost_and_deboost():
    m = machine(cpus=1)
    t = m.spawn(lambda task: iter(()), "t")
    assert t.vplain
    m.set_prio(t, 10)  # a PI boost (models/locks adjust_prio)
    assert not t.vplain
    m.set_prio(t, 0)
    assert t.vplain


def test_cpuwork_takes_no_handler():
    import pytest

    from sim.ops import CpuWork

    m = machine(cpus=1)
    with pytest.raises(TypeError, match="CpuWork"):
        m.handle(CpuWork, lambda cpu, t, op: 0)


def test_a_softirq_raised_by_an_op_runs_when_its_time_ends():
    # raised in task context (not at an irq's exit), the softirq is taken at the end of the op's
    # CPU time, before the task's next op: CPU.attn must have been set by raise_softirq
    from sim.ops import Call

    m = machine(cpus=1)
    log = []

    def handler(cpu):
        log.append(("softirq", m.now))
        return 0, None

    m.register_softirq(5, "test", handler)

    def raise_it(cpu, t):
        cpu.raise_softirq(5)
        return 1_000

    def script(task):
        yield cpu(2_000)
        yield Call(raise_it)
        log.append(("next op", m.now))
        yield cpu(3_000)

    m.spawn(script, "t")
    run(m, 100 * US)
    assert log == [("softirq", 3_000), ("next op", 3_000)]
    c = m.cpus[0]
    c.attn = False
    c.need_resched = True  # any writer of need_resched sets attn
    assert c.attn and c.resched
