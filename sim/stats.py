"""Streaming statistics that stay small however long the run.

:class:`LogHistogram` keeps counts in log-linear buckets (at most 1.6% wide), so percentiles of
millions of latencies cost a few KiB and are deterministic. :class:`Level` is a time-weighted
level (queue length, utilisation) in the sense of salabim's ``level=True`` monitors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

# Buckets as in HDR histograms: a value's bit length picks a power-of-two range, its next
# SUB_BITS bits pick one of 2**SUB_BITS linear sub-buckets in it (at most 1/64 = 1.6% wide).
# Integer operations only, so adding a sample is cheap and exact to reproduce.
SUB_BITS = 6
_SUB = 1 << SUB_BITS
_EXACT_FLOAT = 1 << 53  # below this an int64 converts to float64 exactly


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


FLUSH = 16384  # values a LogHistogram buffers before it bins them (binning is exact in any batches)


class LogHistogram:
    """Counts of non-negative values in log-linear buckets (<= 1.6% wide); exact count, sum,
    min and max.

    :meth:`add` only appends to a short buffer; the buffer is binned in one vectorised pass
    when it is full or when anything reads the histogram (the attributes ``counts``, ``n``,
    ``total``, ``lo``, ``hi`` and every method), so the figures are exactly those of binning
    each value as it comes, at a fraction of the cost per value.

    A hot caller may inline :meth:`add` for an ``int`` value: append it to ``pending`` (the
    same list for the histogram's life) and call :meth:`flush` when it holds :data:`FLUSH`.
    """

    __slots__ = ("_counts", "_n", "_total", "_lo", "_hi", "_pending", "pending", "add")

    _FLUSH = FLUSH

    add: Callable[[int], None]
    """Count one value (a closure stored on the instance: a call binds nothing)."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._n = 0
        self._total = 0
        self._lo: float = math.inf
        self._hi: float = -math.inf
        self._pending: list[int] = []
        self.pending = self._pending
        self.add = self._make_add()

    def _make_add(self) -> Callable[[int], None]:
        pending = self._pending  # the same list for the histogram's life (_flush empties it)
        append = pending.append
        flush = self._flush
        limit = self._FLUSH

        def add(v: int) -> None:
            if v.__class__ is not int:
                v = int(v)
            append(v)
            if len(pending) >= limit:
                flush()

        return add

    def flush(self) -> None:
        """Bin the buffered values now."""
        self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        p = self._pending[:]
        self._pending.clear()
        n = len(p)
        self._n += n
        try:
            a = np.array(p, dtype=np.int64)
        except OverflowError:  # a value beyond int64: Python ints throughout
            lo, hi = min(p), max(p)
            self._total += sum(p)
        else:
            lo, hi = int(a.min()), int(a.max())
            # numpy's int64 sum is exact while it cannot overflow
            self._total += int(a.sum()) if n * max(hi, -lo, 1) < 1 << 63 else sum(p)
        if lo < self._lo:
            self._lo = lo
        if hi > self._hi:
            self._hi = hi
        c = self._counts
        if lo < 0 or hi >= _EXACT_FLOAT:
            for v in p:
                b = _bucket(v)
                c[b] = c.get(b, 0) + 1
            return
        # bit_length(v) is frexp's exponent: exact because v < 2**53 converts to float exactly
        e = np.frexp(a.astype(np.float64))[1].astype(np.int64) - (SUB_BITS + 1)
        big = a >= _SUB
        shift = np.where(big, e, 0)
        bins = np.where(big, ((e + 1) << SUB_BITS) | ((a >> shift) & (_SUB - 1)), a)
        # bins < 2**12 (v < 2**53): a bincount is np.unique's keys and counts, in the same order
        per_bin = np.bincount(bins)
        keys = np.flatnonzero(per_bin)
        for k, n in zip(keys.tolist(), per_bin[keys].tolist(), strict=True):
            c[k] = c.get(k, 0) + n

    @property
    def counts(self) -> dict[int, int]:
        self._flush()
        return self._counts

    @property
    def n(self) -> int:
        self._flush()
        return self._n

    @property
    def total(self) -> int:
        self._flush()
        return self._total

    @property
    def lo(self) -> float:
        self._flush()
        return self._lo

    @property
    def hi(self) -> float:
        self._flush()
        return self._hi

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(int(v))

    def merge(self, other: LogHistogram) -> None:
        self._flush()
        for b, k in other.counts.items():
            self._counts[b] = self._counts.get(b, 0) + k
        self._n += other.n
        self._total += other.total
        self._lo = min(self._lo, other.lo)
        self._hi = max(self._hi, other.hi)

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

    def buckets(self) -> list[tuple[float, int]]:
        """(the middle of a bucket, its count) for every bucket that holds a value, in order of
        value: the distribution, to plot or compare (clamped to the observed min and max, as
        :meth:`percentile` is)."""
        return [(min(max(_bucket_value(b), self.lo), self.hi), self.counts[b]) for b in sorted(self.counts)]

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
