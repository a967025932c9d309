"""The 95 % interval of a validation row's error (calibration.validation.error_interval)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.validation import Row, error_interval, spreads, summary

MEDIAN = lambda runs: np.median(runs, axis=1)  # noqa: E731
MEAN = lambda runs: np.mean(runs, axis=1)  # noqa: E731


def test_identical_sides_give_an_interval_around_zero():
    lo, hi = error_interval([10.0, 11.0, 9.0, 10.5, 9.5], [10.0, 10.0, 10.0], MEDIAN)
    assert lo < 0 < hi and abs(lo) < 0.15 and hi < 0.15


def test_more_run_to_run_noise_gives_a_wider_interval():
    calm = error_interval([10.0, 10.1, 9.9, 10.05, 9.95], [10.0], MEAN)
    noisy = error_interval([10.0, 14.0, 6.0, 12.0, 8.0], [10.0], MEAN)
    assert calm is not None and noisy is not None
    assert noisy[1] - noisy[0] > 5 * (calm[1] - calm[0])


def test_a_model_off_by_half_is_outside_zero():
    lo, hi = error_interval([10.0, 10.2, 9.8, 10.1], [15.0, 15.2, 14.9], MEAN)
    assert 0.4 < lo < 0.5 < hi < 0.6


def test_point_scales_to_the_rows_reference():
    # the row's reference is a rate over the whole run (2000/s), twice the runs' own statistic
    # (1e9 / mean of 1e6-ns runs = 1000/s): every resampled reference doubles, so 1 + error halves
    rate = lambda runs: 1e9 / np.mean(runs, axis=1)  # noqa: E731
    plain = error_interval([1e6, 1.1e6, 0.9e6], [1.0], rate)
    scaled = error_interval([1e6, 1.1e6, 0.9e6], [1.0], rate, point=2000.0)
    assert plain is not None and scaled is not None
    for a, b in zip(scaled, plain, strict=True):
        assert abs(2 * (1 + a) - (1 + b)) < 1e-9


def test_one_run_has_no_interval_and_the_result_is_deterministic():
    assert error_interval([10.0], [10.0, 11.0], MEAN) is None
    a = error_interval([10.0, 12.0, 9.0], [10.0, 11.0], MEAN)
    assert a == error_interval([10.0, 12.0, 9.0], [10.0, 11.0], MEAN)


def test_row_json_carries_the_interval():
    r = Row("s", "m", "c", 10.0, 12.0, "s", "predicted", 0.25, "src", interval=(0.1, 0.3))
    assert r.to_json()["interval"] == [0.1, 0.3]
    assert Row("s", "m", "c", 10.0, 12.0, "s", "predicted", 0.25, "src").to_json()["interval"] is None


def test_spreads_group_the_profiles_rows_by_figure():
    def row(story: str, config: str, ref: float, sim: float, role: str = "predicted") -> Row:
        return Row(story, "m", config, ref, sim, "s", role, 0.25, "src")  # type: ignore[arg-type]

    rows = [
        row("profile:a", "g1: one", 1.0, 1.1),
        row("profile:b", "g1: one", 2.0, 1.0),
        row("profile:c", "g1: one", 1.0, 0.9),
        row("profile:a", "g2: two", 1.0, 1.0),  # one profile only: no spread
        row("netns-2014", "g1: one", 1.0, 5.0),  # a story's row is not a profile's
        row("profile:b", "g3: fit", 1.0, 1.0, role="fitted"),
        row("profile:c", "g3: fit", 1.0, 1.0, role="fitted"),
    ]
    (s,) = spreads(rows)
    assert (s.config, s.profiles, s.within) == ("g1", 3, 2)
    assert (s.min_error, s.median_error, s.max_error) == pytest.approx((-0.5, -0.1, 0.1))
    assert (s.min_reference, s.max_reference) == (1.0, 2.0)


def test_summary_counts_each_story_and_names_its_misses():
    rows = [
        Row("s1", "rate", "a", 100.0, 100.2, "x/s", "fitted", None, "seed"),
        Row("s1", "ratio", "b", 0.5, 0.2, "ratio", "predicted", 0.25, "seed"),
        Row("s1", "ratio", "c", 1.0, 1.1, "ratio", "predicted", 0.25, "seed"),
        Row("s2", "time", "d", 4.0, 6.0, "s", "fitted", None, "seed"),  # a stale fit: +50 %
        Row("s2", "time", "e", 4.0, 4.1, "s", "predicted", 0.2, "seed"),
    ]
    assert summary(rows) == [
        "s1: 1 fitted, 2 predicted: 1 within target, 1 miss: ratio (b) -60%",
        "s2: 1 fitted (1 stale), 1 predicted: 1 within target",
        "all: 2 fitted (1 stale), 3 predicted: 2 within target, 1 miss",
    ]
    assert summary(rows[3:]) == ["s2: 1 fitted (1 stale), 1 predicted: 1 within target"]
