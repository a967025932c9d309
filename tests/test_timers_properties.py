"""Timer invariants on random machines and random scripts (Hypothesis).

* no timer fires before its expiry;
* every armed timer that is neither cancelled nor re-armed fires exactly once;
* a cancelled (or re-armed) arming never fires;
* with the pull model, the global timers of idle CPUs are expired by an active CPU or by
  their own CPU waking, never lost; and the hierarchy's state stays consistent.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from models.timers.config import TimersConfig
from models.timers.model import TimersModel
from models.timers.ops import ScheduleTimeout, TimerArm, TimerCancel
from models.timers.wheel import Timer
from sim.ops import CpuWork, Sleep
from sim.units import MS, US, S

from .helpers import machine

op = st.one_of(
    st.tuples(st.just("arm"), st.integers(0, 5), st.integers(0, 400 * MS), st.booleans()),
    st.tuples(st.just("cancel"), st.integers(0, 5)),
    st.tuples(st.just("sleep_timeout"), st.integers(0, 6)),
    st.tuples(st.just("cpu"), st.integers(0, 30 * MS)),
    st.tuples(st.just("nanosleep"), st.integers(0, 20 * MS)),
)


@st.composite
def cases(draw):
    cpus = draw(st.integers(1, 10))
    mode = draw(st.sampled_from(["off", "push", "pull"]))
    states = draw(st.booleans())
    cfg = dict(
        timer_migration=mode,
        nohz_full=tuple(sorted(draw(st.sets(st.integers(0, cpus - 1), max_size=cpus - 1)))),
        domain_spans=tuple(sorted(draw(st.sets(st.sampled_from([2, 4]), max_size=2)))),
        tmigr_children_per_group=draw(st.sampled_from([2, 4, 8])),
        timer_op=draw(st.integers(0, 200)),
        cache_line_transfer=draw(st.integers(0, 100)),
        tmigr_level=draw(st.integers(0, 100)),
    )
    if states:
        cfg.update(idle_state_names=("C1", "C2"), idle_exit_latency=(1 * US, 300 * US), idle_target_residency=(2 * US, 600 * US))
    mcfg = dict(
        cpus=cpus,
        hz=draw(st.sampled_from([100, 250, 1000])),
        nohz_idle=draw(st.booleans()),
        preempt=draw(st.sampled_from(["voluntary", "full"])),
        idle_exit=draw(st.integers(0, 50 * US)),
        tick=draw(st.integers(0, 2 * US)),
        ipi_latency=draw(st.integers(0, 3 * US)),
        context_switch=draw(st.integers(0, 3 * US)),
    )
    tasks = [
        (draw(st.lists(op, min_size=1, max_size=12)), draw(st.sampled_from([None, "pinned"])))
        for _ in range(draw(st.integers(1, 5)))
    ]
    return mcfg, cfg, tasks, draw(st.integers(0, 2**32))


def simulate(mcfg, cfg, tasks, seed):
    m = machine(seed=seed, **mcfg)
    model = TimersModel(m, TimersConfig(**cfg))
    model.log = []
    pool = [Timer(f"t{i}", lambda c, t: 0, pinned=(i == 5)) for i in range(6)]
    for k, (script, pin) in enumerate(tasks):
        ops = []
        for o in script:
            if o[0] == "arm":
                ops.append(TimerArm(pool[o[1]], o[2]))
            elif o[0] == "cancel":
                ops.append(TimerCancel(pool[o[1]]))
            elif o[0] == "sleep_timeout":
                ops.append(ScheduleTimeout(jiffies=o[1]))
            elif o[0] == "cpu":
                ops.append(CpuWork(o[1]))
            else:
                ops.append(Sleep(o[1]))

        def s(task, ops=ops):
            for o in ops:  # noqa: UP028 - the machine send()s op results, which a list iterator refuses
                yield o

        m.spawn(s, f"task{k}", affinity=(k % mcfg["cpus"],) if pin else None)
    # long enough for every task to end and every armed timer (<= 400 ms, level <= 2) to
    # expire; in steps, so that a livelock (a timer never handled, its CPU woken again and
    # again) fails instead of hanging
    for k in range(1, 51):
        m.env.run(until=k * S // 10)
        assert m.events < 400_000, f"livelock: {m.events} events by {m.now} ns"
    return m, model


def check(m, model):
    open_: dict[int, tuple[int, int]] = {}  # timer id -> (arm index, due_ns) of its pending arming
    fired_per_arm: dict[int, int] = {}
    for i, e in enumerate(model.log):
        kind = e[0]
        if kind == "arm":
            _, now, cpu, t, due, was_pending = e
            assert was_pending == (id(t) in open_)
            open_[id(t)] = (i, due)  # a re-arm supersedes the pending arming
            fired_per_arm[i] = 0
        elif kind == "cancel":
            t = e[3]
            assert id(t) in open_, "cancel of a timer that was not pending"
            del open_[id(t)]
        else:
            _, now, cpu, base_cpu, t, due = e
            assert id(t) in open_, f"{t} fired although it was not pending (cancelled or re-armed)"
            arm, due_at_arm = open_.pop(id(t))
            assert due == due_at_arm
            assert now >= due, f"{t} fired at {now}, before its expiry {due}"
            fired_per_arm[arm] += 1
    # nothing left pending: every arming that was not cancelled or re-armed fired, once
    assert not open_, f"lost timers: {open_}"
    assert all(n <= 1 for n in fired_per_arm.values())
    # every task ended (its schedule_timeout wakeups were not lost)
    assert all(t.state == 2 for t in m.tasks.values() if not t.kthread), [t for t in m.tasks.values() if t.state != 2]
    if model.tmigr is not None:
        model.tmigr.check()
        # every CPU's queued event belongs to an idle CPU and nothing due is left behind
        assert all(ev > m.now or not idle for ev, idle in zip(model.tmigr.evt, model.tmigr.idle, strict=True))


@settings(max_examples=60)
@given(cases())
def test_timer_invariants(case):
    mcfg, cfg, tasks, seed = case
    m, model = simulate(mcfg, cfg, tasks, seed)
    check(m, model)


@settings(max_examples=30)
@given(cases())
def test_same_seed_same_timeline(case):
    mcfg, cfg, tasks, seed = case
    _, a = simulate(mcfg, cfg, tasks, seed)
    _, b = simulate(mcfg, cfg, tasks, seed)

    def key(log):
        return [
            (e[0], e[1], e[2], e[3] if e[0] == "fire" else 0, getattr(e[3] if e[0] != "fire" else e[4], "name", "")) for e in log
        ]

    assert key(a.log) == key(b.log)


@st.composite
def pull_cases(draw):
    """Pull model: sleepers and timer armers pinned to CPUs, and busy CPUs (migrators) that
    come and go while the timers of idle CPUs are due."""
    cpus = draw(st.integers(2, 12))
    mcfg = dict(
        cpus=cpus,
        hz=draw(st.sampled_from([100, 250, 1000])),
        nohz_idle=True,
        idle_exit=draw(st.integers(0, 50 * US)),
        tick=draw(st.integers(0, 2 * US)),
        ipi_latency=draw(st.integers(0, 3 * US)),
    )
    cfg = dict(
        timer_migration="pull", tmigr_children_per_group=draw(st.sampled_from([2, 4, 8])), tmigr_level=draw(st.integers(0, 50))
    )
    tasks = []
    for _ in range(draw(st.integers(1, 6))):
        script = draw(
            st.lists(
                st.one_of(
                    st.tuples(st.just("sleep_timeout"), st.integers(0, 8)),
                    st.tuples(st.just("arm"), st.integers(0, 4), st.integers(0, 100 * MS), st.just(False)),
                    st.tuples(st.just("cpu"), st.integers(0, 60 * MS)),
                ),
                min_size=1,
                max_size=8,
            )
        )
        tasks.append((script, "pinned"))
    return mcfg, cfg, tasks, draw(st.integers(0, 2**32))


@settings(max_examples=60)
@given(pull_cases())
def test_pull_never_loses_an_idle_cpus_global_timer(case):
    mcfg, cfg, tasks, seed = case
    m, model = simulate(mcfg, cfg, tasks, seed)
    check(m, model)
    fires = [e for e in model.log if e[0] == "fire"]
    # an idle CPU's global timer is expired either by another CPU or by its own CPU waking
    assert all(e[2] == e[3] or not e[4].pinned for e in fires)
