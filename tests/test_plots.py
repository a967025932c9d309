"""The CLI's --plot figures: what they draw is the result's data, and the files are reproducible."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_hex

from app import plots
from app.cli import main
from calibration.prescreen import Comparison, Effect, ModelError
from calibration.validation import Row

SMALL_NETNS = ["--set", "workload.routers=40", "--set", "workload.report_every=10"]


def test_run_plot_draws_the_results_series_cpu_time_and_percentiles(tmp_path, capsys):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["run", "netns-2014", *SMALL_NETNS, "--json", "--no-progress"]) == 0
    out.write_text(capsys.readouterr().out)
    res = json.loads(out.read_text())
    fig = plots.run_figure(res)
    cpu_ax, rate_ax, lat_ax = fig.axes
    # CPU panel: each CPU's bars add up to the whole run, the first (user) bar as in the result
    bars = cpu_ax.patches
    ncpu = len(res["cpus"])
    assert len(bars) == ncpu * (len(plots.STATES) + 1)
    for i, c in enumerate(res["cpus"]):
        assert sum(b.get_width() for b in bars[i::ncpu]) == pytest.approx(100.0)
        assert bars[i].get_width() == pytest.approx(100.0 * c["user_ns"] / res["sim_ns"])
    # the netns series: rate against routers created, point for point
    xy = rate_ax.lines[0].get_xydata().tolist()
    assert xy == [[p["routers"], p["per_s"]] for p in res["series"]["rate"]] and len(xy) == 4
    # percentiles in microseconds, one row per latency
    (p50,) = [c for c in lat_ax.collections if c.get_label() == "p50"]
    assert p50.get_offsets()[0][0] == pytest.approx(res["latency"]["sched_wakeup_ns"]["p50"] / 1000.0)
    # the CLI writes it: a PNG, and the same SVG bytes twice
    assert main(["run", "netns-2014", *SMALL_NETNS, "--plot", str(png), "--no-progress"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {png}" in capsys.readouterr().out
    svgs = []
    for k in range(2):
        svg = tmp_path / f"r{k}.svg"
        assert main(["run", "netns-2014", *SMALL_NETNS, "--plot", str(svg), "--no-progress"]) == 0
        svgs.append(svg.read_bytes())
    assert svgs[0] == svgs[1] and b"<svg" in svgs[0]
    for fmt in ("png", "pdf"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        plots.save(plots.run_figure(res), a)
        plots.save(plots.run_figure(res), b)
        assert a.read_bytes() == b.read_bytes()


def test_plot_refuses_an_unknown_format_before_running(tmp_path, capsys):
    for argv in (
        ["run", "netns-2014", "--plot", str(tmp_path / "r.txt")],
        ["validate", "netns-2014", "--plot", str(tmp_path / "v")],
        ["compare", "scenarios/patches/pipe-cost-30.toml", "--plot", str(tmp_path / "c.jpeg")],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--plot:" in err and "names no figure format" in err and ".png, .svg, .pdf" in err, err
    assert not list(tmp_path.iterdir())


def test_sweep_plot_draws_the_mean_of_the_replications_per_grid_point(tmp_path, capsys):
    import csv

    out, png = tmp_path / "s.csv", tmp_path / "s.png"
    argv = ["sweep", "messaging-demo", "--set", "workload.groups=1", "--set", "workload.loops=5", "--grid", "machine.cpus=1,2"]
    argv += ["--grid", "kernel.sched=cfs,eevdf", "-n", "2", "--out", str(out), "--plot", str(png), "--metric", "time_s"]
    assert main([*argv, "--no-progress"]) == 0, capsys.readouterr().err
    assert png.read_bytes()[:4] == b"\x89PNG" and f"plot: {png}" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    from calibration import sweep as sw

    axes = sw.parse_grid(["machine.cpus=1,2", "kernel.sched=cfs,eevdf"])
    (ax,) = plots.sweep_figure(rows, axes, ["time_s"], sw.ERROR_COLUMN).axes
    assert [line.get_label() for line in ax.lines] == ["kernel.sched=cfs", "kernel.sched=eevdf"]
    for line, sched in zip(ax.lines, ("cfs", "eevdf"), strict=True):
        for x, y in line.get_xydata():
            runs = [float(r["time_s"]) for r in rows if r["kernel.sched"] == sched and r["machine.cpus"] == str(int(x))]
            assert len(runs) == 2 and y == pytest.approx(sum(runs) / 2)
    assert (
        main(["sweep", "messaging-demo", "--grid", "machine.cpus=1,2", "--plot", str(tmp_path / "p.png"), "--metric", "nope"])
        == 2
    )
    assert "--metric" in capsys.readouterr().err


def test_sweep_lines_join_the_points_in_the_order_of_their_values():
    from calibration import sweep as sw

    axes = sw.parse_grid(["machine.cpus=4,1,2"])  # typed out of order
    rows = [
        {"machine.cpus": c, "replication": "0", "time_s": t, sw.ERROR_COLUMN: ""} for c, t in (("4", "1"), ("1", "4"), ("2", "2"))
    ]
    rows.append({"machine.cpus": "2", "replication": "1", "time_s": "nan", sw.ERROR_COLUMN: ""})  # not drawn
    (ax,) = plots.sweep_figure(rows, axes, ["time_s"], sw.ERROR_COLUMN).axes
    assert ax.lines[0].get_xydata().tolist() == [[1.0, 4.0], [2.0, 2.0], [4.0, 1.0]]


def _row(metric: str, ref: float, sim: float, role: str = "predicted", target: float | None = 0.25) -> Row:
    return Row("s", metric, "", ref, sim, "x", role, target, "test")  # type: ignore[arg-type]


def test_validate_figure_marks_misses_and_clips_a_huge_one():
    rows = [
        _row("anchor", 10.0, 10.1, role="fitted", target=None),
        _row("good", 10.0, 11.0),
        _row("miss", 10.0, 6.0),
        _row("huge", 1.0, 120.0, target=1.0),
    ]
    fig = plots.validate_figure(rows)
    (ax,) = fig.axes
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 4
    x = [d.get_offsets()[0][0] for d in dots]
    assert x[:3] == pytest.approx([1.0, 10.0, -40.0])
    # the huge error is drawn at the clip (3 x the widest band) and labelled with its value
    assert x[3] == pytest.approx(300.0) and any(t.get_text() == "+11900%" for t in ax.texts)
    edge = [to_hex(d.get_edgecolor()[0]) for d in dots]
    assert edge[2] == edge[3] == "#e45756" and edge[1] == "#4c78a8"
    assert len(dots[0].get_facecolor()) == 0 or dots[0].get_facecolor()[0][3] == 0  # a fitted row is hollow
    assert ax.get_title(loc="left").startswith("2 of 4 rows within tolerance")


def test_compare_figure_draws_each_effect_with_its_interval_and_the_error_band():
    effects = [
        Effect("time_s", "lower", 1.0, 1.2, 0.2, 0.1, 0.3, "regresses", "yes"),
        Effect("messages", "higher", 5.0, 5.0, 0.0, -0.01, 0.01, "no detectable effect", "no"),
        Effect("gone", None, 1.0, math.nan, math.nan, math.nan, math.nan, "not compared", "unknown"),
    ]
    cmp = Comparison("base", "patch", [], 4, [1, 2, 3, 4], 0.95, ModelError("s", 0.15, "declared"), effects)
    (ax,) = plots.compare_figure(cmp).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["time_s", "messages"]
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert np.allclose([d.get_offsets()[0] for d in dots], [[20.0, 0.0], [0.0, 1.0]])
    intervals = [seg.tolist() for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]
    assert np.allclose(intervals, [[[10.0, 0.0], [30.0, 0.0]], [[-1.0, 1.0], [1.0, 1.0]]])
    (band,) = ax.patches  # the model's error, +-15 %
    x = band.get_path().transformed(band.get_patch_transform()).vertices[:, 0]
    assert (x.min(), x.max()) == pytest.approx((-15.0, 15.0))
