"""calibration.trace.pi_trace: the scheduler-trace reader and the model's side of it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from calibration.trace.pi_trace import HERE, model, report, wake_ages

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
    assert rows == [(20_000, 25_000), (1_000, 3_000)]
    assert wake_ages(TRACE.splitlines(), {5}) == []


def test_report_bins_by_age():
    text = report([(20_000, 25_000), (1_000, 3_000)], 1.0, "t")
    assert "2 wakeups" in text and "woken   1-2   us" in text and "woken  20-50  us" in text
    assert report([], 1.0, "t").endswith("no wakeup of a sleeping thread")


def test_the_model_side_runs_the_validation_scenario():
    # three threads on two CPUs convoy all the time: every handoff wakes a sleeper
    rows, title = model("calibration/profiles/default.json", None, 0.05, 3, 1)
    assert "model (default.json, seed 1), 3 threads" in title
    assert len(rows) > 100 and all(age > 0 and run > 0 for age, run in rows)
    assert rows == model("calibration/profiles/default.json", None, 0.05, 3, 1)[0]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_pi_loop_builds_warning_free_and_runs(tmp_path):
    exe = tmp_path / "pi_loop"
    cc = ["gcc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-o", str(exe)]
    subprocess.run([*cc, str(HERE / "pi_loop.c"), "-lpthread"], check=True)
    out = subprocess.run([str(exe), "0.05"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("tids ") and len(out.splitlines()[0].split()) == 3 and "rate" in out
    assert subprocess.run([str(exe), "0"], capture_output=True).returncode == 2
