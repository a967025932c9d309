"""Parameter sweeps (rcusim sweep): grids, seeds that do not depend on scheduling, resumable
output files, the local process pool and a Dask cluster giving the same rows."""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

import pytest

from app.cli import main
from calibration import sweep as sw
from sim import scenario as sc
from sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "scenarios" / "messaging-demo.toml"
TINY = {"workload.groups": 1, "workload.senders": 3, "workload.receivers": 3, "workload.loops": 20}
GRID = ["machine.cpus=1,2", "kernel.preempt=voluntary,full"]


def tiny() -> dict:
    return sc.load(DEMO, TINY)


class Stop(KeyboardInterrupt):
    """What Ctrl-C would raise in the middle of a sweep."""


def test_parse_grid_and_points():
    axes = sw.parse_grid(["machine.cpus=1, 2,4", "kernel.rcu.nocb=none,[0,1],'all'"])
    assert axes[0].texts == ("1", "2", "4") and axes[0].values == (1, 2, 4)
    assert axes[1].texts == ("none", "[0,1]", "'all'") and axes[1].values == ("none", [0, 1], "all")
    assert sw.grid_points(axes)[:4] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert sw.axis("kernel.rcu.nocb", ["none", [0, 1], True]).texts == ("none", "[0, 1]", "true")
    assert len(sw.grid_points(axes)) == 9
    for bad, expect in (
        (["machine.cpus"], "needs key=v1,v2"),
        (["machine.cpus=1,,2"], "empty value"),
        (["machine.cpus=1,1"], "repeats a value"),
        (["machine.cpus=1", "machine.cpus=2"], "given twice"),
    ):
        with pytest.raises(ConfigError, match=expect):
            sw.parse_grid(bad)


def test_bad_grid_point_is_named_before_anything_runs():
    with pytest.raises(ConfigError) as ei:
        sw.sweep(tiny(), sw.parse_grid(["machine.cpus=2,0"]), workers=1)
    assert "machine.cpus" in str(ei.value) and "grid point machine.cpus=0" in str(ei.value)
    with pytest.raises(ConfigError, match="workload.groupz"):
        sw.sweep(tiny(), sw.parse_grid(["workload.groupz=1,2"]), workers=1)


def test_rows_do_not_depend_on_order_or_grid_size():
    small = sw.sweep(tiny(), sw.parse_grid(["machine.cpus=2"]), replications=2, workers=1)
    big = sw.sweep(tiny(), sw.parse_grid(["machine.cpus=1,2"]), replications=3, workers=1)
    pick = [r for r in big.rows if r["machine.cpus"] == "2" and r["replication"] in ("0", "1")]
    assert pick == small.rows
    assert [r["seed"] for r in small.rows] == [str(s) for s in sw.replication_seeds(1, 2)]
    assert small.rows[0]["time_s"] != small.rows[1]["time_s"]  # replications differ (jitter)


def test_interrupted_and_resumed_sweep_gives_the_same_file(tmp_path):
    axes = sw.parse_grid(GRID)
    ref = tmp_path / "ref.csv"
    whole = sw.sweep(tiny(), axes, replications=2, out=ref, workers=1)
    assert whole.total == 8 and whole.ran == 8 and len(whole.rows) == 8

    out = tmp_path / "resumed.csv"
    seen = []

    def interrupt_after_three(row):
        seen.append(row)
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        sw.sweep(tiny(), axes, replications=2, out=out, workers=2, on_row=interrupt_after_three)
    with out.open() as fp:
        assert len(list(csv.DictReader(fp))) == 3  # what finished is on disk
    again = sw.sweep(tiny(), axes, replications=2, out=out, workers=2)
    assert again.skipped == 3 and again.ran == 5
    assert out.read_bytes() == ref.read_bytes()
    # running it once more finds nothing to do and leaves the file as it is
    third = sw.sweep(tiny(), axes, replications=2, out=out, workers=1)
    assert third.ran == 0 and out.read_bytes() == ref.read_bytes()


def test_a_row_cut_short_is_run_again(tmp_path):
    axes = sw.parse_grid(["machine.cpus=1,2"])
    ref = tmp_path / "ref.csv"
    sw.sweep(tiny(), axes, replications=1, out=ref, workers=1)
    out = tmp_path / "cut.csv"
    text = ref.read_text()
    out.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 1] + "2,0,123")  # header, row 1, half of row 2
    res = sw.sweep(tiny(), axes, replications=1, out=out, workers=1)
    assert res.ran == 1 and out.read_bytes() == ref.read_bytes()


def test_other_sweep_in_the_file_is_refused(tmp_path):
    out = tmp_path / "a.csv"
    sw.sweep(tiny(), sw.parse_grid(["machine.cpus=1"]), out=out, workers=1)
    with pytest.raises(ConfigError, match="seed"):
        sw.sweep(tiny(), sw.parse_grid(["machine.cpus=1"]), out=out, workers=1, base_seed=7)
    with pytest.raises(ConfigError, match="holds a different sweep"):
        sw.sweep(tiny(), sw.parse_grid(["kernel.preempt=full"]), out=out, workers=1)
    with pytest.raises(ConfigError, match="FILE.csv or FILE.parquet"):
        sw.sweep(tiny(), sw.parse_grid(["machine.cpus=1"]), out=tmp_path / "a.txt", workers=1)


def test_parquet_output_matches_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    axes = sw.parse_grid(["machine.cpus=1,2"])
    sw.sweep(tiny(), axes, replications=2, out=tmp_path / "a.csv", workers=1)
    sw.sweep(tiny(), axes, replications=2, out=tmp_path / "a.parquet", workers=1)
    assert not (tmp_path / "a.parquet.partial.csv").exists()
    table = pq.read_table(tmp_path / "a.parquet").to_pylist()
    with (tmp_path / "a.csv").open() as fp:
        rows = list(csv.DictReader(fp))
    assert len(table) == len(rows) == 4
    for t, r in zip(table, rows, strict=True):
        assert t["machine.cpus"] == int(r["machine.cpus"]) and t["replication"] == int(r["replication"])
        assert t["time_s"] == float(r["time_s"])
    # an extended grid resumes from the finished Parquet file
    res = sw.sweep(tiny(), sw.parse_grid(["machine.cpus=1,2,3"]), replications=2, out=tmp_path / "a.parquet", workers=1)
    assert res.skipped == 4 and res.ran == 2 and len(pq.read_table(tmp_path / "a.parquet")) == 6


@pytest.mark.slow
def test_local_pool_and_dask_cluster_give_identical_rows():
    distributed = pytest.importorskip("dask.distributed")
    axes = sw.parse_grid(GRID)
    local = sw.sweep(tiny(), axes, replications=2, workers=2)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.CRITICAL
    ) as cluster:
        remote = sw.sweep(tiny(), axes, replications=2, scheduler=cluster.scheduler_address)
    assert remote.rows == local.rows and remote.header == local.header
    assert len(local.rows) == 8 and not any(r["error"] for r in local.rows)
    assert all(math.isfinite(float(r["time_s"])) for r in local.rows)


def test_scheduler_address_from_environment(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert sw.scheduler_address(None) is None
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    assert sw.scheduler_address(None) == "tcp://127.0.0.1:1"
    assert sw.scheduler_address("tcp://x:2") == "tcp://x:2"


def test_failed_run_is_a_row_with_its_error():
    data = sc.load(DEMO, {**TINY, "scenario.max_time": "10 us"})
    res = sw.sweep(data, sw.parse_grid(["machine.cpus=1,2"]), workers=1)
    assert res.failed == 2 and all("max_time" in r["error"] for r in res.rows)


def run_cli(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_sweep(tmp_path, capsys):
    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    out = tmp_path / "s.csv"
    rc, stdout, err = run_cli(
        ["sweep", "messaging-demo", "--grid", "machine.cpus=1,2", "-n", "2", "--out", str(out), "--workers", "1", *sets], capsys
    )
    assert rc == 0, err
    assert "4 rows (4 run(s))" in stdout
    rc, stdout, err = run_cli(
        ["sweep", "messaging-demo", "--grid", "machine.cpus=1,2", "-n", "2", "--out", str(out), "--workers", "1", *sets], capsys
    )
    assert rc == 0 and "4 already done" in stdout
    rc, stdout, err = run_cli(["sweep", "messaging-demo", "--grid", "machine.cpus=1,2", "--workers", "1", *sets], capsys)
    assert rc == 0 and "time_s" in stdout and "machine.cpus" in stdout
    for args, expect in (
        (["sweep", "messaging-demo", "--grid", "machine.cpuz=1,2"], "machine.cpuz: unknown key"),
        (["sweep", "messaging-demo", "--grid", "machine.cpus"], "--grid machine.cpus: needs key=v1,v2"),
        (["sweep", "messaging-demo", "--grid", "machine.cpus=1", "-n", "0"], "--replications: 0 is below 1"),
        (["sweep", "messaging-demo", "--grid", "machine.cpus=1", "--workers", "0", *sets], "--workers: 0 is below 1"),
        (["sweep", "messaging-demo", "--grid", "machine.cpus=1", "--out", str(tmp_path / "no" / "x.csv")], "does not exist"),
    ):
        rc, stdout, err = run_cli(args, capsys)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and expect in lines[0], (args, err)


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ConfigError(f"item.{x}", "is negative", "give a value >= 0")
    return x * x


@pytest.mark.parametrize("workers", [1, 2])
def test_pmap_keeps_input_order_and_reports_progress(workers):
    seen: list[tuple[int, int]] = []
    out = sw.pmap(_square_or_fail, [3, 1, 2, 5], workers=workers, done=lambda k, n: seen.append((k, n)))
    assert out == [9, 1, 4, 25]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_pmap_worker_error_arrives_whole():
    # a ConfigError raised in a worker process crosses back with its field and fix
    with pytest.raises(ConfigError) as exc:
        sw.pmap(_square_or_fail, [1, -7, 2], workers=2)
    assert exc.value.field == "item.-7" and exc.value.fix == "give a value >= 0"
    assert str(exc.value) == "item.-7: is negative (give a value >= 0)"
    with pytest.raises(ConfigError, match="--workers: 0 is below 1"):
        sw.pmap(_square_or_fail, [1], workers=0)


def _slow_square(job: tuple[int, str]) -> int:
    import time

    x, marker = job
    time.sleep(0.05 if x == 0 else 30)  # the later calls are still running at the interrupt
    Path(f"{marker}.{x}").write_text("finished")
    return x * x


def test_pmap_interrupted_leaves_no_worker_behind(tmp_path):
    """Ctrl-C while a validation runs (here: raised by the progress callback after the first
    result) reaches the caller, and the workers still running are terminated, not waited for:
    the later calls never get to write their marker."""
    import multiprocessing
    import time

    def done(k: int, total: int) -> None:
        raise Stop

    marker = str(tmp_path / "done")
    with pytest.raises(Stop):
        sw.pmap(_slow_square, [(0, marker), (1, marker), (2, marker)], workers=2, done=done)
    for _ in range(100):
        if not multiprocessing.active_children():
            break
        time.sleep(0.1)
    assert not multiprocessing.active_children()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.0"]


def _pid(_: int) -> int:
    import os

    return os.getpid()


def _inner_pmap(x: int) -> tuple[int, list[int]]:
    import os

    return os.getpid(), sw.pmap(_pid, [x, x + 1], workers=2)


def test_pmap_inside_a_worker_runs_in_that_worker():
    """A pmap called from a worker (one of several profiles) runs its calls in that worker,
    not in a pool of its own."""
    for outer, inner in sw.pmap(_inner_pmap, [1, 2], workers=2):
        assert inner == [outer, outer]
