"""Named random streams spawned from one seed.

Each source of randomness (cost jitter, a workload's think times, a lock's spin budget...)
draws from its own stream, so adding a new source never changes the numbers another source
sees (common random numbers across configurations). A stream's identity is its *name*, hashed
stably (not Python's salted ``hash``) into the SeedSequence spawn key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

_BLOCK = 4096


def _name_key(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class Streams:
    """The random streams of one simulation run, all derived from ``seed``."""

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def get(self, name: str) -> np.random.Generator:
        """The generator for ``name`` (created on first use, then the same object)."""
        g = self._streams.get(name)
        if g is None:
            ss = np.random.SeedSequence(self.seed, spawn_key=(_name_key(name),))
            g = self._streams[name] = np.random.Generator(np.random.PCG64(ss))
        return g

    def jitter(self, name: str, cv: float) -> Jitter:
        """A multiplicative noise source with mean 1 and coefficient of variation ``cv``."""
        return Jitter(self.get(name), cv)


class Jitter:
    """Mean-1 lognormal multipliers drawn in blocks, so the hot path is a list pop.

    With ``cv == 0`` it is exactly 1 and draws nothing. The lognormal keeps costs positive;
    ``sigma^2 = ln(1 + cv^2)`` and ``mu = -sigma^2 / 2`` give mean 1 and the requested cv.

    ``apply(ns)`` is ``ns`` scaled by the next multiplier, as integer nanoseconds (at least 1
    if ``ns > 0``). It is a closure stored on the instance, not a method: a call binds nothing
    and reads no attribute (it runs a few times per simulated event).

    For the hottest handlers, which inline ``apply`` for a fixed ``ns > 0``, ``pop()`` gives
    the next multiplier (raising IndexError when the block is used up: call ``refill()`` and
    pop again) and ``max(1, int(ns * pop()))`` is ``apply(ns)``, drawing the same numbers.
    With ``cv == 0`` ``pop()`` is always 1.0 (``int(ns * 1.0) == ns`` below 2**53).
    The hot paths write ``int(x)`` of the float product as ``x.__trunc__()``: the same
    function (int() of a float calls it) without int()'s constructor call, half the cost.
    """

    __slots__ = ("_gen", "_sigma", "_mu", "_buf", "cv", "apply", "pop", "refill")

    apply: Callable[[int], int]
    pop: Callable[[], float]
    refill: Callable[[], None]

    def __init__(self, gen: np.random.Generator, cv: float) -> None:
        if cv < 0:
            raise ValueError("cv must be >= 0")
        self._gen = gen
        self.cv = cv
        self._sigma = float(np.sqrt(np.log1p(cv * cv)))
        self._mu = -0.5 * self._sigma * self._sigma
        self._buf: list[float] = []
        self.apply = _identity if cv == 0.0 else self._make_apply()
        self.pop = _one if cv == 0.0 else self._buf.pop
        self.refill = self._refill

    def _make_apply(self) -> Callable[[int], int]:
        buf = self._buf
        pop = buf.pop
        extend, reverse = buf.extend, buf.reverse
        lognormal, mu, sigma = self._gen.lognormal, self._mu, self._sigma

        def apply(ns: int) -> int:
            if ns <= 0:
                return ns
            try:
                v = (ns * pop()).__trunc__()
            except IndexError:  # the block is used up: draw the next one into the same list
                extend(lognormal(mu, sigma, _BLOCK).tolist())
                reverse()
                v = (ns * pop()).__trunc__()
            return v if v > 0 else 1

        return apply

    def _refill(self) -> None:
        buf = self._buf
        buf.extend(self._gen.lognormal(self._mu, self._sigma, _BLOCK).tolist())
        buf.reverse()


def _identity(ns: int) -> int:
    return ns


def _one() -> float:
    return 1.0
