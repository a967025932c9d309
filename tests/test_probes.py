"""The side probes (calibration/trace/ring.c, pi_unlock.c): they build warning-free, run without
root, print one parseable line, and refuse bad arguments. Nothing here depends on how fast the
machine is: a ring hop moves the token between two tasks of one CPU, so it takes at least one
context switch whatever the timing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from calibration.trace import probes


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("probes")
    return {name: probes.build(name, d) for name in probes.PROBES}


@pytest.mark.parametrize("mode", ["threads", "processes"])
@pytest.mark.parametrize("policy", ["other", "batch"])
def test_a_ring_reports_its_hops_and_switches(built: dict[str, Path], mode: str, policy: str) -> None:
    cpu = probes.cpus()[-1]
    r = probes.run(built["ring"], 3, 600, mode, policy, cpu)
    assert (r["members"], r["mode"], r["policy"]) == ("3", mode, policy)
    assert float(r["ns_per_hop"]) > 0
    switches = float(r["voluntary_per_hop"]) + float(r["involuntary_per_hop"])
    assert switches >= 0.95, r  # every hop hands the CPU to another task


def test_pi_unlock_reports_ordered_percentiles(built: dict[str, Path]) -> None:
    cpu = probes.cpus()[-1]
    series = [("same_cpu", cpu, cpu)]
    if len(probes.cpus()) >= 2:
        series.append(("cross_spinning", cpu, probes.cpus()[0]))
    for name, owner, waiter in series:
        r = probes.run(built["pi_unlock"], name, 20, owner, waiter)
        assert r["series"] == name and r["rounds"] == "20"
        p10, med, p90 = (float(r[k]) for k in ("p10_ns", "median_ns", "p90_ns"))
        assert 0 < p10 <= med <= p90
        assert float(r["pair_median_ns"]) > 0 and float(r["getppid_median_ns"]) > 0


@pytest.mark.parametrize(
    "name,args,message",
    [
        ("ring", ["1", "10", "threads", "other", "0"], "MEMBERS 2.."),
        ("ring", ["4", "100", "fibers", "other", "0"], "threads|processes"),
        ("pi_unlock", ["sometimes", "20", "0", "0"], "unknown series"),
        ("pi_unlock", ["cross_sleeping", "20", "0", "0"], "two CPUs"),
    ],
)
def test_bad_arguments_exit_2_with_a_reason(built: dict[str, Path], name: str, args: list[str], message: str) -> None:
    done = subprocess.run([str(built[name]), *args], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and done.stdout == ""


def test_the_cli_refuses_bad_sizes_before_building(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        probes.main(["ring", "--members", "1,8"])
    assert e.value.code == 2 and "--members" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        probes.main(["ring", "--members", "two"])
    assert e.value.code == 2


def test_parse_rejects_a_line_that_is_not_key_value() -> None:
    assert probes.parse("a=1 b=x") == {"a": "1", "b": "x"}
    with pytest.raises(ValueError, match="key=value"):
        probes.parse("a=1 oops")


def test_a_missing_compiler_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc-rcusim")
    with pytest.raises(SystemExit, match="no C compiler"):
        probes.build("ring", tmp_path)
    assert not os.listdir(tmp_path)
