"""The validation contract: simulated figures against published or measured ones.

Every story (a seed document reproduced by a named scenario) and every profile produces
:class:`Row` objects; ``rcusim validate`` prints them as a table or as ``{"rows": [...]}``.
A row is either *fitted* (an anchor the model's parameters were fitted to: its error says
how well the fit went, nothing more) or *predicted* (not used in any fit: its error is the
model's honest error, and ``target`` is the relative tolerance the project commits to).

A fitted row is held to :data:`FIT_TOLERANCE` unless it names its own ``target``: a fit is
done on the same seeds and scenario the validation runs, so its rows land within a fraction
of a percent of their anchors; a larger error means the model changed after the fit (the fit
went stale) and ``validate --check`` says so instead of passing it silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Role = Literal["fitted", "predicted"]

FIT_TOLERANCE = 0.05
"""Largest relative error of a fitted row before it counts as a stale fit. The fits' own
residuals are below 0.5 % (calibration/fits/*.toml); 5 % leaves room for validating with
fewer seeds than the fit used, while a model change that moves an anchor further than that
needs a refit (each story module's ``--fit``)."""


@dataclass(frozen=True)
class Row:
    story: str
    metric: str
    config: str
    reference: float
    simulated: float
    unit: str
    role: Role
    target: float | None
    source: str
    note: str = ""
    interval: tuple[float, float] | None = None
    """95 % interval of :attr:`rel_error` (:func:`error_interval`: the measured runs and the
    simulated seeds resampled), when the reference has runs to resample (a profile's
    composites); None for a published figure without its runs."""

    def __post_init__(self) -> None:
        if self.role not in ("fitted", "predicted"):
            raise ValueError(f"role must be 'fitted' or 'predicted', got {self.role!r}")
        if self.role == "predicted" and self.target is None:
            raise ValueError(f"{self.story}/{self.metric}: a predicted row needs a target")

    @property
    def rel_error(self) -> float:
        if self.reference == 0 or not math.isfinite(self.simulated):
            return math.nan
        return (self.simulated - self.reference) / self.reference

    @property
    def tolerance(self) -> float | None:
        """The relative error this row may have: its target, or :data:`FIT_TOLERANCE` for a
        fitted row that names none."""
        if self.target is None and self.role == "fitted":
            return FIT_TOLERANCE
        return self.target

    @property
    def ok(self) -> bool:
        """Within tolerance: a predicted row within its target, a fitted row close enough to
        its anchor that the fit still holds."""
        e = self.rel_error
        tol = self.tolerance
        return math.isfinite(e) and tol is not None and abs(e) <= tol

    def to_json(self) -> dict[str, Any]:
        def num(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else x

        return {
            "story": self.story,
            "metric": self.metric,
            "config": self.config,
            "reference": num(self.reference),
            "simulated": num(self.simulated),
            "unit": self.unit,
            "role": self.role,
            "rel_error": num(self.rel_error),
            "interval": None if self.interval is None else [num(self.interval[0]), num(self.interval[1])],
            "target": self.target,
            "tolerance": self.tolerance,
            "ok": self.ok,
            "source": self.source,
            "note": self.note,
        }


def error_interval(
    measured: Sequence[float],
    simulated: Sequence[float],
    reference: Callable[[np.ndarray], np.ndarray],
    point: float | None = None,
    draws: int = 2000,
) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of the relative error simulated / reference - 1:
    the measured runs and the simulated seeds are resampled independently, ``reference`` maps a
    (draws, runs) array of resampled runs to the reference statistic of each draw (a median of
    run times, a mean of run rates, a rate from per-router times...), the simulated side is the
    mean over seeds. ``point``: the row's reference when it is not exactly ``reference`` of the
    runs (a rate the collector computed over the whole run): the resampled references are scaled
    to it, so the interval is around the row's error. It covers the run-to-run noise on both
    sides, not the calibration's uncertainty or the model's error. None without at least two
    measured runs. Deterministic (its own generator, seed 0)."""
    m = np.asarray(measured, dtype=float)
    sims = np.asarray(simulated, dtype=float)
    if m.size < 2 or sims.size < 1:
        return None
    rng = np.random.default_rng(0)
    ref = reference(m[rng.integers(0, m.size, (draws, m.size))])
    if point is not None:
        ref = ref * (point / float(reference(m[None, :])[0]))
    sim = sims[rng.integers(0, sims.size, (draws, sims.size))].mean(axis=1)
    err = sim / ref - 1.0
    lo, hi = np.percentile(err, [2.5, 97.5])
    return float(lo), float(hi)


@dataclass(frozen=True)
class StoryOptions:
    """How hard to work: ``seeds`` replications per figure (their mean is reported), in how many
    local worker processes (``workers``; None: every core, 1: this process; the rows are the
    same whatever the number), and whom to tell how far it got (``progress(label, fraction)``)."""

    seeds: int = 3
    progress: Callable[[str, float], None] | None = None
    workers: int | None = None


@dataclass(frozen=True)
class Story:
    """A seed story: its reference figures with provenance and how to simulate them."""

    name: str
    title: str
    seed_file: str
    machine: str
    rows: Callable[[StoryOptions], list[Row]]
    reference: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spread:
    """One composite figure over several collections of a machine (``rcusim validate`` with
    more than one ``--profile``): how many of them the model predicts within the target, and
    the spread of its errors. Each collection is calibrated by itself; the spread says how far a
    prediction for this machine can be trusted beyond one collection's run-to-run luck."""

    metric: str
    config: str
    unit: str
    profiles: int
    within: int
    target: float
    min_error: float
    median_error: float
    max_error: float
    min_reference: float
    max_reference: float

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "config": self.config,
            "unit": self.unit,
            "profiles": self.profiles,
            "within_target": self.within,
            "target": self.target,
            "error_min": self.min_error,
            "error_median": self.median_error,
            "error_max": self.max_error,
            "reference_min": self.min_reference,
            "reference_max": self.max_reference,
        }


def spreads(rows: list[Row]) -> list[Spread]:
    """The predicted rows of profiles (story ``profile:...``) grouped by metric and by the
    configuration's label (the part of ``config`` before its first colon, e.g. ``groups_2``),
    in the order they first appear; a group needs rows of two profiles or more."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.story.startswith("profile:") and r.role == "predicted" and r.target is not None:
            groups.setdefault((r.metric, r.config.split(":", 1)[0]), []).append(r)
    out = []
    for (metric, config), rs in groups.items():
        errors = sorted(r.rel_error for r in rs if math.isfinite(r.rel_error))
        if len({r.story for r in rs}) < 2 or not errors:
            continue
        target = max(r.target for r in rs if r.target is not None)
        out.append(
            Spread(
                metric,
                config,
                rs[0].unit,
                len(rs),
                sum(r.ok for r in rs),
                target,
                errors[0],
                float(np.median(errors)),
                errors[-1],
                min(r.reference for r in rs),
                max(r.reference for r in rs),
            )
        )
    return out


def summary(rows: Sequence[Row]) -> list[str]:
    """One line per story (in the order the stories first appear) and, for more than one, a
    total: how many rows were fitted and how many of those are stale, how many predictions
    are within their target and which miss. What a reader of a 40-row table wants first."""
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.story, []).append(r)

    def line(name: str, rs: Sequence[Row], detail: bool = True) -> str:
        fitted = [r for r in rs if r.role == "fitted"]
        predicted = [r for r in rs if r.role == "predicted"]
        misses = [r for r in predicted if not r.ok]
        stale = sum(not r.ok for r in fitted)
        text = f"{name}: {len(fitted)} fitted" + (f" ({stale} stale)" if stale else "")
        text += f", {len(predicted)} predicted: {len(predicted) - len(misses)} within target"
        if misses:
            text += f", {len(misses)} miss"
            if detail:
                text += ": " + "; ".join(f"{r.metric} ({r.config}) {100 * r.rel_error:+.0f}%" for r in misses)
        return text

    out = [line(name, rs) for name, rs in by.items()]
    if len(by) > 1:
        out.append(line("all", rows, detail=False))
    return out
