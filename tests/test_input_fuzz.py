"""Bad values for every knob of every bundled scenario: one clear error naming a field, never a
traceback (the promise of README's CLI section), checked the way ``rcusim run --set`` applies
them (set, validate, build the machine and its mechanisms)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import models
from sim import scenario as sc
from sim.config import describe, set_path
from sim.errors import ConfigError, RcusimError
from sim.params import Costs, KernelConfig, MachineConfig

ROOT = Path(__file__).resolve().parents[1]
JUNK = [
    "x",
    "",
    -1,
    0,
    1,
    -1e30,
    1e30,
    2**70,
    1.5,
    -0.5,
    True,
    [],
    [1, -1],
    {"a": 1},
    "1 ms",
    "-3 us",
    "nan",
    float("nan"),
    float("inf"),
    "all",
    "none",
    [0, 99],
    "1e400 s",
]


NOT_A_NUMBER = ("x", {"a": 1}, [1, -1], "1e400 s")
"""Values no numeric knob (a count, a rate, a duration) may take."""


def _keys(cat: sc.Catalog, kind: str) -> list[tuple[str, str]]:
    """(key, type) of every knob a scenario of workload ``kind`` has."""
    groups: list[tuple[str, type]] = [("scenario.", sc.ScenarioMeta), ("machine.", MachineConfig), ("kernel.", KernelConfig)]
    groups += [("costs.", Costs), *((f"kernel.{n}.", m.config) for n, m in cat.mechanisms.items())]
    groups.append(("workload.", cat.workloads[kind].config))
    return [(key, tp) for prefix, cls in groups for key, tp, *_ in describe(cls, prefix)]


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "scenarios").glob("*.toml")))
def test_junk_in_any_knob_gives_one_clear_error_or_a_valid_scenario(name):
    # a value either builds a valid machine (1, "1 ms", "all" fit some knobs) or is refused
    # with "field: problem (fix)"; never another exception; and a numeric knob refuses every
    # value of NOT_A_NUMBER
    cat = models.catalog()
    base = sc.load(ROOT / "scenarios" / f"{name}.toml")
    numeric = 0
    for key, tp in _keys(cat, base["workload"]["kind"]):
        for value in JUNK:
            data = copy.deepcopy(base)
            refused = True
            try:
                set_path(data, key, value)
                sc.build(sc.validate(data, cat), cat)
                refused = False
            except ConfigError as exc:
                # "field: problem (fix)", the field dotted like the knob's key
                field = str(exc).split(":", 1)[0]
                assert "." in field or field in ("scenario", "machine", "kernel", "costs", "workload"), (key, value, str(exc))
            except RcusimError:
                pass
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"{name}: {key} = {value!r} raised {type(exc).__name__}: {exc}")
            if tp in ("int", "float") and value in NOT_A_NUMBER:
                assert refused, f"{name}: {key} ({tp}) accepted {value!r}"
                numeric += 1
    assert numeric >= 20 * len(NOT_A_NUMBER)
