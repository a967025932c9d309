"""Time units. Simulated time is an integer number of nanoseconds everywhere.

Durations in scenario files may be written as integers (nanoseconds) or as strings with a
unit: ``"2.5 us"``, ``"3ms"``, ``"1 s"``. This module is the one place that converts.
"""

from __future__ import annotations

import re

NS = 1
US = 1_000
MS = 1_000_000
S = 1_000_000_000

_UNITS = {"ns": NS, "us": US, "µs": US, "ms": MS, "s": S}
_DURATION_RE = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(ns|us|µs|ms|s)\s*$")


class DurationError(ValueError):
    """A duration string that cannot be read."""


def parse_duration(value: object) -> int:
    """Return ``value`` as integer nanoseconds.

    Accepts an int (nanoseconds), a float (nanoseconds, rounded) or a string with a unit.
    Raises :class:`DurationError` with a message that says what is accepted.
    """
    if isinstance(value, bool):
        raise DurationError(f"expected a duration such as '2 us' or an integer of ns, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise DurationError(f"expected a finite duration, got {value!r}")
        return int(round(value))
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if m is None:
            raise DurationError(f"cannot read duration {value!r}; write a number and a unit (ns, us, ms, s), e.g. '2.5 us'")
        ns = float(m.group(1)) * _UNITS[m.group(2)]
        if ns in (float("inf"), float("-inf")):
            raise DurationError(f"{value!r} is too large to be a duration; write it with a smaller number or unit")
        return int(round(ns))
    raise DurationError(f"expected a duration such as '2 us' or an integer of ns, got {type(value).__name__}")


def fmt_ns(ns: float) -> str:
    """Human-readable duration: picks the largest unit that keeps the number >= 1."""
    a = abs(ns)
    if a >= S:
        return f"{ns / S:.3g} s"
    if a >= MS:
        return f"{ns / MS:.3g} ms"
    if a >= US:
        return f"{ns / US:.3g} us"
    return f"{ns:.0f} ns"
