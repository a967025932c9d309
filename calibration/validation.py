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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

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
            "target": self.target,
            "tolerance": self.tolerance,
            "ok": self.ok,
            "source": self.source,
            "note": self.note,
        }


@dataclass(frozen=True)
class StoryOptions:
    """How hard to work: ``seeds`` replications per figure (their mean is reported)."""

    seeds: int = 3
    progress: Callable[[str, float], None] | None = None


@dataclass(frozen=True)
class Story:
    """A seed story: its reference figures with provenance and how to simulate them."""

    name: str
    title: str
    seed_file: str
    machine: str
    rows: Callable[[StoryOptions], list[Row]]
    reference: dict[str, Any] = field(default_factory=dict)
