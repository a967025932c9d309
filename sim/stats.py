"""Streaming statistics that stay small however long the run.

:class:`LogHistogram` keeps counts in log-linear buckets (at most 1.6% wide), so percentiles of
millions of latencies cost a few KiB and are deterministic. :class:`Level` is a time-weighted
level (queue length, utilisation) in the sense of salabim's ``level=True`` monitors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# Buckets as in HDR histograms: a value's bit length picks a power-of-two range, its next
# SUB_BITS bits pick one of 2**SUB_BITS linear sub-buckets in it (at most 1/64 = 1.6% wide).
# Integer operations only, so adding a sample is cheap and exact to reproduce.
SUB_BITS = 6
_SUB = 1 << SUB_BITS


def _bucket(v: int) -> int:
    if v < _SUB:
        return v if v > 0 else 0
    e = v.bit_length() - SUB_BITS - 1
    return ((e + 1) << SUB_BITS) | ((v >> e) & (_SUB - 1))


def _bucket_value(b: int) -> float:
    if b < _SUB:
        return float(b)
    e = (b >> SUB_BITS) - 1
    lo = ((b & (_SUB - 1)) | _SUB) << e
    return lo + ((1 << e) - 1) / 2.0


class LogHistogram:
    """Counts of non-negative values in log-linear buckets (<= 1.6% wide); exact count, sum,
    min and max."""

    __slots__ = ("counts", "n", "total", "lo", "hi")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.total = 0
        self.lo: float = math.inf
        self.hi: float = -math.inf

    def add(self, v: int) -> None:
        v = int(v)
        if v < _SUB:
            b = v if v > 0 else 0
        else:
            e = v.bit_length() - SUB_BITS - 1
            b = ((e + 1) << SUB_BITS) | ((v >> e) & (_SUB - 1))
        c = self.counts
        c[b] = c.get(b, 0) + 1
        self.n += 1
        self.total += v
        if v < self.lo:
            self.lo = v
        if v > self.hi:
            self.hi = v

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(int(v))

    def merge(self, other: LogHistogram) -> None:
        for b, k in other.counts.items():
            self.counts[b] = self.counts.get(b, 0) + k
        self.n += other.n
        self.total += other.total
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100): the middle of its bucket, clamped to the observed
        min and max. NaN when empty."""
        if not self.n:
            return math.nan
        if q <= 0:
            return float(self.lo)
        if q >= 100:
            return float(self.hi)
        rank = q / 100.0 * self.n
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                return min(max(_bucket_value(b), self.lo), self.hi)
        return float(self.hi)

    def summary(self) -> dict[str, float]:
        return {
            "count": self.n,
            "mean": self.mean,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "max": self.hi if self.n else math.nan,
        }


class Level:
    """Time-weighted mean of a piecewise-constant level (e.g. run-queue length)."""

    __slots__ = ("value", "since", "area", "start", "peak")

    def __init__(self, now: int, value: float = 0.0) -> None:
        self.value = value
        self.since = now
        self.start = now
        self.area = 0.0
        self.peak = value

    def set(self, now: int, value: float) -> None:
        self.area += self.value * (now - self.since)
        self.value = value
        self.since = now
        if value > self.peak:
            self.peak = value

    def mean(self, now: int) -> float:
        span = now - self.start
        if span <= 0:
            return self.value
        return (self.area + self.value * (now - self.since)) / span
