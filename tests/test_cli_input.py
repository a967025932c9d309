"""Bad input the CLI refuses before any work, in one line naming the field (exit code 2): output
paths that would overwrite an input or cannot be written, empty names, options that do not apply,
duplicates, absurd costs, unresolvable addresses, empty params files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from calibration.profile import DEFAULT_PROFILE
from tests.helpers import cli_error as fails

SCENARIO = Path("scenarios/gp-latency.toml")
SMALL = ["--set", "workload.calls=3", "--no-progress"]


def test_run_refuses_a_trace_over_its_own_scenario_or_params(tmp_path, capsys):
    scn = tmp_path / "mine.toml"
    shutil.copy(SCENARIO, scn)
    before = scn.read_bytes()
    fails(["run", str(scn), *SMALL, "--trace", str(scn)], capsys, "--trace", "input")
    assert scn.read_bytes() == before
    params = tmp_path / "p.toml"
    params.write_text("[costs]\nwakeup = 1000\n")
    fails(["run", str(scn), *SMALL, "--params", str(params), "--trace", str(params)], capsys, "--trace", "overwritten")
    assert params.read_text() == "[costs]\nwakeup = 1000\n"


def test_run_refuses_empty_names_and_directories(tmp_path, capsys):
    fails(["run", "gp-latency", *SMALL, "--trace", ""], capsys, "--trace", "empty")
    fails(["run", "", *SMALL], capsys, "SCENARIO", "empty")
    fails(["run", str(tmp_path), *SMALL], capsys, "directory")
    fails(["run", "gp-latency", *SMALL, "--trace", str(tmp_path)], capsys, "--trace", "directory")


def test_unwritable_outputs_are_refused_before_the_work(capsys):
    fails(["run", "gp-latency", *SMALL, "--trace", "/proc/rcusim-nope.json"], capsys, "--trace", "cannot write")
    fails(["calibrate", str(DEFAULT_PROFILE), "--out", "/proc/rcusim-nope.toml", "--no-progress"], capsys, "--out")


def test_calibrate_never_overwrites_its_profile(tmp_path, capsys):
    prof = tmp_path / "me.json"
    shutil.copy(DEFAULT_PROFILE, prof)
    before = prof.read_bytes()
    fails(["calibrate", str(prof), "--out", str(prof), "--no-progress"], capsys, "--out", ".toml")
    fails(["calibrate", str(prof), "--out", str(tmp_path / "p.toml"), "--report", str(prof)], capsys, "--report", "input")
    out = str(tmp_path / "p.toml")
    fails(["calibrate", str(prof), "--out", out, "--report", out], capsys, "--report", "--out")
    fails(["calibrate", str(prof), "--bootstrap", "-1"], capsys, "--bootstrap")
    fails(["calibrate", str(prof), "--bootstrap", "1"], capsys, "--bootstrap", "at least 40")
    assert prof.read_bytes() == before
    assert not (tmp_path / "p.toml").exists()  # the probe leaves nothing behind


def test_a_cost_of_seconds_is_a_unit_mistake(capsys):
    fails(["run", "gp-latency", *SMALL, "--set", "costs.wakeup=1e19"], capsys, "costs.wakeup", "unit")
    fails(["run", "gp-latency", *SMALL, "--set", "costs.tick=11 s"], capsys, "costs.tick")


def test_params_files_that_hold_nothing_or_bad_values_are_named(tmp_path, capsys):
    empty = tmp_path / "empty.toml"
    empty.write_text("# rcusim calibrated parameters\n")
    fails(["run", "gp-latency", *SMALL, "--params", str(empty)], capsys, "empty.toml", "no parameters")
    bad = tmp_path / "kr.toml"
    bad.write_text('[kernel.rcu]\nnocb = "some"\n')
    fails(["run", "gp-latency", *SMALL, "--params", str(bad)], capsys, "kr.toml", "kernel.rcu.nocb")
    # the same value from --set is the command line's, not the file's
    line = fails(["run", "gp-latency", *SMALL, "--params", str(bad), "--set", "kernel.rcu.nocb=some"], capsys)
    assert "kr.toml" not in line


def test_validate_refuses_params_without_a_profile_and_duplicates(capsys):
    fails(["validate", "rcu-sync-2015", "--params", "calibration/profiles/default-params.toml"], capsys, "--params", "--profile")
    fails(["validate", "rcu-sync-2015", "rcu-sync-2015"], capsys, "NAME", "twice")
    p = str(DEFAULT_PROFILE)
    fails(["validate", "--profile", p, p], capsys, "--profile", "twice")


def test_app_refuses_an_address_that_does_not_resolve(capsys):
    fails(["app", "--address", "not an address", "--dry-run"], capsys, "--address")


def test_compare_names_a_validation_file_of_the_wrong_shape(tmp_path, capsys):
    f = tmp_path / "list.json"
    f.write_text(json.dumps([1, 2]))
    fails(["compare", "scenarios/patches/pipe-cost-30.toml", "-n", "2", "--validation", str(f)], capsys, "--validation", "rows")


def test_a_membarrier_command_the_kernel_era_lacks_says_which_era_has_it(capsys):
    urcu = ["run", "urcu-membarrier-2020", "--set", "workload.membarrier=global_expedited", "--set", "workload.duration=1 ms"]
    fails([*urcu, "--no-progress"], capsys, "EINVAL", "kernel.membarrier.era")


def test_a_negative_duration_with_a_unit_is_called_negative(capsys):
    fails(["run", "gp-latency", *SMALL, "--set", "costs.wakeup=-1 us"], capsys, "costs.wakeup", "negative")
