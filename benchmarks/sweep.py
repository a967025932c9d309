"""Sweep throughput: runs per second of one sweep on 1 worker and on 2 workers (target >= 1.8x).

The sweep is the messaging demo over a grid (preemption model x cost jitter) with replications:
16 runs of similar size (0.2 s each with the compiled engine, 0.4 s in plain Python: 400 loops,
doubled from 200 when the engine was compiled so that worker start-up stays as small a share), as in a real sweep. ``--workers 1`` runs in this process;
``--workers 2`` in two local worker processes (their start-up is part of the measured time).
Also printed: the CPU time of each side, and the speedup they imply when each worker has a
core of its own (on a shared machine the wall-clock speedup measures the other jobs' load).
With ``--dask`` the same sweep also runs on a Dask LocalCluster of 2 single-threaded worker
processes started here (cluster start-up not timed). Prints figures only; nothing here is a test.

    python benchmarks/sweep.py [--loops N] [--replications N] [--dask]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration import sweep as sw  # noqa: E402
from sim import scenario as sc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed(
    data, axes, reps: int, workers: int | None = None, scheduler: str | None = None
) -> tuple[float, float, float, sw.SweepSummary]:
    """Wall time, CPU time of this process, CPU time of the worker processes (reaped children)."""
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p0 = time.process_time()
    t0 = time.perf_counter()
    s = sw.sweep(data, axes, replications=reps, workers=workers, scheduler=scheduler)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    kids = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    return wall, time.process_time() - p0, kids, s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loops", type=int, default=400, help="messages per sender and receiver (run size)")
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--dask", action="store_true", help="also run on a Dask LocalCluster of 2 workers")
    a = ap.parse_args()
    data = sc.load(ROOT / "scenarios" / "messaging-demo.toml", {"workload.loops": a.loops})
    axes = sw.parse_grid(["kernel.preempt=voluntary,full", "costs.jitter_cv=0.05,0.1"])
    n = len(sw.grid_points(axes)) * a.replications
    grid = " x ".join(x.key + "=" + ",".join(x.texts) for x in axes)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"sweep: messaging-demo (loops={a.loops}), grid {grid}, {a.replications} replications = {n} runs")
    w1, p1, _, s1 = timed(data, axes, a.replications, workers=1)
    print(f"1 worker : {w1:6.2f} s = {n / w1:5.2f} runs/s   (CPU {p1:.2f} s in this process)")
    w2, p2, k2, s2 = timed(data, axes, a.replications, workers=2)
    print(
        f"2 workers: {w2:6.2f} s = {n / w2:5.2f} runs/s   speedup {w1 / w2:.2f}x (target >= 1.8x)   "
        f"(CPU {k2:.2f} s in the workers, {p2:.2f} s in this process)"
    )
    # On a shared machine the wall-clock speedup says how many cores the other jobs left free.
    # The CPU times do not depend on that: with a core per worker, the sweep would take about
    # the larger of (workers' CPU / 2) and this process's CPU, against p1 for one worker.
    print(
        f"CPU-time speedup (what two free cores would give, runs split evenly): {p1 / max(k2 / 2, p2):.2f}x; "
        f"load average now {os.getloadavg()[0]:.1f}"
    )
    assert s1.rows == s2.rows, "1 and 2 workers must give the same rows"
    if a.dask:
        from dask.distributed import LocalCluster

        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.CRITICAL
        ) as cluster:
            wd, sd = timed(data, axes, a.replications, scheduler=cluster.scheduler_address)
        print(f"Dask, 2 workers: {wd:6.2f} s = {n / wd:5.2f} runs/s   speedup {w1 / wd:.2f}x")
        assert sd.rows == s1.rows, "the Dask cluster must give the same rows"


if __name__ == "__main__":
    main()
