"""rcusim sweep and bad input: one clear line naming the field and the fix, exit code 2, nothing
run and the output file left as it was. A resume never mixes rows of another sweep (another
scenario, --set or seed) into a file; an output that cannot be written, a file that is not a
sweep, a scheduler address that is not one and an unknown --metric are refused cleanly."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from calibration import sweep as sw

ROOT = Path(__file__).resolve().parents[1]
# tiny runs: gp-latency with 3 synchronize_rcu() calls, rcu-sync-2015 with 3 pairs
GP = ["sweep", "gp-latency", "--grid", "machine.cpus=1,2", "--set", "workload.calls=3", "--workers", "1"]
SYNC = ["sweep", "rcu-sync-2015", "--grid", "machine.cpus=1,2", "--set", "workload.pairs=3", "--workers", "1"]


def run_cli(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(rc: int, err: str) -> str:
    """The single error line of a refused command."""
    lines = [x for x in err.strip().splitlines() if not x.startswith("rcusim: plain Python")]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("rcusim: error: "), (rc, err)
    return lines[0]


@pytest.fixture
def no_runs(monkeypatch):
    """Fail the test if any simulation starts (--workers 1 runs the jobs in this process)."""

    def refuse(job):
        raise AssertionError(f"a run started: {job.key}")

    monkeypatch.setattr(sw, "run_job", refuse)


# ---------------------------------------------------------------------------------- 1: resume
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_resume_into_a_sweep_of_another_scenario_is_refused(tmp_path, capsys, suffix, request):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"rw{suffix}"
    rc, stdout, err = run_cli([*GP, "--out", str(out)], capsys)
    assert rc == 0 and "2 rows (2 run(s))" in stdout, err
    before = out.read_bytes()
    request.getfixturevalue("no_runs")
    line = one_error(*run_cli([*SYNC, "--out", str(out)], capsys)[::2])
    assert f"--out {out}" in line and "holds a different sweep" in line
    assert "'gp-latency'" in line and "'rcu-sync-2015'" in line and "another --out" in line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no journal, no temporary file


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_resume_with_another_set_or_seed_is_refused(tmp_path, capsys, suffix, request):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"rw{suffix}"
    assert run_cli([*GP, "--out", str(out)], capsys)[0] == 0
    before = out.read_bytes()
    request.getfixturevalue("no_runs")
    line = one_error(*run_cli([*GP, "--set", "costs.wakeup=50 us", "--out", str(out)], capsys)[::2])
    assert f"--out {out}" in line and "'gp-latency' with other settings" in line and "--set" in line
    assert "delete" in line and "another --out" in line
    line = one_error(*run_cli([*GP, "--seed", "7", "--out", str(out)], capsys)[::2])
    assert "holds replication 0 with seed" in line and "--seed" in line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_resume_after_a_change_of_the_model_code_is_refused(tmp_path, capsys, monkeypatch, request):
    # the same scenario and settings, but sim/ or models/ changed since the rows were written
    out = tmp_path / "rw.csv"
    assert run_cli([*GP, "--out", str(out)], capsys)[0] == 0
    before = out.read_bytes()
    import sim.compiled

    monkeypatch.setattr(sim.compiled, "source_digest", lambda: "another model")
    request.getfixturevalue("no_runs")
    line = one_error(*run_cli([*GP, "--out", str(out)], capsys)[::2])
    assert "other settings" in line and "model's code" in line
    assert out.read_bytes() == before


def test_genuine_resume_and_a_grown_grid_still_resume(tmp_path, capsys):
    out = tmp_path / "rw.csv"
    assert run_cli([*GP, "--set", "costs.wakeup=1200", "--out", str(out)], capsys)[0] == 0
    before = out.read_bytes()
    with out.open() as fp:
        rows = list(csv.DictReader(fp))
    assert {(r["scenario"], len(r["definition"])) for r in rows} == {("gp-latency", 16)}
    # the same sweep: the --set written in other units, the base's value of a grid key changed
    again = [*GP, "--set", "costs.wakeup=1.2 us", "--set", "machine.cpus=4", "--out", str(out)]
    rc, stdout, err = run_cli(again, capsys)
    assert rc == 0 and "2 rows (0 run(s), 2 already done)" in stdout, err
    assert out.read_bytes() == before
    grown = [x if x != "machine.cpus=1,2" else "machine.cpus=1,2,3" for x in GP]
    rc, stdout, err = run_cli([*grown, "--set", "costs.wakeup=1200", "--out", str(out)], capsys)
    assert rc == 0 and "3 rows (1 run(s), 2 already done)" in stdout, err
    assert out.read_bytes().startswith(before)


def test_a_file_that_records_no_definition_is_refused(tmp_path, capsys, no_runs):
    """A file written before rows recorded their scenario (older rcusim) cannot be checked."""
    out = tmp_path / "old.csv"
    header = "machine.cpus,replication,seed,calls,time_s,error\n"
    out.write_text(header + "1,0,4215923173971654960,3.0,0.5,\n")
    before = out.read_bytes()
    line = one_error(*run_cli([*GP, "--out", str(out)], capsys)[::2])
    assert f"--out {out}" in line and "older rcusim" in line and "new file" in line
    assert out.read_bytes() == before


# ---------------------------------------------------------------------------------- 2: --seed
def test_negative_seed_is_one_clear_line_in_sweep_and_compare(capsys, no_runs):
    line = one_error(*run_cli([*GP, "--seed", "-1"], capsys)[::2])
    assert line == "rcusim: error: --seed: -1 is negative (use a value >= 0)"
    compare = ["compare", "gp-latency", "gp-latency", "--set", "workload.calls=3", "-n", "2", "--model-error", "0.1"]
    line = one_error(*run_cli([*compare, "--workers", "1", "--seed", "-1"], capsys)[::2])
    assert line == "rcusim: error: --seed: -1 is negative (use a value >= 0)"


# ---------------------------------------------------------------------------------- 3: --out writable
@pytest.mark.parametrize("name", ["nope.csv", "nope.parquet"])
def test_out_where_no_file_can_be_created_is_refused_before_any_run(capsys, no_runs, name):
    if not Path("/proc/self").is_dir():
        pytest.skip("needs /proc (Linux), where no file can be created")
    line = one_error(*run_cli([*GP, "--out", f"/proc/{name}"], capsys)[::2])
    assert f"--out: cannot write /proc/{name}" in line and "folder" in line


def test_out_inside_a_file_or_naming_a_folder_is_refused(tmp_path, capsys, no_runs):
    (tmp_path / "f").write_text("x")
    line = one_error(*run_cli([*GP, "--out", str(tmp_path / "f" / "x.csv")], capsys)[::2])
    assert "--out: cannot write" in line
    (tmp_path / "d.csv").mkdir()
    line = one_error(*run_cli([*GP, "--out", str(tmp_path / "d.csv")], capsys)[::2])
    assert "is a folder" in line


# ---------------------------------------------------------------------------------- 4: not a sweep file
def test_existing_out_that_is_not_parquet_is_refused(tmp_path, capsys, no_runs):
    pytest.importorskip("pyarrow")
    out = tmp_path / "junk.parquet"
    out.write_text("junk\n")
    line = one_error(*run_cli([*GP, "--out", str(out)], capsys)[::2])
    assert f"--out {out}" in line and "is not a sweep file" in line and "Parquet" in line
    assert out.read_text() == "junk\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_existing_out_that_is_not_a_csv_sweep_is_refused(tmp_path, capsys, no_runs):
    out = tmp_path / "junk.csv"
    out.write_bytes(b"\x00\xff\xfe binary\n")
    line = one_error(*run_cli([*GP, "--out", str(out)], capsys)[::2])
    assert f"--out {out}" in line and "is not a sweep file" in line
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    line = one_error(*run_cli([*GP, "--out", str(other)], capsys)[::2])
    assert f"--out {other}" in line and "is not a sweep file" in line
    assert other.read_text() == "a,b\n1,2\n"


def test_parquet_of_a_sweep_over_other_keys_is_refused(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    out = tmp_path / "g.parquet"
    assert run_cli([*GP, "--out", str(out)], capsys)[0] == 0
    before = out.read_bytes()
    other = ["sweep", "gp-latency", "--grid", "workload.calls=3", "--workers", "1", "--out", str(out)]
    line = one_error(*run_cli(other, capsys)[::2])
    assert f"--out {out}" in line and "holds a different sweep" in line and "workload.calls" in line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


# ---------------------------------------------------------------------------------- 5: --scheduler
def test_scheduler_address_of_the_wrong_form_is_refused(capsys, monkeypatch, no_runs):
    line = one_error(*run_cli([*GP, "--scheduler", "garbage"], capsys)[::2])
    assert line.startswith("rcusim: error: --scheduler: 'garbage' is not a Dask scheduler address") and "tcp://" in line
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "garbage")
    line = one_error(*run_cli(GP, capsys)[::2])
    assert line.startswith("rcusim: error: DASK_SCHEDULER_ADDRESS: 'garbage'") and "tcp://HOST:PORT" in line
    line = one_error(*run_cli([*GP, "--scheduler", "tcp://127.0.0.1:notaport"], capsys)[::2])
    assert "--scheduler" in line and "tcp://HOST:PORT" in line


def test_a_failed_connection_ends_the_process(tmp_path):
    """A tls:// address without a TLS configuration fails inside distributed's Client with a
    TypeError; the half-started client must not keep the process alive on its way out."""
    pytest.importorskip("dask.distributed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env["RCUSIM_PURE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "app", *GP, "--no-progress", "--scheduler", "tls://127.0.0.1:1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    line = one_error(proc.returncode, proc.stderr)
    assert "--scheduler: cannot connect to the Dask scheduler at tls://127.0.0.1:1" in line


# ---------------------------------------------------------------------------------- 6: --metric
def test_unknown_metric_is_refused_as_compare_does(capsys):
    line = one_error(*run_cli([*GP, "--metric", "nope"], capsys)[::2])
    assert line.startswith("rcusim: error: --metric nope: is not a metric this sweep reports") and "calls_per_s" in line
    line = one_error(*run_cli([*GP, "--metric", "calls_per_sec"], capsys)[::2])
    assert "did you mean 'calls_per_s'?" in line
    rc, stdout, err = run_cli([*GP, "--metric", "calls_per_s"], capsys)
    assert rc == 0 and "calls_per_s" in stdout and "scenario" not in stdout and "definition" not in stdout, err


def test_metric_with_out_is_refused_before_any_run(tmp_path, capsys, no_runs):
    line = one_error(*run_cli([*GP, "--metric", "calls_per_s", "--out", str(tmp_path / "x.csv")], capsys)[::2])
    assert "--metric" in line and "--out" in line
    assert not (tmp_path / "x.csv").exists()
