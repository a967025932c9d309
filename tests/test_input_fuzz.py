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


def _keys(cat: sc.Catalog, kind: str) -> list[str]:
    groups: list[tuple[str, type]] = [("scenario.", sc.ScenarioMeta), ("machine.", MachineConfig), ("kernel.", KernelConfig)]
    groups += [("costs.", Costs), *((f"kernel.{n}.", m.config) for n, m in cat.mechanisms.items())]
    groups.append(("workload.", cat.workloads[kind].config))
    return [key for prefix, cls in groups for key, *_ in describe(cls, prefix)]


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "scenarios").glob("*.toml")))
def test_every_knob_refuses_junk_with_one_clear_error(name):
    cat = models.catalog()
    base = sc.load(ROOT / "scenarios" / f"{name}.toml")
    tried = 0
    for key in _keys(cat, base["workload"]["kind"]):
        for value in JUNK:
            data = copy.deepcopy(base)
            try:
                set_path(data, key, value)
                sc.build(sc.validate(data, cat), cat)
            except ConfigError as exc:
                # "field: problem (fix)", the field dotted like the knob's key
                field = str(exc).split(":", 1)[0]
                assert "." in field or field in ("scenario", "machine", "kernel", "costs", "workload"), (key, value, str(exc))
            except RcusimError:
                pass
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"{name}: {key} = {value!r} raised {type(exc).__name__}: {exc}")
            tried += 1
    assert tried > 20 * len(JUNK)
