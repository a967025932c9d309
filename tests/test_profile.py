"""Profiles: schema, versions and upgrades, one clear error per bad file (tested through the CLI),
params files and how a run uses them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.cli import main
from calibration.params import apply_params, load_params
from calibration.profile import (
    DEFAULT_PARAMS,
    DEFAULT_PROFILE,
    SCHEMA_FILE,
    SCHEMA_VERSION,
    load_profile,
    schema_text,
    validate_profile,
)
from sim.errors import ConfigError


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(DEFAULT_PROFILE.read_text())


def small(raw: dict, items: tuple[str, ...] = ("syscall", "context_switch")) -> dict:
    """A valid profile with only a few items (fast to write and load)."""
    d = copy.deepcopy(raw)
    d["items"] = {k: d["items"][k] for k in items}
    return d


def write(tmp_path: Path, data: object, name: str = "p.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ schema


def test_committed_json_schema_equals_the_generated_one():
    assert SCHEMA_FILE.read_text() == schema_text(), "regenerate it: python -m calibration.profile --write-schema"


def test_bundled_profile_validates_with_pydantic_and_json_schema(raw):
    prof = load_profile(DEFAULT_PROFILE)
    assert prof.schema_version == SCHEMA_VERSION and prof.upgraded_from is None
    assert prof.cpus >= 1 and prof.items["syscall"].status == "ok"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(raw, json.loads(SCHEMA_FILE.read_text()))


def v0_of(raw: dict) -> dict:
    """What collector 0.0.x wrote (schema 0): see calibration/profile.py."""
    d = small(raw, ("syscall", "pipe_message"))
    d["schema_version"] = 0
    for key in ("kind", "warnings", "settings_changed"):
        d.pop(key)
    d["machine"].pop("cpus_allowed")
    for item in d["items"].values():
        for obj in [item, *item.get("series", [])]:
            obj.pop("samples_total")
            obj.pop("histogram")
    return d


def test_v0_profile_is_upgraded(tmp_path, raw):
    prof = load_profile(write(tmp_path, v0_of(raw)))
    assert prof.upgraded_from == 0 and prof.schema_version == SCHEMA_VERSION
    assert prof.kind == "rcusim-profile" and prof.warnings == [] and prof.settings_changed == []
    online = raw["machine"]["cpus_online"]["count"]
    assert prof.machine.cpus_allowed.count == online
    new = raw["items"]["syscall"]
    up = prof.items["syscall"]
    assert up.samples_total == new["samples_total"]
    # the histogram is rebuilt from the stored samples exactly as the collector builds it
    if new["samples_total"] == len(new["samples"]):
        assert [list(b) for b in up.histogram.buckets] == new["histogram"]["buckets"]
    assert prof.items["pipe_message"].get_series("same_cpu_pingpong") is not None


# ------------------------------------------------------------------ bad profiles: one line each, through the CLI


def _bad_cases(raw: dict) -> dict[str, tuple[object, str]]:
    good = small(raw)
    text = json.dumps(good)
    newer = dict(good, schema_version=SCHEMA_VERSION + 1)
    no_items = {k: v for k, v in good.items() if k != "items"}
    negative = copy.deepcopy(good)
    negative["items"]["syscall"]["samples"][3] = -5.0
    wrong_type = copy.deepcopy(good)
    wrong_type["items"]["syscall"]["samples_total"] = "many"
    bad_stats = copy.deepcopy(good)
    bad_stats["items"]["syscall"]["stats"]["count"] += 1
    not_profile = {"hello": "world"}
    return {
        "truncated": (text[: len(text) // 2], "truncated"),
        "empty": ("", "is empty"),
        "newer": (newer, f"schema_version: {SCHEMA_VERSION + 1} is newer than this rcusim reads"),
        "missing items": (no_items, "items: is required"),
        "negative samples": (negative, "items.syscall.samples[3]: -5.0 is negative"),
        "wrong type": (wrong_type, "items.syscall.samples_total: input should be a valid integer"),
        "inconsistent stats": (bad_stats, "items.syscall: stats.count"),
        "not a profile": (not_profile, "kind: is None, not 'rcusim-profile'"),
        "not an object": ([1, 2], "expected a JSON object"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "truncated",
        "empty",
        "newer",
        "missing items",
        "negative samples",
        "wrong type",
        "inconsistent stats",
        "not a profile",
        "not an object",
    ],
)
def test_bad_profile_gives_one_clear_line_and_exit_2(case, tmp_path, raw, capsys):
    data, words = _bad_cases(raw)[case]
    p = write(tmp_path, data)
    for args in (["calibrate", str(p), "--out", str(tmp_path / "o.toml")], ["validate", "--profile", str(p)]):
        rc, out, err = cli(args, capsys)
        assert rc == 2, (case, args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"rcusim: error: {p}"), lines[0]
        assert words in lines[0], lines[0]
        assert "Traceback" not in err


def test_missing_item_needed_by_the_fit_is_named(tmp_path, raw, capsys):
    p = write(tmp_path, small(raw))  # no pipe_costs
    rc, _, err = cli(["calibrate", str(p), "--out", str(tmp_path / "o.toml")], capsys)
    assert rc == 2
    assert "items.pipe_costs: is missing from the profile (collect it: rcusim collect --items pipe_costs" in err


def test_profile_without_composites_cannot_be_validated(tmp_path, raw, capsys):
    p = write(tmp_path, small(raw))
    rc, _, err = cli(["validate", "--profile", str(p), "--params", str(DEFAULT_PARAMS)], capsys)
    assert rc == 2 and "items.messaging: is missing" in err


def test_missing_file_and_validate_profile_error():
    with pytest.raises(ConfigError, match="no such profile file"):
        load_profile("/nonexistent/p.json")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        validate_profile("x")


# ------------------------------------------------------------------ params files and runs


def test_params_file_loads_and_rejects_bad_values(tmp_path):
    params = load_params(DEFAULT_PARAMS)
    assert params.costs["syscall"] > 0 and "jitter_cv" in params.costs
    bad = tmp_path / "bad.toml"
    bad.write_text("[costs]\nsyscal = 3\n")
    with pytest.raises(ConfigError, match="costs.syscal: unknown key"):
        load_params(bad)
    bad.write_text("[costs]\nwakeup = -3\n")
    with pytest.raises(ConfigError, match="costs.wakeup: -3 ns is negative"):
        load_params(bad)
    bad.write_text("[cost]\nwakeup = 3\n")
    with pytest.raises(ConfigError, match="cost: unknown section"):
        load_params(bad)


def test_apply_params_merges_costs_and_kernel_sections():
    from calibration.params import Params

    data = {"costs": {"wakeup": 1, "tick": 2}, "kernel": {"hz": 100}}
    apply_params(data, Params("x", {"wakeup": 5}, {"rcu": {"blimit": 3}}))
    assert data == {"costs": {"wakeup": 5, "tick": 2}, "kernel": {"hz": 100, "rcu": {"blimit": 3}}}


SMALL = [
    "--set",
    "workload.groups=1",
    "--set",
    "workload.senders=2",
    "--set",
    "workload.receivers=2",
    "--set",
    "workload.loops=5",
]


def test_run_with_params_then_set_wins(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text("[costs]\nwakeup = 7777\ncontext_switch = 1234\n")
    rc, out, err = cli(["run", "messaging-demo", "--json", "--params", str(f), "--set", "costs.wakeup=42", *SMALL], capsys)
    assert rc == 0, err
    costs = json.loads(out)["params"]["costs"]
    assert costs["context_switch"] == 1234 and costs["wakeup"] == 42
    rc, _, err = cli(["run", "messaging-demo", "--params", str(tmp_path / "none.toml")], capsys)
    assert rc == 2 and "no such params file" in err


def test_run_with_profile_uses_its_params_file(tmp_path, capsys):
    rc, out, err = cli(["run", "messaging-demo", "--json", "--profile", str(DEFAULT_PROFILE), *SMALL], capsys)
    assert rc == 0, err
    assert json.loads(out)["params"]["costs"] == load_params(DEFAULT_PARAMS).costs


# ------------------------------------------------------------------ items from a later run


def test_collector_style_dump_reproduces_the_bundled_file_byte_for_byte():
    from calibration.profile import dumps

    text = DEFAULT_PROFILE.read_text()
    assert dumps(json.loads(text)) == text


def test_merge_adds_items_and_records_the_later_run(raw):
    from calibration.profile import merge_items

    base = small(raw)
    base.pop("item_runs", None)
    new = small(raw, ("fork_exec",))
    new.pop("item_runs", None)
    new["start_time"] = "2030-01-01T00:00:00Z"
    new["load"] = {"other_cpu_share": 0.25}
    merged = validate_profile(merge_items(base, new, merged="test"), "m")
    assert list(merged.items) == ["syscall", "context_switch", "fork_exec"]
    run = merged.run_of("fork_exec")
    assert run is not None and run.start_time == "2030-01-01T00:00:00Z" and run.merged == "test"
    assert merged.run_of("syscall") is None
    assert merged.collected("fork_exec") == "later run 2030-01-01T00:00:00Z, other CPU share 0.25"
    # merging the item again moves it to the newer run
    again = validate_profile(merge_items(merge_items(base, new), new), "m2")
    assert [r.items for r in again.item_runs] == [["fork_exec"]]


def test_merge_refuses_another_machine(raw):
    from calibration.profile import merge_items

    base, new = small(raw), small(raw, ("fork_exec",))
    base.pop("item_runs", None)
    new.pop("item_runs", None)
    new["uname"] = {**new["uname"], "nodename": "elsewhere"}
    with pytest.raises(ConfigError, match="new profile: uname.nodename: is 'elsewhere'"):
        merge_items(base, new)
    new["uname"] = dict(base["uname"])
    new["machine"] = {**new["machine"], "kernel_release": "1.0"}
    with pytest.raises(ConfigError, match="new profile: machine.kernel_release"):
        merge_items(base, new)


def test_profile_of_an_older_collector_without_the_component_items_loads(raw):
    old = copy.deepcopy(raw)
    for name in ("tool_exec", "pi_futex_uncontended"):
        old["items"].pop(name)
    old.pop("item_runs", None)
    prof = validate_profile(old, "old")
    assert prof.item_runs == [] and "tool_exec" not in prof.items


def test_wake_affine_follows_the_measured_wake_placement(raw):
    # kernel.wake_affine: 'pack' only when the collector saw most wakeups of a free thread stay
    # on the waker's CPU with the other CPUs idle; else the kernel version's rule
    base = small(raw)
    assert validate_profile(base, "p").wake_affine == "weight"  # 6.18 without the item
    item = copy.deepcopy(raw["items"]["syscall"])  # any measured item's fields, relabelled
    series = {k: item[k] for k in ("unit", "samples_total", "stats", "histogram", "samples")}
    item["series"] = [{"label": "idle_others", "params": {}, **series}]
    for share, rule in ((0.98, "pack"), (0.5, "pack"), (0.02, "weight")):
        d = copy.deepcopy(base)
        it = copy.deepcopy(item)
        it["series"][0]["on_waker_cpu_share"] = share
        d["items"]["wake_placement"] = it
        prof = validate_profile(d, "p")
        assert prof.on_waker_cpu_share == share and prof.wake_affine == rule


def test_fork_balance_follows_the_measured_fork_placement(raw):
    # kernel.fork_balance: 'pack' only when the collector's fork series saw most children start
    # on their running parent's CPU with the other CPUs idle; without the series, mainline's rule
    base = small(raw)
    assert validate_profile(base, "p").fork_balance == "idlest"
    item = copy.deepcopy(raw["items"]["syscall"])
    series = {k: item[k] for k in ("unit", "samples_total", "stats", "histogram", "samples")}
    item["series"] = [{"label": "idle_others", "params": {}, "on_waker_cpu_share": 0.0, **series}]
    d = copy.deepcopy(base)
    d["items"]["wake_placement"] = copy.deepcopy(item)
    assert validate_profile(d, "p").fork_balance == "idlest"  # an older collector: no fork series
    for share, rule in ((0.97, "pack"), (0.5, "pack"), (0.03, "idlest")):
        it = copy.deepcopy(item)
        it["series"].append({"label": "fork", "params": {}, "on_parent_cpu_share": share, **series})
        d["items"]["wake_placement"] = it
        assert validate_profile(d, "p").fork_balance == rule
