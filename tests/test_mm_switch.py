"""Address spaces (Task.mm) and Costs.mm_switch in the workloads: processes get their own mm,
threads share their process's, and the switch cost follows (kernel/sched/core.c context_switch)."""

from __future__ import annotations

from models.workloads.messaging import Messaging, MessagingConfig

from .helpers import machine

COSTS = dict(context_switch=1000, wakeup=300, pipe_send=200, pipe_recv=200, fork=2000, exit=1000, syscall=50)


def _messaging(mode: str, mm_switch: int) -> Messaging:
    m = machine(cpus=1, mm_switch=mm_switch, **COSTS)
    w = Messaging(m, MessagingConfig(groups=1, senders=3, receivers=3, loops=20, mode=mode))  # type: ignore[arg-type]
    m.env.run(until=m.done)
    assert w.delivered == w.total
    return w


def test_messaging_processes_have_their_own_mm_threads_share_the_parent_s():
    proc = _messaging("process", 0)
    thr = _messaging("thread", 0)
    parent_mm = {k.parent.mm for k in proc.children if k.parent is not None}
    assert len({k.mm for k in proc.children}) == len(proc.children) and not parent_mm & {k.mm for k in proc.children}
    assert {k.mm for k in thr.children} == {k.parent.mm for k in thr.children if k.parent is not None}
    # with mm_switch 0 the two modes are the same run, switch for switch
    assert proc.end_ns - proc.start_ns == thr.end_ns - thr.start_ns


def test_mm_switch_slows_processes_not_threads():
    base = _messaging("process", 0)
    proc = _messaging("process", 5000)
    thr = _messaging("thread", 5000)
    assert thr.end_ns - thr.start_ns == base.end_ns - base.start_ns
    assert proc.end_ns - proc.start_ns > base.end_ns - base.start_ns


def test_pi_futex_threads_share_one_mm():
    import models
    from calibration import composites as C
    from calibration.profile import DEFAULT_PROFILE, load_profile
    from sim import scenario as sc

    cat = models.catalog()
    data = C.base_scenario(load_profile(DEFAULT_PROFILE), "pi-mm")
    data["kernel"]["locks"] = {}
    data["workload"] = {"kind": "pi_futex", "threads": 3, "critical_section": 47, "duration": "1 ms"}
    m, _ = sc.build(sc.validate(data, cat), cat, seed=1)
    threads = [t for t in m.tasks.values() if t.name.startswith("pi-")]
    assert len(threads) == 3 and len({t.mm for t in threads}) == 1 and threads[0].mm != 0
    assert all(t.mm == 0 for t in m.tasks.values() if t.kthread)
