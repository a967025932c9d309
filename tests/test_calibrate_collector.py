"""The collector items the calibration added (pipe_costs, irq_cost, messaging, netns_script,
veth_link, context_switch_process) and `rcusim collect`: output validated by the schema, the non-root path, and cleanup
of every namespace and veth pair when netns_script or veth_link is interrupted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from app.cli import main
from calibration.profile import SCHEMA_FILE, load_profile
from tests.test_collector import _alive, _interrupt_mid_run, _run_unprivileged, collector  # noqa: F401 - the session fixture

NETNS_DIR = Path("/var/run/netns")


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def test_new_items_quick_run_validates(collector, tmp_path):  # noqa: F811
    out = tmp_path / "p.json"
    items = "pipe_costs,irq_cost,messaging,fork_exec,netns_script"
    res = subprocess.run([collector, "--quick", "--items", items, "--out", out], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    prof = load_profile(out)
    pipe = prof.item("pipe_costs")
    labels = {s.label for s in pipe.series or ()}
    assert {"write", "read", "clock_read", "write_wakes_local_reader"} <= labels
    assert {s.label for s in prof.item("fork_exec").series or ()} == {"fork_exec_wait", "fork_exit_wait", "fork_call"}
    irq = prof.item("irq_cost")
    assert {"tick", "hrtimer"} <= {s.label for s in irq.series or ()}
    msg = prof.item("messaging")
    assert msg.params["held_back"] is True
    for s in msg.series or ():
        assert s.samples_total >= 1 and s.params["messages"] == s.params["groups"] * 20 * 20 * s.params["loops"]
        assert s.params["voluntary_switches_per_run"] >= 0
    ns = prof.items["netns_script"]
    if os.geteuid() == 0 and shutil.which("ip"):
        assert ns.status == "ok", ns.reason
        assert ns.routers_per_s is not None and ns.routers_per_s.overall > 0
        assert {s.label for s in ns.series or ()} == {"netns_add", "exec_lo_up", "exec_sysctl", "veth_add_1", "veth_add_2"}
        pid_prefix = "rcusim-"
        assert not [p for p in NETNS_DIR.glob(f"{pid_prefix}*")] if NETNS_DIR.exists() else True
    else:
        assert ns.status == "skipped"


def test_netns_script_skips_without_root(collector):  # noqa: F811
    res = _run_unprivileged(collector, ["--quick", "--items", "netns_script,pipe_costs"])
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    ns = prof["items"]["netns_script"]
    assert ns["status"] == "skipped" and "root" in ns["reason"]
    assert prof["items"]["pipe_costs"]["status"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and ip (iproute2)")
def test_sigint_during_netns_script_removes_every_namespace_and_veth(collector, tmp_path):  # noqa: F811
    dir_existed = NETNS_DIR.exists()
    out = tmp_path / "p.json"
    proc = subprocess.Popen(
        [collector, "--items", "netns_script", "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    prefix = f"rcusim-{proc.pid}-"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if NETNS_DIR.exists() and len(list(NETNS_DIR.glob(f"{prefix}*"))) >= 4:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "netns_script finished before it could be interrupted"
        assert f"rs{proc.pid % 10_000_000}o" in _links()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert "interrupted by SIGINT" in stderr
    assert not (NETNS_DIR.exists() and list(NETNS_DIR.glob(f"{prefix}*")))
    links = _links()
    for kind in "oigh":
        assert f"rs{proc.pid % 10_000_000}{kind}" not in links
    assert NETNS_DIR.exists() == dir_existed or list(NETNS_DIR.iterdir())
    assert not out.exists()


def test_collect_verb_runs_validates_and_writes(collector, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "c.json"
    rc = main(["collect", "--quick", "--items", "syscall,timerfd_arm_cancel", "--collector", str(collector), "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 0, err
    assert "[1/2] syscall" in err  # progress lines (no terminal: printed as they come)
    assert f"profile written to {out}" in stdout
    prof = load_profile(out)
    assert list(prof.items) == ["syscall", "timerfd_arm_cancel"]
    rc = main(["collect", "--items", "syscall,nope", "--collector", str(collector), "--out", str(out)])
    assert rc == 2 and "--items: unknown item 'nope'" in capsys.readouterr().err


def test_component_items_quick_run_validates(collector, tmp_path):  # noqa: F811
    out = tmp_path / "p.json"
    items = "tool_exec,pi_futex_uncontended"
    res = subprocess.run([collector, "--quick", "--items", items, "--out", out], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    prof = load_profile(out)
    assert list(prof.items) == ["tool_exec", "pi_futex_uncontended"]
    tools = prof.items["tool_exec"]
    if all(shutil.which(t) for t in ("ip", "sysctl", "true")):
        assert tools.status == "ok", tools.reason
        series = {s.label: s for s in tools.series or ()}
        assert set(series) == {"true", "ip_version", "sysctl_read"}
        assert series["ip_version"].params["command"][1:] == ["-V"]
        assert all(s.samples_total == tools.params["rounds"] for s in series.values())
        assert tools.samples == series["ip_version"].samples
    else:
        assert tools.status == "skipped" and "not found" in (tools.reason or "")
    pi = prof.item("pi_futex_uncontended")
    assert {s.label for s in pi.series or ()} == {"lock_unlock_pair", "syscall_baseline", "trylock_owned"}
    assert pi.samples_total == pi.params["batches"]
    assert all(s.samples_total == pi.params["batches"] for s in pi.series or ())


def test_component_items_run_without_root(collector):  # noqa: F811
    res = _run_unprivileged(collector, ["--quick", "--items", "tool_exec,pi_futex_uncontended"])
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    assert prof["items"]["pi_futex_uncontended"]["status"] == "ok"
    assert prof["items"]["tool_exec"]["status"] in ("ok", "skipped")


def test_context_switch_process_quick_run_validates(collector, tmp_path):  # noqa: F811
    out = tmp_path / "p.json"
    res = subprocess.run(
        [collector, "--quick", "--items", "context_switch_process", "--out", out], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    raw = json.loads(out.read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(raw, json.loads(SCHEMA_FILE.read_text()))
    item = load_profile(out).item("context_switch_process")
    assert item.status == "ok" and item.unit == "ns"
    assert item.params["execution_context"] == "processes" and item.params["cpu_a"] == item.params["cpu_b"]
    series = {s.label: s for s in item.series or ()}
    assert set(series) == {"threads", "ring8_threads", "ring8_processes"}
    threads = series["threads"]
    assert threads.params["execution_context"] == "threads"
    # interleaved rounds: as many process batches as thread batches
    assert item.samples_total == threads.samples_total == item.params["batches"]
    for label in ("ring8_threads", "ring8_processes"):
        ring = series[label]
        assert ring.params["ring_members"] == 8 and ring.samples_total == ring.params["batches"] > 0
        assert ring.params["execution_context"] == label.split("_")[1]
    assert all(x > 0 for s in series.values() for x in s.samples) and all(x > 0 for x in item.samples)


def test_context_switch_process_runs_without_root_and_leaves_no_child(collector, tmp_path):  # noqa: F811
    res = _run_unprivileged(collector, ["--quick", "--items", "context_switch_process"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["items"]["context_switch_process"]["status"] == "ok"
    # interrupted while the ring of processes runs (seven children at once)
    rc, stderr, seen, out = _interrupt_mid_run(
        collector, tmp_path, ["--items", "context_switch_process"], lambda seen: len(seen) >= 7
    )
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert seen and not [pid for pid in seen if _alive(pid)]
    assert not out.exists()


VETH_SERIES = {
    "create_peer_netns",
    "create_one_queue",
    "create_one_tx_queue",
    "create_same_netns",
    "move_netns",
    "delete",
    "request_baseline",
    "lo_up",
}


def _netns_ids() -> set[str]:
    """Network namespaces referenced by any process (their /proc/PID/ns/net links)."""
    out = set()
    for link in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            out.add(os.readlink(link))
        except OSError:
            continue
    return out


def test_veth_link_quick_run_validates_and_leaves_nothing(collector, tmp_path):  # noqa: F811
    out = tmp_path / "p.json"
    links_before = _links() if shutil.which("ip") else ""
    res = subprocess.run(
        [collector, "--quick", "--items", "veth_link", "--out", out], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    prof = load_profile(out)
    item = prof.items["veth_link"]
    if os.geteuid() != 0:
        assert item.status == "skipped" and "root" in (item.reason or "")
        return
    assert item.status == "ok", item.reason
    series = {s.label: s for s in item.series or ()}
    assert set(series) == VETH_SERIES
    rounds = item.params["rounds"]
    for label in ("create_peer_netns", "create_one_queue", "create_one_tx_queue", "create_same_netns", "request_baseline"):
        assert series[label].samples_total == rounds, label
    assert series["move_netns"].samples_total == 2 * rounds
    assert series["delete"].samples_total == item.params["deletes"]
    assert series["lo_up"].samples_total == item.params["lo_namespaces"]
    assert item.samples == series["create_peer_netns"].samples
    assert all(v > 0 for s in series.values() for v in s.samples)
    # every device lived in the children's namespaces: the root namespace's links are unchanged
    if shutil.which("ip"):
        assert _links() == links_before


def test_veth_link_skips_without_root(collector):  # noqa: F811
    res = _run_unprivileged(collector, ["--quick", "--items", "veth_link,syscall"])
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    item = prof["items"]["veth_link"]
    assert item["status"] == "skipped" and "needs root" in item["reason"]
    assert item["samples"] == [] and item["stats"]["count"] == 0
    assert prof["items"]["syscall"]["status"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_sigint_during_veth_link_leaves_no_child_or_namespace(collector, tmp_path):  # noqa: F811
    before = _netns_ids()
    links_before = _links() if shutil.which("ip") else ""
    # the router and the requesting child exist from the start of the item
    rc, stderr, seen, out = _interrupt_mid_run(collector, tmp_path, ["--items", "veth_link"], lambda seen: len(seen) >= 2)
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT), stderr
    assert "interrupted by SIGINT" in stderr
    assert seen and not [pid for pid in seen if _alive(pid)]
    assert not out.exists()
    # the children's namespaces were held only by them (cleanup_net frees them asynchronously)
    assert _netns_ids() <= before
    if shutil.which("ip"):
        assert _links() == links_before


def test_wake_by_sleep_age_series(collector, tmp_path):  # noqa: F811
    out = tmp_path / "p.json"
    res = subprocess.run(
        [collector, "--quick", "--items", "wake_by_sleep_age", "--out", out], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    prof = load_profile(out)
    it = prof.item("wake_by_sleep_age")
    if prof.cpus < 2:
        assert it.status == "skipped" and "CPU" in it.reason
        return
    assert it.status == "ok", it.reason
    series = list(it.series or ())
    delays = [int(s.params["delay_ns"]) for s in series]
    assert delays == sorted(set(delays)) and delays[0] == 0 and delays[-1] >= 40_000
    assert [s.label for s in series] == [f"d_{d}ns" for d in delays]
    trials = int(it.params["trials_per_delay"])
    for s in series:
        # every trial is either a sample (the sleeper slept and was woken) or counted as not asleep
        assert s.samples_total + int(s.params["not_asleep"]) == trials
        assert all(v > 0 for v in s.samples)
    # a wakeup 40 us or more after FUTEX_WAIT finds the sleeper asleep every time
    assert all(int(s.params["not_asleep"]) == 0 for s in series if int(s.params["delay_ns"]) >= 40_000)
    assert it.samples == series[-1].samples
