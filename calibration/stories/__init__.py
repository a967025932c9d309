"""The seed stories as validation suites (see ``../shared/seeds`` for the documents).

Each module defines ``STORY`` (a :class:`calibration.validation.Story`) once its mechanisms
are modelled, or ``None`` with a docstring saying what is missing.
"""

from __future__ import annotations

from importlib import import_module

from ..validation import Story

NAMES = {
    "netns-2014": "netns_2014",
    "hackbench-rt-2008": "hackbench_rt_2008",
    "urcu-membarrier-2020": "urcu_membarrier_2020",
    "rcu-sync-2015": "rcu_sync_2015",
    "timers-2023": "timers_2023",
}


def get(name: str) -> Story | None:
    """The story called ``name``, or None if it is not modelled yet. KeyError if unknown."""
    mod = import_module(f"{__name__}.{NAMES[name]}")
    return getattr(mod, "STORY", None)


def pending(name: str) -> str:
    """Why a story is not available yet (its module docstring)."""
    mod = import_module(f"{__name__}.{NAMES[name]}")
    return (mod.__doc__ or "not modelled yet").strip().splitlines()[0]
