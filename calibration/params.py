"""Calibrated parameter files: what ``rcusim calibrate`` writes and ``rcusim run --params`` reads.

A params file is TOML::

    # comments: the profile, the machine, and for every value how it was obtained
    [calibration]            # provenance of the whole file (informational)
    profile = "calibration/profiles/default.json"
    ...
    [costs]                  # sim.params.Costs fields, ns (jitter_cv: a ratio)
    syscall = 132
    ...
    [provenance.costs]       # per value: method, formula, inputs, 95 % interval
    syscall = { method = "direct", formula = "syscall median", ci95 = [132.1, 132.6] }

Mechanism parameters fitted later go to ``[kernel.NAME]`` tables (e.g. ``[kernel.rcu]``) and are
merged the same way. Workload knobs measured by a component item (``tool_work`` of the ``netns``
workload from ``tool_exec``, ``futex_op`` of ``pi_futex`` from ``pi_futex_uncontended``) go to
``[workload.KIND]`` tables, merged only into a scenario whose ``workload.kind`` is KIND.
:func:`apply_params` merges ``[costs]``, ``[kernel.*]`` and the matching ``[workload.*]`` into a
scenario mapping *before* ``--set`` overrides, so the order is: defaults < scenario file <
params < --set.
"""

from __future__ import annotations

import hashlib
import json
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.config import from_mapping
from sim.errors import ConfigError
from sim.params import Costs

from .fit import HELD_BACK, Calibration

TOP_KEYS = ("calibration", "costs", "kernel", "workload", "provenance")


@dataclass(frozen=True)
class Params:
    """A loaded params file."""

    source: str
    costs: dict[str, Any]
    kernel: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``[workload.KIND]`` tables: knobs for a scenario whose workload is KIND."""

    def holds(self, key: str) -> bool:
        """Whether the scenario key path ``key`` (``kernel.rcu.nocb``, ``costs.wakeup``,
        ``workload.calls``) takes its value from this file, so that an error about it can name
        the file."""
        parts = key.split(".")
        if parts[0] == "costs" and len(parts) > 1:
            return parts[1] in self.costs
        if parts[0] == "kernel" and len(parts) > 2:
            return parts[2] in self.kernel.get(parts[1], {})
        if parts[0] == "workload" and len(parts) > 1:
            return any(parts[1] in knobs for knobs in self.workload.values())
        return False


def sibling_params(profile_path: str | Path) -> Path:
    """Where ``rcusim calibrate`` writes by default: ``NAME-params.toml`` next to ``NAME.json``."""
    p = Path(profile_path)
    return p.with_name(f"{p.stem}-params.toml")


def load_params(path: str | Path) -> Params:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(name, "no such params file", "write one with: rcusim calibrate PROFILE --out FILE") from None
    except OSError as exc:
        raise ConfigError(name, f"cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(name, f"not valid TOML: {exc}", "fix the syntax at the position shown") from None
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(f"{name}: {key}", "unknown section", f"a params file has {', '.join(TOP_KEYS)}")
    costs = data.get("costs", {})
    if not isinstance(costs, Mapping):
        raise ConfigError(f"{name}: costs", "expected a table")
    try:
        from_mapping(Costs, costs, "costs")  # validate: unknown keys, types, bounds
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc.field}", exc.problem, exc.fix) from None
    kernel = data.get("kernel", {})
    if not isinstance(kernel, Mapping) or not all(isinstance(v, Mapping) for v in kernel.values()):
        raise ConfigError(f"{name}: kernel", "expected [kernel.NAME] tables of mechanism parameters")
    workload = data.get("workload", {})
    if not isinstance(workload, Mapping) or not all(isinstance(v, Mapping) for v in workload.values()):
        raise ConfigError(f"{name}: workload", "expected [workload.KIND] tables of workload knobs")
    if not costs and not kernel and not workload:
        raise ConfigError(
            name,
            "holds no parameters (no [costs], [kernel.*] or [workload.*] values)",
            "write one with: rcusim calibrate PROFILE --out FILE",
        )
    return Params(
        name,
        dict(costs),
        {k: dict(v) for k, v in kernel.items()},
        dict(data.get("calibration", {})),
        {k: dict(v) for k, v in workload.items()},
    )


def apply_params(data: dict[str, Any], params: Params) -> dict[str, Any]:
    """Merge ``params`` into a parsed scenario mapping (in place; also returned)."""
    costs = data.setdefault("costs", {})
    if not isinstance(costs, dict):
        raise ConfigError("costs", "expected a table")
    costs.update(params.costs)
    if params.kernel:
        kernel = data.setdefault("kernel", {})
        if not isinstance(kernel, dict):
            raise ConfigError("kernel", "expected a table")
        for name, values in params.kernel.items():
            section = kernel.setdefault(name, {})
            if not isinstance(section, dict):
                raise ConfigError(f"kernel.{name}", "expected a table")
            section.update(values)
    wl = data.get("workload")
    if isinstance(wl, dict) and wl.get("kind") in params.workload:
        wl.update(params.workload[wl["kind"]])
    return data


def params_from_calibration(cal: Calibration, source: str = "calibration") -> Params:
    return Params(source, dict(cal.costs_mapping()), {}, {"profile": cal.profile_source}, cal.workload_mapping())


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def _fmt_ci(lo: float | None, hi: float | None, unit: str) -> str:
    """The interval with its unit: ``ns`` for costs, ``/s`` for the rates, none for a ratio."""
    if lo is None or hi is None:
        return "no interval"
    if unit == "ns":
        return f"95% CI {lo:.0f}..{hi:.0f} ns"
    if unit == "/s":
        return f"95% CI {lo:.2f}..{hi:.2f} per second"
    return f"95% CI {lo:.3f}..{hi:.3f}"


def cost_unit(name: str) -> str:
    """``ns`` for a Costs field in nanoseconds, ``/s`` for a rate per second (``*_per_s``), ``""``
    for a ratio (``jitter_cv``)."""
    if name.endswith("_per_s"):
        return "/s"
    return "" if name == "jitter_cv" else "ns"


def params_toml(cal: Calibration, profile_path: str | Path, *, command: str = "", version: str = "") -> str:
    """The params file for ``cal`` (see the module docstring)."""
    p = Path(profile_path)
    try:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        digest = ""
    m = cal.machine
    lines = [
        "# rcusim calibrated parameters, written by `rcusim calibrate`; see docs/readme/calibration.md.",
        f"# profile: {cal.profile_source}",
        f"# machine: host {m.get('host')}, kernel {m.get('kernel')}, {m.get('cpu_model')}, {m.get('cpus')} CPUs, "
        f"HZ {m.get('hz')}, preempt {m.get('preempt')}{', virtual machine' if m.get('hypervisor') else ''}",
        f"# collected {m.get('collected')} ({m.get('mode')} mode); fitted with {cal.seeds} seeds, {cal.bootstrap} bootstrap replicates",
        f"# held-back composites never used here: {', '.join(sorted(HELD_BACK))}",
        "# use: rcusim run SCENARIO --params THIS_FILE   (merged into [costs], and [workload.KIND] into a KIND "
        "workload, before --set)",
        "",
        "[calibration]",
        f"rcusim_version = {toml_value(version)}",
        f"command = {toml_value(command)}",
        f"created = {toml_value(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))}",
        f"profile = {toml_value(cal.profile_source)}",
        f"profile_sha256 = {toml_value(digest)}",
        f"seeds = {cal.seeds}",
        f"bootstrap = {cal.bootstrap}",
    ]
    for key in ("host", "kernel", "cpu_model", "cpus", "hz", "preempt"):
        if m.get(key) is not None:
            lines.append(f"{key} = {toml_value(m[key])}")
    lines += ["", "[costs]"]
    costs = cal.costs_mapping()
    for name, value in costs.items():
        if name == "tick_busy":
            t = cal.tick_busy
            lines.append(f"# measured table: {t.formula or 'none in the profile (ticks are tick x jitter)'}")
            lines.append(f"{name} = {toml_value(value)}")
            continue
        if name in ("other_gaps", "other_gaps_per_s"):
            if name == "other_gaps":
                lines.append(f"# measured: {cal.other_gaps.formula or 'none in the profile (no other interruptions)'}")
            lines.append(f"{name} = {toml_value(value)}")
            continue
        e = cal.estimates[name]
        lines.append(f"# {e.method}: {e.formula}; {_fmt_ci(e.low, e.high, cost_unit(name))}")
        lines.append(f"{name} = {toml_value(value)}")
    for kind, knobs in cal.workload.items():
        lines += ["", f"[workload.{kind}]"]
        for name, e in knobs.items():
            lines.append(f"# {e.method}: {e.formula}; {_fmt_ci(e.low, e.high, 'ns')}")
            if e.note:
                lines.append(f"# {e.note}")
            lines.append(f"{name} = {toml_value(int(round(e.value)))}")
    lines += ["", "[provenance.costs]"]
    for name in costs:
        if name == "tick_busy":
            t = cal.tick_busy
            entry = {"method": "measured", "formula": t.formula or "no table in the profile", "inputs": list(t.inputs)}
            lines.append(f"{name} = {toml_value(entry)}")
            continue
        if name in ("other_gaps", "other_gaps_per_s"):
            g = cal.other_gaps
            entry = {"method": "measured", "formula": g.formula or "none in the profile", "inputs": list(g.inputs)}
            lines.append(f"{name} = {toml_value(entry)}")
            continue
        e = cal.estimates[name]
        ci = None if e.low is None else [round(e.low, 3), round(e.high or 0.0, 3)]
        entry = {"method": e.method, "formula": e.formula, "inputs": list(e.inputs), "ci95": ci}
        lines.append(f"{name} = {toml_value(entry)}")
    for kind, knobs in cal.workload.items():
        lines += ["", f"[provenance.workload.{kind}]"]
        for name, e in knobs.items():
            ci = None if e.low is None else [round(e.low, 3), round(e.high or 0.0, 3)]
            entry = {"method": e.method, "formula": e.formula, "inputs": list(e.inputs), "ci95": ci, "note": e.note}
            lines.append(f"{name} = {toml_value(entry)}")
    return "\n".join(lines) + "\n"


def resolve_params(
    params_path: str | None,
    profile_path: str | None,
    *,
    seeds: int = 3,
    progress: Callable[[str, float], None] | None = None,
) -> Params | None:
    """The parameters ``--params FILE`` or ``--profile FILE`` ask for: a params file as given;
    for a profile, the params file ``rcusim calibrate`` wrote next to it, or else a calibration
    made now (without bootstrap intervals; ``progress(what, fraction)`` follows it). None when
    neither is given."""
    if params_path:
        return load_params(params_path)
    if not profile_path:
        return None
    from .fit import calibrate
    from .profile import load_profile

    profile = load_profile(profile_path)
    sibling = sibling_params(profile_path)
    if sibling.is_file():
        return load_params(sibling)
    cal = calibrate(profile, seeds=seeds, bootstrap=0, progress=progress)
    return params_from_calibration(cal, source=f"{profile_path} (calibrated now)")
