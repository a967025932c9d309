import re
from dataclasses import dataclass
from typing import Literal

import pytest

from sim.config import from_mapping, knob, set_path, to_mapping
from sim.errors import ConfigError
from sim.rng import Streams
from sim.stats import LogHistogram
from sim.units import MS, US, fmt_ns, parse_duration


def test_parse_duration_units():
    assert parse_duration("2.5 us") == 2500
    assert parse_duration("3ms") == 3 * MS
    assert parse_duration("1 s") == 1_000_000_000
    assert parse_duration(42) == 42
    assert parse_duration("10ns") == 10
    with pytest.raises(ValueError, match="unit"):
        parse_duration("3 fortnights")
    with pytest.raises(ValueError):
        parse_duration(True)
    with pytest.raises(ValueError, match="too large"):
        parse_duration("1e400 s")  # float('1e400') is inf: no OverflowError traceback


def test_fmt_ns():
    assert fmt_ns(1500) == "1.5 us"
    assert fmt_ns(2 * MS) == "2 ms"
    assert fmt_ns(12) == "12 ns"


@dataclass(frozen=True)
class Inner:
    cost: int = knob(5 * US, doc="a cost", unit="ns", min=0)


@dataclass(frozen=True)
class Outer:
    n: int = knob(1, doc="count", min=1, max=8)
    mode: Literal["a", "b"] = knob("a", doc="mode")
    inner: Inner = knob(default_factory=Inner, doc="inner")
    cpus: tuple[int, ...] = knob((), doc="cpus")


def test_from_mapping_ok_and_roundtrip():
    o = from_mapping(Outer, {"n": 3, "mode": "b", "inner": {"cost": "2 us"}, "cpus": [0, 2]})
    assert o == Outer(3, "b", Inner(2000), (0, 2))
    assert from_mapping(Outer, to_mapping(o)) == o


@pytest.mark.parametrize(
    "data, field, words",
    [
        ({"nn": 1}, "x.nn", "did you mean 'n'"),
        ({"n": 0}, "x.n", "below the minimum"),
        ({"n": 9}, "x.n", "above the maximum"),
        ({"n": "3"}, "x.n", "expected an integer"),
        ({"n": True}, "x.n", "expected an integer"),
        ({"mode": "c"}, "x.mode", "is not one of"),
        ({"inner": {"cost": -1}}, "x.inner.cost", "negative"),
        ({"inner": {"cost": "-1 us"}}, "x.inner.cost", "-1 us is negative"),  # a number and a unit: read, then bounded
        ({"inner": {"cost": "3 parsecs"}}, "x.inner.cost", "cannot read duration"),
        ({"inner": 3}, "x.inner", "expected a table"),
        ({"cpus": 3}, "x.cpus", "expected a list"),
    ],
)
def test_from_mapping_errors_name_the_field(data, field, words):
    with pytest.raises(ConfigError) as ei:
        from_mapping(Outer, data, "x")
    assert ei.value.field == field
    assert words in str(ei.value)


def test_set_path():
    d = {"a": {"b": 1}}
    set_path(d, "a.c.d", 2)
    assert d == {"a": {"b": 1, "c": {"d": 2}}}
    with pytest.raises(ConfigError):
        set_path(d, "a.b.c", 1)
    # an empty key path (--set =3) is named as such, not as a blank
    for bad in ("", "a..b", ".a"):
        with pytest.raises(ConfigError, match=f"^{re.escape(repr(bad))}: is not a valid key path"):
            set_path(d, bad, 1)


def test_streams_are_named_and_reproducible():
    a, b = Streams(7), Streams(7)
    assert a.get("x").random() == b.get("x").random()
    assert Streams(7).get("x").random() != Streams(7).get("y").random()
    assert Streams(7).get("x").random() != Streams(8).get("x").random()
    # creating another stream first does not change a stream's numbers
    c = Streams(7)
    c.get("other").random()
    assert c.get("x").random() == Streams(7).get("x").random()


def test_jitter_mean_and_cv():
    j = Streams(3).jitter("j", 0.2)
    xs = [j.apply(1_000_000) for _ in range(20000)]
    mean = sum(xs) / len(xs)
    sd = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
    assert abs(mean / 1_000_000 - 1) < 0.01
    assert abs(sd / mean - 0.2) < 0.01
    assert Streams(3).jitter("j", 0.0).apply(123) == 123


def test_log_histogram_percentiles():
    h = LogHistogram()
    h.extend(range(1, 10001))
    assert h.n == 10000 and h.lo == 1 and h.hi == 10000
    for q in (50, 90, 99):
        assert abs(h.percentile(q) / (q * 100) - 1) < 0.02


def test_log_histogram_bucket_bounds():
    from sim.stats import _bucket, _bucket_value

    for v in [0, 1, 63, 64, 65, 1000, 12345, 10**6, 10**9 + 7, 2**40 + 3]:
        mid = _bucket_value(_bucket(v))
        assert abs(mid - v) <= max(0.5, v / 64), (v, mid)
    # buckets are ordered like the values
    vals = [0, 5, 64, 100, 127, 128, 1000, 10**6]
    assert [_bucket(v) for v in vals] == sorted(_bucket(v) for v in vals)
