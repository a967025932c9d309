"""calibration.trace.pi_trace: the scheduler-trace reader and the model's side of it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from calibration.trace.pi_trace import HERE, convoys, handoff_races, model, report, sched_events, wake_ages

TRACE = """\
  101 [001] 10.000000000: sched:sched_switch: prev_comm=pi_loop prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
  102 [000] 10.000020000: sched:sched_waking: comm=pi_loop pid=101 prio=120 target_cpu=001
    0 [001] 10.000045000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=pi_loop next_pid=101 next_prio=120
  102 [000] 10.000050000: sched:sched_switch: prev_comm=pi_loop prev_pid=102 prev_prio=120 prev_state=R+ ==> next_comm=kworker next_pid=7 next_prio=120
    7 [000] 10.000060000: sched:sched_switch: prev_comm=kworker prev_pid=7 prev_prio=120 prev_state=I ==> next_comm=pi_loop next_pid=102 next_prio=120
  102 [000] 10.000070000: sched:sched_switch: prev_comm=pi_loop prev_pid=102 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
  101 [001] 10.000071000: sched:sched_waking: comm=pi_loop pid=102 prio=120 target_cpu=000
  101 [001] 10.000071500: sched:sched_waking: comm=pi_loop pid=102 prio=120 target_cpu=000
    0 [000] 10.000074000: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=pi_loop next_pid=102 next_prio=120
    5 [000] 10.000080000: sched:sched_waking: comm=other pid=5 prio=120 target_cpu=000
"""


def test_wake_ages_pairs_each_sleep_with_its_first_wakeup_and_the_next_run():
    rows = wake_ages(TRACE.splitlines(), {101, 102})
    # 101: slept at 0, woken at 20 us, ran at 45 us; 102's preemption (state R+) is no sleep;
    # 102: slept at 70 us, woken at 71 us (the second waking is ignored), ran at 74 us
    assert rows == [(10_000_020_000, 20_000, 25_000), (10_000_071_000, 1_000, 3_000)]
    assert wake_ages(TRACE.splitlines(), {5}) == []


def test_report_bins_by_age():
    text = report([(0, 20_000, 25_000), (51_000, 1_000, 3_000)], 1.0, "t")
    assert "2 wakeups" in text and "woken   1-2   us" in text and "woken  20-50  us" in text
    assert "convoys (wakeups less than 100 us apart): 1/s, 0 % of one wakeup" in text


def test_sched_events_and_handoff_races():
    ev = sched_events(TRACE.splitlines(), {101, 102})
    assert ev[:3] == [(10_000_000_000, "sleep", 101, -1), (10_000_020_000, "wake", 101, 102), (10_000_045_000, "run", 101, -1)]
    # 102 woke 101 at 20 us and slept only at 70 us, after 101 ran (45 us): the wakee ran first;
    # 101 woke 102 at 71 us (the second waking is a duplicate) and 102 ran at 74 us, 101 never slept
    assert handoff_races(ev, {101, 102}) == [(25_000, 25_000, True), (3_000, 3_000, True)]
    # a convoy handoff: A wakes B, A sleeps 8 us later, B runs 24 us after the wakeup
    conv = [(0, "wake", 2, 1), (8_000, "sleep", 1, -1), (24_000, "run", 2, -1)]
    assert handoff_races(conv, {1, 2}) == [(8_000, 24_000, False)]
    text = report([(0, 20_000, 25_000)], 1.0, "t", handoff_races(conv, {1, 2}))
    assert "the wakee ran first in 0 of 1 (0.0 %)" in text and "8.0 / 8.0 / 8.0 us" in text


def test_convoys_split_where_wakeups_are_far_apart():
    assert convoys([0, 30_000, 60_000, 500_000, 2_000_000, 2_050_000]) == [3, 1, 2]
    assert convoys([]) == []
    assert report([], 1.0, "t").endswith("no wakeup of a sleeping thread")


def test_the_model_side_runs_the_validation_scenario():
    # three threads on two CPUs convoy all the time: every handoff wakes a sleeper
    rows, races, title = model("calibration/profiles/default.json", None, 0.05, 3, 1)
    assert "model (default.json, seed 1), 3 threads" in title
    assert len(rows) > 100 and all(age > 0 and run > 0 for _, age, run in rows)
    assert races == [] and rows == model("calibration/profiles/default.json", None, 0.05, 3, 1)[0]
    # two threads: each wakeup's waker is the other thread, so the races are counted
    rows2, races2, _ = model("calibration/profiles/default.json", None, 0.2, 2, 1)
    assert len(races2) == len(rows2) > 0


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_pi_loop_builds_warning_free_and_runs(tmp_path):
    exe = tmp_path / "pi_loop"
    cc = ["gcc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-o", str(exe)]
    subprocess.run([*cc, str(HERE / "pi_loop.c"), "-lpthread"], check=True)
    out = subprocess.run([str(exe), "0.05"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("tids ") and len(out.splitlines()[0].split()) == 3 and "rate" in out
    assert subprocess.run([str(exe), "0"], capture_output=True).returncode == 2
