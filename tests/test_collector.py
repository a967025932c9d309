"""Tests of the native collector (calibration/collector), pytest and the standard library only.

The collector is built from a copy of its sources in a
temporary directory, so the tests never write into the source tree. The tests that need root
(netns holders, dropping privileges, --modify-system) skip themselves without it;
the --modify-system interrupt test also needs RCUSIM_TEST_MODIFY_SYSTEM=1 because it
writes /sys/kernel/rcu_expedited for a moment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

STATUSES = {"ok", "skipped", "failed"}
STAT_KEYS = {"count", "min", "max", "mean", "stddev", "median", "p90", "p99"}
ITEM_KEYS = {"status", "unit", "method", "params", "duration_s", "samples_total", "samples", "stats", "histogram"}


def _collector_source() -> Path:
    env = os.environ.get("RCUSIM_COLLECTOR_DIR")
    here = Path(__file__).resolve().parent
    candidates = [Path(env)] if env else []
    candidates += [here, *(p / "calibration" / "collector" for p in here.parents)]
    for c in candidates:
        if (c / "Makefile").is_file() and (c / "main.c").is_file():
            return c
    pytest.skip("collector sources not found (set RCUSIM_COLLECTOR_DIR)")


@pytest.fixture(scope="session")
def collector(tmp_path_factory) -> Path:
    if not shutil.which("make") or not shutil.which("gcc"):
        pytest.skip("make and gcc are needed to build the collector")
    src = _collector_source()
    build = tmp_path_factory.mktemp("collector-build")
    for f in src.iterdir():
        if f.suffix in {".c", ".h"} or f.name == "Makefile":
            shutil.copy2(f, build / f.name)
    res = subprocess.run(["make"], cwd=build, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    binary = build / "rcusim-collector"
    assert binary.is_file()
    binary.chmod(0o755)
    return binary


def _item_names(collector: Path) -> list[str]:
    res = subprocess.run([collector, "--list"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _check_item(name: str, item: dict, max_samples: int) -> None:
    assert ITEM_KEYS <= item.keys(), (name, sorted(item))
    assert item["status"] in STATUSES, name
    if item["status"] != "ok":
        assert isinstance(item.get("reason"), str) and item["reason"], name
    else:
        assert "reason" not in item
        assert item["stats"]["count"] > 0, name
    assert isinstance(item["method"], str) and item["method"], name
    assert isinstance(item["params"], dict)
    assert set(item["stats"]) == STAT_KEYS
    assert item["stats"]["count"] == item["samples_total"]
    assert len(item["samples"]) == min(item["samples_total"], max_samples)
    assert all(isinstance(x, (int, float)) for x in item["samples"])
    if item["samples_total"]:
        s = item["stats"]
        assert s["min"] <= s["median"] <= s["p90"] <= s["p99"] <= s["max"]
        assert (
            sum(b[2] for b in item["histogram"]["buckets"]) + item["histogram"]["underflow"] + item["histogram"]["overflow"]
            == item["samples_total"]
        )
    for entry in item.get("series", []):
        assert {"label", "unit", "params", "samples", "stats", "histogram"} <= entry.keys()
        assert len(entry["samples"]) <= max_samples


def test_build_and_cli_basics(collector):
    names = _item_names(collector)
    assert {
        "syscall",
        "context_switch",
        "context_switch_process",
        "cross_cpu_wakeup",
        "fork_exec",
        "membarrier_global",
        "membarrier_global_busy",
        "membarrier_global_expedited",
        "membarrier_private_expedited",
        "futex_handoff",
        "pi_futex_handoff",
        "pipe_message",
        "unix_socket_message",
        "timerfd_arm_cancel",
        "sleep_lateness",
        "netns_create",
        "tool_exec",
        "pi_futex_uncontended",
        "veth_link",
        "wake_placement",
    } <= set(names)
    assert subprocess.run([collector, "--help"], capture_output=True, timeout=30).returncode == 0
    for bad in (["--bogus"], ["--items", "nope"], ["--items"], ["--max-samples", "x"], ["stray"]):
        res = subprocess.run([collector, *bad], capture_output=True, text=True, timeout=30)
        assert res.returncode == 2, bad
        assert res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_quick_run_parses_and_has_every_item(collector, tmp_path):
    out = tmp_path / "p.json"
    start = time.monotonic()
    res = subprocess.run([collector, "--quick", "--out", out], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - start < 120
    assert res.stdout == ""  # progress goes to stderr only
    assert "[1/" in res.stderr
    profile = json.loads(out.read_text())
    assert profile["schema_version"] == 1
    assert profile["kind"] == "rcusim-profile"
    assert profile["collector"]["name"] == "rcusim-collector"
    assert profile["command_line"][1:] == ["--quick", "--out", str(out)]
    for key in ("start_time", "end_time"):
        assert profile[key].endswith("Z") and "T" in profile[key]
    assert isinstance(profile["root"], bool)
    assert profile["options"]["quick"] is True
    machine = profile["machine"]
    for key in (
        "kernel_release",
        "cpus_online",
        "cpus_possible",
        "cpu_model",
        "hz",
        "preemption",
        "rcu_config",
        "cmdline",
        "rcuo_kthreads",
        "rcutree_parameters",
        "rcu_expedited",
        "rcu_normal",
        "timer_migration",
    ):
        assert key in machine, key
    assert {"rcu_nocbs", "nohz_full"} <= machine["cmdline"].keys()
    assert machine["hz"]["method"]
    names = _item_names(collector)
    assert list(profile["items"]) == names
    for name, item in profile["items"].items():
        _check_item(name, item, profile["options"]["max_samples"])
    assert profile["items"]["syscall"]["status"] == "ok"
    assert profile["items"]["context_switch"]["status"] == "ok"
    for name in ("gp_rcu_expedited", "gp_cpu_offline"):
        assert profile["items"][name]["status"] == "skipped"
    idle = profile["items"]["idle_wakeups"]
    if len(os.sched_getaffinity(0)) >= 2 and "LOC:" in Path("/proc/interrupts").read_text():
        # ns between an idle CPU's own timer wakeups: at most the window's measured length (no
        # wakeup in it), which is the planned window plus however late the collector's sleep
        # returned: more than 1 % late on a 2-core CI box running other tests at the same time,
        # so the bound only catches a wrong unit, not a late wakeup
        assert idle["status"] == "ok"
        window = idle["params"]["window_ns"]
        assert all(0 < v <= 1.5 * window for v in idle["samples"])
        labels = [x["label"] for x in idle["series"]]
        n = idle["params"]["measured_cpus"]
        # the idle CPU's context switches come from a cpu-wide perf counter: root (or a permissive
        # kernel.perf_event_paranoid) only
        switches = ["context_switches"] if profile["root"] or "context_switches" in labels else []
        # the RCU grace-period kthread's sleeps while every CPU idles (0.16.0; absent if none is found)
        gp = ["gp_kthread"] if "gp_kthread" in labels else []
        assert labels == [*labels[:n], "timer_softirq", "sched_softirq", *switches, "all_idle", *gp]
        if gp:
            g = idle["series"][-1]["params"]
            assert g["events"] >= 0 and g["seconds"] > 0 and g["kthreads"] >= 1
        wheel = idle["series"][n]
        # the wheel timers are among the local timer interrupts; the totals give the rates
        assert 0 <= wheel["params"]["events"] <= idle["params"]["events"]
        assert wheel["params"]["seconds"] == idle["params"]["seconds"] > 0
        if switches:
            runs = idle["series"][n + 2]["params"]
            assert runs["events"] >= 0 and runs["seconds"] == idle["params"]["seconds"]
    else:
        assert idle["status"] == "skipped" and idle["reason"]
    assert profile["settings_changed"] == []
    assert not list(tmp_path.glob("p.json.tmp.*"))
    # the lock items count their threads' context switches: a sleeping waiter switches out
    # voluntarily, a spinning one does not
    for name in ("futex_handoff", "pi_futex_handoff"):
        for s in profile["items"][name]["series"]:
            assert s["voluntary_switches"] >= 0 and s["involuntary_switches"] >= 0


def test_stdout_mode_is_pure_json(collector):
    res = subprocess.run(
        [collector, "--quick", "--items", "syscall,timerfd_arm_cancel", "--max-samples", "10"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    profile = json.loads(res.stdout)
    assert list(profile["items"]) == ["syscall", "timerfd_arm_cancel"]
    for name, item in profile["items"].items():
        _check_item(name, item, 10)


def test_a_profile_that_cannot_take_its_name_is_kept(collector, tmp_path):
    # the rename at the end fails (the name is a directory now): the measurement is whole in the
    # temporary file, which stays, and the message says where
    out = tmp_path / "taken"
    (out / "x").mkdir(parents=True)
    res = subprocess.run(
        [collector, "--quick", "--items", "syscall", "--max-samples", "10", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1
    kept = list(tmp_path.glob("taken.tmp.*"))
    assert len(kept) == 1 and f"kept in {kept[0]}" in res.stderr
    assert list(json.loads(kept[0].read_text())["items"]) == ["syscall"]


def _run_unprivileged(collector: Path, args: list[str]) -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        return subprocess.run([collector, *args], capture_output=True, text=True, timeout=300)
    if not shutil.which("setpriv"):
        pytest.skip("setpriv is needed to drop root")
    # pytest's temporary directories are private to root: use a world-readable copy
    public = Path(tempfile.mkdtemp(prefix="rcusim-collector-"))
    try:
        public.chmod(0o755)
        binary = public / collector.name
        shutil.copy2(collector, binary)
        binary.chmod(0o755)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=public)
    finally:
        shutil.rmtree(public, ignore_errors=True)


def test_non_root_run_skips_netns_with_reason(collector):
    res = _run_unprivileged(collector, ["--quick", "--items", "syscall,netns_create,idle_wakeups"])
    assert res.returncode == 0, res.stderr
    profile = json.loads(res.stdout)
    assert profile["root"] is False
    netns = profile["items"]["netns_create"]
    assert netns["status"] == "skipped"
    assert "root" in netns["reason"]
    assert netns["samples"] == [] and netns["stats"]["count"] == 0
    assert profile["items"]["syscall"]["status"] == "ok"
    idle = profile["items"]["idle_wakeups"]
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    if idle["status"] == "ok" and paranoid.exists() and int(paranoid.read_text()) > 0:
        # counting a whole CPU's context switches needs root: the item runs without that series
        assert "context_switches" not in [x["label"] for x in idle["series"]]


def _children_of(pid: int) -> set[int]:
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.add(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _interrupt_mid_run(collector: Path, tmp_path: Path, args: list[str], ready) -> tuple:
    """Start the collector, wait until ready() says it is mid-item, SIGINT it."""
    out = tmp_path / "p.json"
    proc = subprocess.Popen([collector, *args, "--out", out], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            seen |= _children_of(proc.pid)
            if ready(seen):
                break
            time.sleep(0.005)
        assert proc.poll() is None, "collector finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read()
    proc.stderr.close()
    time.sleep(0.2)
    return rc, stderr, seen, out


def test_sigint_mid_run_leaves_no_child_and_exits(collector, tmp_path):
    if os.geteuid() == 0:
        # netns_create keeps up to 256 namespace holders alive: interrupt while they exist
        args, ready = ["--items", "netns_create"], (lambda seen: len(seen) >= 20)
    else:
        args, ready = ["--items", "fork_exec"], (lambda seen: len(seen) >= 3)
    rc, stderr, seen, out = _interrupt_mid_run(collector, tmp_path, args, ready)
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert "interrupted by SIGINT" in stderr
    assert seen, "no child process was observed"
    assert not [pid for pid in seen if _alive(pid)]
    assert not out.exists()
    assert not list(tmp_path.glob("p.json.tmp.*"))


def test_sigint_mid_netns_script_kills_the_spawned_command_and_removes_namespaces(collector, tmp_path):
    """The script's commands are forked by the spawner (a child of the collector), so the one
    running at the interrupt is a grandchild: it must die before the namespaces are removed."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip (iproute2)")
    netns_dir = Path("/var/run/netns")
    grandkids: set[int] = set()
    names: list[str] = []

    def ready(seen: set[int]) -> bool:
        for kid in seen:
            grandkids.update(_children_of(kid))
        names[:] = [p.name for p in netns_dir.glob("rcusim-*")] if netns_dir.is_dir() else []
        return len(names) >= 3 and bool(grandkids)

    rc, stderr, seen, out = _interrupt_mid_run(collector, tmp_path, ["--items", "netns_script"], ready)
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert "interrupted by SIGINT" in stderr
    assert names and grandkids
    assert not [pid for pid in seen | grandkids if _alive(pid)]
    left = [p.name for p in netns_dir.glob("rcusim-*")] if netns_dir.is_dir() else []
    assert not [n for n in left if n in names], left
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    ours = [name for line in links.splitlines() if re.fullmatch(r"rs\d+[oghi]\d+", name := line.split(": ")[1].split("@")[0])]
    assert not ours, ours
    assert not out.exists()


def test_sigint_mid_messaging_kills_the_spawners_workers(collector, tmp_path):
    """messaging's senders and receivers are children of the spawner (grandchildren of the
    collector): an interrupt must take them all down."""
    grandkids: set[int] = set()

    def ready(seen: set[int]) -> bool:
        for kid in seen:
            grandkids.update(_children_of(kid))
        return len(grandkids) >= 20

    rc, stderr, seen, out = _interrupt_mid_run(collector, tmp_path, ["--items", "messaging"], ready)
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert len(grandkids) >= 20
    assert not [pid for pid in seen | grandkids if _alive(pid)]
    assert not out.exists()


# It changes a system setting (and checks the collector puts it back), so it runs only where that
# is expected: in CI (a throwaway machine) or when asked for.
@pytest.mark.skipif(
    os.environ.get("RCUSIM_TEST_MODIFY_SYSTEM") != "1" and os.environ.get("CI") != "true",
    reason="writes /sys/kernel/rcu_expedited; set RCUSIM_TEST_MODIFY_SYSTEM=1 (CI=true implies it)",
)
def test_sigint_restores_changed_setting(collector, tmp_path):
    path = Path("/sys/kernel/rcu_expedited")
    if os.geteuid() != 0 or not path.exists():
        pytest.skip("needs root and /sys/kernel/rcu_expedited")
    before = path.read_text().strip()
    target = "1" if before != "1" else None
    if target is None:
        pytest.skip("rcu_expedited is already 1; a change would not be visible")
    rc, stderr, _, out = _interrupt_mid_run(
        collector, tmp_path, ["--modify-system", "--items", "gp_rcu_expedited"], lambda seen: path.read_text().strip() == target
    )
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert path.read_text().strip() == before
    assert not out.exists()
