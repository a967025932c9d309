"""Scenarios: a TOML file -> a validated, frozen :class:`Scenario` -> a run -> a :class:`Result`.

The phases are explicit (as desmod's elaborate/run/collect): :func:`load` parses and applies
``--set`` overrides, :func:`validate` builds typed configuration and rejects anything unknown,
:func:`run` builds the machine, installs the kernel mechanisms and the workload, runs the
simulation and collects a result that carries its parameters, seed, version and wall time.

A scenario file::

    [scenario]
    name = "pipes"
    seed = 1
    duration = "1 s"          # or leave it out to run until the workload ends

    [machine]
    cpus = 4

    [kernel]
    hz = 1000
    [kernel.rcu]              # a mechanism's section (models/ declares them)
    nocb = "all"

    [costs]
    context_switch = "2 us"

    [workload]
    kind = "messaging"
    groups = 2

Which mechanisms and workloads exist is given by a :class:`Catalog` that ``models`` builds;
``sim`` does not import ``models``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import simpy
from simpy.core import StopSimulation

from .config import ConfigError, from_mapping, knob, set_path, to_mapping
from .errors import ScenarioError
from .machine import Env, Machine
from .params import Costs, KernelConfig, MachineConfig
from .rng import Streams
from .stats import LogHistogram
from .task import BLOCKED as T_BLOCKED
from .trace import Tracer
from .units import S

VERSION = "0.1.0"


class Workload(Protocol):
    """What a workload builder returns."""

    def metrics(self) -> dict[str, float]:
        """Headline figures (throughput, times, counts), flat name -> number."""
        ...


@dataclass(frozen=True)
class Mechanism:
    """A kernel mechanism of ``models/``: its ``[kernel.NAME]`` section and how to install it."""

    name: str
    config: type
    install: Callable[[Machine, Any], Any]
    doc: str = ""


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload kind: its ``[workload]`` fields and how to build it on a machine."""

    kind: str
    config: type
    build: Callable[[Machine, Any], Workload]
    doc: str = ""


@dataclass(frozen=True)
class Catalog:
    mechanisms: Mapping[str, Mechanism] = field(default_factory=dict)
    workloads: Mapping[str, WorkloadSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class ScenarioMeta:
    name: str = knob("unnamed", doc="scenario name, shown in results")
    description: str = knob("", doc="what the scenario shows")
    seed: int = knob(1, doc="seed of every random stream of the run", min=0, max=2**63 - 1)
    duration: int | None = knob(None, doc="simulated time to run; leave out to run until the workload ends", unit="ns", min=1)
    max_time: int = knob(600 * S, doc="simulated-time limit for runs that stop when the workload ends", unit="ns", min=1)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. ``raw`` is the mapping it was built from (after overrides)."""

    meta: ScenarioMeta
    machine: MachineConfig
    kernel: KernelConfig
    mechanisms: tuple[tuple[str, Any], ...]
    costs: Costs
    workload_kind: str
    workload: Any
    raw: Mapping[str, Any]

    def mechanism(self, name: str) -> Any:
        for n, cfg in self.mechanisms:
            if n == name:
                return cfg
        raise KeyError(name)


_TOP_KEYS = ("scenario", "machine", "kernel", "costs", "workload")


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML syntax when it parses (numbers, true, [1, 2], "quoted"),
    otherwise the bare string (so ``--set kernel.preempt=full`` works unquoted)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read a scenario file and apply ``overrides`` (dotted key -> value)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            str(path), "no such scenario file", "give the path of a .toml scenario, or a bundled name (rcusim list)"
        ) from None
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}", "fix the syntax at the position shown") from None
    for key, value in (overrides or {}).items():
        set_path(data, key, value)
    return data


def validate(data: Mapping[str, Any], catalog: Catalog) -> Scenario:
    """Turn a parsed scenario mapping into a :class:`Scenario`, or raise ConfigError."""
    for key in data:
        if key not in _TOP_KEYS:
            close = difflib.get_close_matches(key, _TOP_KEYS, n=1)
            raise ConfigError(
                key, "unknown section", f"did you mean {close[0]!r}?" if close else f"sections are {', '.join(_TOP_KEYS)}"
            )
    meta = from_mapping(ScenarioMeta, data.get("scenario", {}), "scenario")
    machine = from_mapping(MachineConfig, data.get("machine", {}), "machine")
    kernel_raw = dict(data.get("kernel", {}))
    if not isinstance(data.get("kernel", {}), Mapping):
        raise ConfigError("kernel", "expected a table")
    sections = {}
    for name in list(kernel_raw):
        if name in catalog.mechanisms:
            sections[name] = kernel_raw.pop(name)
    try:
        kernel = from_mapping(KernelConfig, kernel_raw, "kernel")
    except ConfigError as exc:
        if exc.problem == "unknown key" and catalog.mechanisms:
            raise ConfigError(
                exc.field, "unknown key", f"{exc.fix}; mechanism sections are {', '.join(sorted(catalog.mechanisms))}"
            ) from None
        raise
    mechs: list[tuple[str, Any]] = []
    for name, mech in catalog.mechanisms.items():
        mechs.append((name, from_mapping(mech.config, sections.get(name, {}), f"kernel.{name}")))
    costs = from_mapping(Costs, data.get("costs", {}), "costs")
    wl = data.get("workload")
    if not isinstance(wl, Mapping) or "kind" not in wl:
        raise ConfigError(
            "workload.kind", "is required", f"add [workload] with kind = one of {', '.join(sorted(catalog.workloads))}"
        )
    kind = wl["kind"]
    if kind not in catalog.workloads:
        close = difflib.get_close_matches(str(kind), list(catalog.workloads), n=1)
        raise ConfigError(
            "workload.kind",
            f"unknown workload {kind!r}",
            f"did you mean {close[0]!r}?" if close else f"known kinds: {', '.join(sorted(catalog.workloads))}",
        )
    wcfg: Any = from_mapping(catalog.workloads[kind].config, {k: v for k, v in wl.items() if k != "kind"}, "workload")
    check = getattr(wcfg, "check_machine", None)
    if check is not None:
        check(machine, "workload")
    return Scenario(meta, machine, kernel, tuple(mechs), costs, kind, wcfg, data)


def canonical(scn: Scenario) -> dict[str, Any]:
    """The complete scenario as a plain mapping, defaults filled in (what ``--dump`` writes)."""
    out: dict[str, Any] = {
        "scenario": to_mapping(scn.meta),
        "machine": to_mapping(scn.machine),
        "kernel": to_mapping(scn.kernel),
        "costs": to_mapping(scn.costs),
        "workload": {"kind": scn.workload_kind, **to_mapping(scn.workload)},
    }
    for name, cfg in scn.mechanisms:
        out["kernel"][name] = to_mapping(cfg)
    return out


@dataclass
class Result:
    """What a run produced, with everything needed to reproduce it."""

    scenario: str
    seed: int
    version: str
    wall_s: float
    sim_ns: int
    events: int
    metrics: dict[str, float]
    cpus: list[dict[str, Any]]
    latency: dict[str, dict[str, float]]
    series: dict[str, Any]
    params: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return clean(dataclasses.asdict(self))


ProgressFn = Callable[[float], None]


def build(scn: Scenario, catalog: Catalog, seed: int | None = None, tracer: Tracer | None = None) -> tuple[Machine, Workload]:
    """Elaborate: the machine, its mechanisms and the workload, ready to run at time 0."""
    env = Env()
    streams = Streams(scn.meta.seed if seed is None else seed)
    m = Machine(env, scn.machine, scn.kernel, scn.costs, streams, tracer)
    m.scenario = scn
    m.models = {}
    for name, cfg in scn.mechanisms:
        m.models[name] = catalog.mechanisms[name].install(m, cfg)
    wl = catalog.workloads[scn.workload_kind].build(m, scn.workload)
    return m, wl


def run(
    scn: Scenario,
    catalog: Catalog,
    seed: int | None = None,
    tracer: Tracer | None = None,
    progress: ProgressFn | None = None,
    chunks: int = 100,
) -> Result:
    """Run ``scn`` to its stop condition and collect the result."""
    t0 = time.perf_counter()
    m, wl = build(scn, catalog, seed, tracer)
    env = m.env
    limit = scn.meta.duration if scn.meta.duration is not None else scn.meta.max_time
    until_done = scn.meta.duration is None
    if until_done:
        m.done.callbacks.append(StopSimulation.callback)
    step = max(1, limit // chunks)
    wl_progress = getattr(wl, "progress", None)
    finished = False
    while True:
        target = min(env.now + step, limit)
        stop = env.timeout(target - env.now)
        stop.callbacks.append(StopSimulation.callback)
        try:
            env.run()
        except simpy.core.EmptySchedule:  # pragma: no cover - run() converts this itself
            pass
        if until_done and m.done.triggered:
            finished = True
            break
        if progress is not None:
            frac = wl_progress() if (until_done and wl_progress is not None) else env.now / limit
            progress(min(1.0, frac))
        if env.now >= limit:
            break
        if until_done and env.peek() == math.inf:
            blocked = [t.name for t in m.tasks.values() if t.state == T_BLOCKED][:5]
            raise ScenarioError(
                f"scenario {scn.meta.name!r} cannot finish: at {env.now} ns every task is blocked "
                f"and nothing is pending (e.g. {', '.join(blocked)}); the workload deadlocks"
            )
    if until_done and not finished:
        raise ScenarioError(
            f"scenario {scn.meta.name!r} did not finish within scenario.max_time = {limit / S:g} s of simulated time; "
            "raise scenario.max_time or make the workload smaller"
        )
    if progress is not None:
        progress(1.0)
    m.finish_accounting()
    metrics = dict(wl.metrics())
    latency: dict[str, dict[str, float]] = {"sched_wakeup_ns": m.wake_latency.summary()}
    wl_lat = getattr(wl, "latency", None)
    if wl_lat is not None:
        for name, hist in wl_lat().items():
            latency[name] = hist.summary() if isinstance(hist, LogHistogram) else hist
    series_fn = getattr(wl, "series", None)
    series = series_fn() if series_fn is not None else {}
    for name, model in getattr(m, "models", {}).items():
        fn = getattr(model, "metrics", None)
        if fn is not None:
            for k, v in fn().items():
                metrics[f"{name}.{k}"] = v
    cpus = m.cpu_stats()
    metrics["cpu_utilisation"] = sum(c["utilisation"] for c in cpus) / len(cpus)
    metrics["context_switches"] = sum(c["switches"] for c in cpus)
    metrics["sim_time_s"] = env.now / S
    return Result(
        scenario=scn.meta.name,
        seed=scn.meta.seed if seed is None else seed,
        version=VERSION,
        wall_s=time.perf_counter() - t0,
        sim_ns=int(env.now),
        events=m.events,
        metrics=metrics,
        cpus=cpus,
        latency=latency,
        series=series,
        params=canonical(scn),
    )
