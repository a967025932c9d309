"""Measurement profiles: the JSON the native collector writes, as a versioned, validated model.

A profile (``calibration/collector/README.md`` documents every field) is loaded with
:func:`load_profile`, which

* parses the JSON (a truncated or corrupt file is one :class:`~sim.errors.ConfigError` saying where),
* checks ``kind`` and ``schema_version``: a newer version than :data:`SCHEMA_VERSION` is refused
  (this rcusim cannot know what changed), an older one is upgraded step by step through
  :data:`UPGRADES` (each step a pure function of the raw mapping),
* validates the result with the pydantic models below: wrong types, missing fields, negative
  samples or statistics that disagree with the samples give one error naming the field, e.g.
  ``p.json: items.syscall.samples[3]: -5.0 is negative``.

Schema versions:

* **1** (collector 0.1.0): what ``rcusim-collector`` writes today.
* **0** (collector 0.0.x, pre-release): no ``kind``, ``warnings`` or ``settings_changed``; items
  and series without ``samples_total`` and ``histogram``; ``machine`` without ``cpus_allowed``.
  :func:`upgrade_v0` fills them in from what is there (histograms from the stored samples).

The JSON Schema of the current version is committed as ``calibration/schema/profile.schema.json``
(a test checks it equals :func:`json_schema`); regenerate it with
``python -m calibration.profile --write-schema``.

Unknown extra fields are kept (the collector may add measurements within a version); an
incompatible change bumps ``schema_version`` and adds an upgrade step here.

Items from a later run: :func:`merge_items` adds the items of a second collector run (e.g. a
newer collector's new items, ``rcusim-collector --items ...``) to a profile without re-collecting
the rest, and records that run (its own start time, load, command line) in ``item_runs``;
:meth:`Profile.run_of` says which run an item comes from. Command line:
``python -m calibration.profile --merge BASE.json NEW.json --out OUT.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from sim.errors import ConfigError

SCHEMA_VERSION = 1
KIND = "rcusim-profile"
ROOT = Path(__file__).resolve().parent
SCHEMA_FILE = ROOT / "schema" / "profile.schema.json"
PROFILES_DIR = ROOT / "profiles"
DEFAULT_PROFILE = PROFILES_DIR / "default.json"
DEFAULT_PARAMS = PROFILES_DIR / "default-params.toml"
COSTS_ORIGIN = PROFILES_DIR / "history" / "dev-2026-11-22T0210.json"
"""The development machine's first bundled profile, whose calibration (``COSTS_ORIGIN_PARAMS``)
the ``Costs`` defaults of :mod:`sim.params` are: the seed stories and bundled scenarios inherit
them, so a re-collection of the bundled profile does not move them (see docs/readme/calibration.md)."""
COSTS_ORIGIN_PARAMS = PROFILES_DIR / "history" / "dev-2026-11-22T0210-params.toml"

NonNegative = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]


# wake_placement: above this share of wakeups on the waker's CPU (other CPUs idle) the machine
# packs wakeups (kernel.wake_affine = "pack"); mainline's share there is ~0 (select_idle_sibling
# takes the idle CPU), so any majority means another rule
PACK_SHARE = 0.5


class _Open(BaseModel):
    """Known fields are typed; unknown ones are kept (additions within a schema version)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Stats(_Open):
    """Statistics over every sample (also those not stored)."""

    count: Count
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    stddev: float | None = None
    median: float | None = None
    p90: float | None = None
    p99: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Stats:
        if self.count > 0:
            need = ("min", "max", "mean", "median")
            missing = [k for k in need if getattr(self, k) is None]
            if missing:
                raise ValueError(f"{missing[0]} is null although count is {self.count}")
            vals = [self.min, self.median, self.max]
            if not all(a is not None and b is not None and a <= b for a, b in zip(vals, vals[1:], strict=False)):
                raise ValueError(f"min <= median <= max does not hold ({self.min}, {self.median}, {self.max})")
        return self


class Histogram(_Open):
    scheme: str
    buckets: list[tuple[float, float, Count]]
    underflow: Count = 0
    overflow: Count = 0


class _Measured(_Open):
    """Raw samples with their statistics (an item or one of its series)."""

    unit: Literal["ns"] = "ns"
    params: dict[str, Any] = Field(default_factory=dict)
    samples_total: Count
    samples: list[NonNegative]
    stats: Stats
    histogram: Histogram

    @model_validator(mode="after")
    def _consistent(self) -> _Measured:
        if self.stats.count != self.samples_total:
            raise ValueError(f"stats.count ({self.stats.count}) differs from samples_total ({self.samples_total})")
        if len(self.samples) > self.samples_total:
            raise ValueError(f"{len(self.samples)} samples stored but samples_total is {self.samples_total}")
        return self


class Series(_Measured):
    label: str


class RouterRate(_Open):
    overall: NonNegative
    blocks: list[dict[str, Any]] = Field(default_factory=list)


class Item(_Measured):
    status: Literal["ok", "skipped", "failed"]
    reason: str | None = None
    method: str
    duration_s: NonNegative
    series: list[Series] | None = None
    throughput_ops_per_s: dict[str, NonNegative] | None = None
    create_cost_vs_alive: list[tuple[int, NonNegative]] | None = None
    routers_per_s: RouterRate | None = None

    @model_validator(mode="after")
    def _status(self) -> Item:
        if self.status == "ok" and self.samples_total == 0:
            raise ValueError("status is 'ok' but there are no samples")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"status is {self.status!r} but no reason is given")
        return self

    def get_series(self, label: str) -> Series | None:
        for s in self.series or ():
            if s.label == label:
                return s
        return None


class CpuList(_Open):
    list: str | None = None
    count: Count


class CpusAllowed(_Open):
    cpus: list[Count]
    count: Annotated[int, Field(ge=1)]


class Hz(_Open):
    value: Annotated[int, Field(ge=1)] | None = None
    method: str = ""


class Preemption(_Open):
    model: str | None = None
    source: str | None = None
    dynamic: bool = False


class RcuConfig(_Open):
    available: bool
    options: dict[str, str | None] = Field(default_factory=dict)


class Machine(_Open):
    kernel_release: str
    kernel_version: str = ""
    arch: str = ""
    cpus_online: CpuList
    cpus_possible: CpuList | None = None
    cpus_allowed: CpusAllowed
    cpu_model: str | None = None
    hypervisor_flag: bool | None = None
    clocksource: str | None = None
    cpuidle_driver: str | None = None
    hz: Hz
    preemption: Preemption
    rcu_config: RcuConfig | None = None
    kernel_config: dict[str, Any] | None = None
    cmdline: dict[str, str | bool | None] = Field(default_factory=dict)
    rcuo_kthread_count: Count = 0
    rcuo_kthreads: list[str] = Field(default_factory=list)
    rcutree_parameters: dict[str, str | None] | None = None
    rcupdate_parameters: dict[str, str | None] | None = None
    rcu_expedited: str | None = None
    rcu_normal: str | None = None
    timer_migration: str | None = None


class CollectorInfo(_Open):
    name: str
    version: str
    compiler: str | None = None


class Uname(_Open):
    sysname: str
    nodename: str
    release: str
    version: str
    machine: str


class Options(_Open):
    mode: Literal["quick", "full"]
    quick: bool
    items: list[str]
    items_explicit: bool = False
    out: str | None = None
    modify_system: bool = False
    max_samples: Count = 2000


class SettingChange(_Open):
    path: str
    original: str
    value: str
    restored: bool
    restore_error: str | None = None


class Load(_Open):
    """What else ran during the collection (a busy machine's timings include its interference)."""

    loadavg_start: list[float] = Field(default_factory=list)
    loadavg_end: list[float] = Field(default_factory=list)
    other_cpu_share: NonNegative | None = None
    steal_share: NonNegative | None = None
    nice: int | None = None


class ItemRun(_Open):
    """A later collector run whose items :func:`merge_items` added to the profile: the header of
    that run (the profile's own header describes the run of every other item)."""

    items: list[str]
    collector: CollectorInfo
    command_line: list[str]
    start_time: str
    end_time: str | None = None
    duration_s: NonNegative | None = None
    root: bool | None = None
    options: Options | None = None
    load: Load | None = None
    warnings: list[str] = Field(default_factory=list)
    settings_changed: list[SettingChange] = Field(default_factory=list)
    kernel_release: str
    nodename: str
    merged: str = Field(default="", description="how the items were added (command, UTC time)")


class Profile(_Open):
    """One collector run: header, machine facts, items (and ``item_runs``: the runs of items
    added later, see :func:`merge_items`)."""

    schema_version: Literal[1]
    kind: Literal["rcusim-profile"]
    collector: CollectorInfo
    command_line: list[str]
    start_time: str
    end_time: str | None = None
    duration_s: NonNegative | None = None
    uname: Uname
    root: bool
    euid: int
    options: Options
    settings_changed: list[SettingChange]
    warnings: list[str]
    machine: Machine
    items: dict[str, Item]
    load: Load | None = None
    item_runs: list[ItemRun] = Field(default_factory=list)

    _source: str = PrivateAttr(default="profile")
    _upgraded_from: int | None = PrivateAttr(default=None)

    # -- provenance
    @property
    def source(self) -> str:
        """The file (or label) the profile was loaded from."""
        return self._source

    @property
    def upgraded_from(self) -> int | None:
        """The schema version of the file when it was older than :data:`SCHEMA_VERSION`."""
        return self._upgraded_from

    # -- machine facts the calibration uses
    @property
    def cpus(self) -> int:
        """CPUs the measurements ran on (the collector's affinity mask)."""
        return self.machine.cpus_allowed.count

    @property
    def hz(self) -> int | None:
        return self.machine.hz.value

    @property
    def preempt(self) -> Literal["none", "voluntary", "full"]:
        """The preemption model as rcusim's ``kernel.preempt`` (lazy and rt count as full;
        unknown as voluntary, the most common distribution default)."""
        m = (self.machine.preemption.model or "").lower()
        if m in ("none", "voluntary", "full"):
            return m  # type: ignore[return-value]
        if m in ("lazy", "rt"):
            return "full"
        return "voluntary"

    @property
    def kernel_version(self) -> tuple[int, int]:
        """(major, minor) of the kernel release, (0, 0) when it cannot be read."""
        import re

        m = re.match(r"(\d+)\.(\d+)", self.machine.kernel_release or "")
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    @property
    def sched(self) -> Literal["cfs", "eevdf"]:
        """The fair-class scheduler as rcusim's ``kernel.sched``: EEVDF from Linux 6.6 on
        (it replaced CFS's wakeup preemption and slices there), else CFS."""
        return "eevdf" if self.kernel_version >= (6, 6) else "cfs"

    @property
    def wake_affine(self) -> Literal["prev", "weight", "pack"]:
        """Wakeup CPU selection as rcusim's ``kernel.wake_affine``: ``pack`` when the profile's
        ``wake_placement`` item saw most wakeups of a thread free to run anywhere stay on the
        waker's CPU while the other CPUs idled (:data:`PACK_SHARE`; mainline never does that,
        see ``sim.machine.Machine._select_cpu_weight``); else ``weight`` (wake_affine_weight
        with the WF_SYNC discount, Linux 4.14 on) for such kernels, else ``prev``."""
        share = self.on_waker_cpu_share
        if share is not None and share >= PACK_SHARE:
            return "pack"
        return "weight" if self.kernel_version >= (4, 14) else "prev"

    @property
    def timer_wheel(self) -> Literal["classic", "v4.8", "v6.9"]:
        """The kernel's timer wheel as rcusim's ``kernel.timer_wheel``: "v6.9" from Linux 6.9 with
        ``/proc/sys/kernel/timer_migration`` on (the timer-migration hierarchy pulls an idle
        CPU's non-pinned timers), "v4.8" from 4.8 (calc_index's round-up) or with migration off,
        else "classic"."""
        version = self.kernel_version
        if version >= (6, 9) and (self.machine.timer_migration or "").strip() != "0":
            return "v6.9"
        return "v4.8" if version >= (4, 8) else "classic"

    def kernel_section(self) -> dict[str, Any]:
        """The scheduler and timer rules of the profile's kernel as rcusim's ``[kernel]`` keys
        (``hz`` only when the profile knows it); ``[kernel.rcu]`` is :meth:`rcu_section`."""
        kernel: dict[str, Any] = {
            "preempt": self.preempt,
            "sched": self.sched,
            "wake_affine": self.wake_affine,
            "fork_balance": self.fork_balance,
            "timer_wheel": self.timer_wheel,
            "nohz_stats_kick": self.nohz_stats_kick,
        }
        if self.hz is not None:
            kernel["hz"] = self.hz
        return kernel

    @property
    def nohz_stats_kick(self) -> bool:
        """rcusim's ``kernel.nohz_stats_kick``: the blocked-load update kick (NOHZ_STATS_KICK in
        kernel/sched/fair.c nohz_balancer_kick), in kernels from 4.17."""
        return self.kernel_version >= (4, 17)

    @property
    def rcu_wake_from_gp(self) -> bool:
        """``rcutree.rcu_normal_wake_from_gp`` as the kernel reported it (on by default since
        a7f6af1322ad on machines with at most 16 possible CPUs): synchronize_rcu() then starts
        a GP at once and is woken by the GP kthread, not by a callback."""
        params = self.machine.rcutree_parameters or {}
        return (params.get("rcu_normal_wake_from_gp") or "").strip() in ("1", "Y", "y")

    def rcu_section(self) -> dict[str, Any]:
        """``[kernel.rcu]`` from the machine facts: today's Tree RCU, PREEMPT_RCU and RCU_LAZY
        from the kernel config, offloading only if rcuo kthreads run, and
        ``rcu_normal_wake_from_gp`` from the rcutree parameters."""
        raw = self.machine.model_dump() if hasattr(self.machine, "model_dump") else {}
        opts = ((raw.get("rcu_config") or {}).get("options")) or {}
        sec: dict[str, Any] = {"era": "v6", "nocb": "all" if raw.get("rcuo_kthread_count") else "none"}
        sec["preemptible"] = opts.get("CONFIG_PREEMPT_RCU") == "y"
        sec["lazy"] = opts.get("CONFIG_RCU_LAZY") == "y"
        sec["wake_from_gp"] = self.rcu_wake_from_gp
        return sec

    @property
    def fork_balance(self) -> Literal["idlest", "pack"]:
        """Where a forked task starts, as rcusim's ``kernel.fork_balance``: ``pack`` when the
        profile's ``wake_placement`` item (series ``fork``) saw most children start on their
        running parent's CPU while the other CPUs idled (:data:`PACK_SHARE`; mainline's
        SD_BALANCE_FORK takes the idle CPU), else ``idlest``."""
        share = self._series_share("fork", "on_parent_cpu_share")
        return "pack" if share is not None and share >= PACK_SHARE else "idlest"

    @property
    def on_waker_cpu_share(self) -> float | None:
        """``wake_placement``'s share of wakeups that ran on the waker's CPU with the other CPUs
        idle (series ``idle_others``), or None without the item."""
        return self._series_share("idle_others", "on_waker_cpu_share")

    def _series_share(self, label: str, key: str) -> float | None:
        """``wake_placement``'s share ``key`` of series ``label``, or None without it (older
        collectors have no ``fork`` series)."""
        item = self.items.get("wake_placement")
        if item is None or item.status != "ok":
            return None
        for s in item.series or ():
            if s.label == label:
                v = (s.model_extra or {}).get(key)
                return float(v) if v is not None else None
        return None

    # -- items
    def run_of(self, name: str) -> ItemRun | None:
        """The later run item ``name`` was added from, or None when it comes from the profile's own
        run (the last merge wins when an item was merged twice)."""
        for run in reversed(self.item_runs):
            if name in run.items:
                return run
        return None

    def collected(self, name: str) -> str:
        """When and under what load item ``name`` was measured, for notes: ``"2026-... (load 0.05)"``."""
        run = self.run_of(name)
        start = run.start_time if run is not None else self.start_time
        load = run.load if run is not None else self.load
        share = load.other_cpu_share if load is not None else None
        other = f", other CPU share {share:.2f}" if share is not None else ""
        return f"{'later run ' if run is not None else ''}{start}{other}"

    def item(self, name: str, *, need_ok: bool = True) -> Item:
        """The item ``name``; ConfigError naming it if absent or (with ``need_ok``) not ok."""
        it = self.items.get(name)
        if it is None:
            raise ConfigError(
                f"{self.source}: items.{name}",
                "is missing from the profile",
                f"collect it: rcusim collect --items {name} (or a full rcusim collect)",
            )
        if need_ok and it.status != "ok":
            raise ConfigError(f"{self.source}: items.{name}", f"was {it.status}: {it.reason}", "re-collect where it can run")
        return it

    def series(self, item: str, label: str) -> Series:
        it = self.item(item)
        s = it.get_series(label)
        if s is None or s.samples_total == 0:
            raise ConfigError(
                f"{self.source}: items.{item}.series[{label}]",
                "is missing or empty",
                f"re-collect the item with this version's collector: rcusim collect --items {item}",
            )
        return s


# ------------------------------------------------------------------ upgrades


def _log2_quarter_histogram(samples: list[float]) -> dict[str, Any]:
    """The collector's sparse histogram (README: scheme log2-quarter) of ``samples``."""
    counts: dict[tuple[float, float], int] = {}
    under = over = 0
    for x in samples:
        if x < 0:
            under += 1
            continue
        if x >= 2.0**80:
            over += 1
            continue
        if x < 1:
            lo, hi = 0.0, 1.0
        else:
            e = math.floor(math.log2(x))
            base = 2.0**e
            q = min(3, int((x / base - 1.0) * 4))
            lo, hi = base * (1 + q / 4), base * (1 + (q + 1) / 4)
        counts[(lo, hi)] = counts.get((lo, hi), 0) + 1
    return {
        "scheme": "log2-quarter",
        "buckets": [[lo, hi, n] for (lo, hi), n in sorted(counts.items())],
        "underflow": under,
        "overflow": over,
    }


def _upgrade_measured_v0(obj: dict[str, Any]) -> None:
    samples = obj.get("samples")
    if not isinstance(samples, list):
        return
    stats = obj.get("stats")
    count = stats.get("count") if isinstance(stats, Mapping) else None
    obj.setdefault("samples_total", count if isinstance(count, int) else len(samples))
    if "histogram" not in obj and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in samples):
        obj["histogram"] = _log2_quarter_histogram(samples)


def upgrade_v0(raw: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (collector 0.0.x) -> 1: add ``kind``, ``warnings``, ``settings_changed``,
    ``samples_total`` and ``histogram`` (from the stored samples) and ``machine.cpus_allowed``
    (taken as every online CPU, which is what 0.0.x measured on)."""
    out = dict(raw)
    out["schema_version"] = 1
    out.setdefault("kind", KIND)
    out.setdefault("warnings", [])
    out.setdefault("settings_changed", [])
    machine = out.get("machine")
    if isinstance(machine, dict) and "cpus_allowed" not in machine:
        machine = dict(machine)
        online = machine.get("cpus_online")
        lst = online.get("list") if isinstance(online, Mapping) else None
        cpus = _parse_cpu_list(lst) if isinstance(lst, str) else []
        if not cpus and isinstance(online, Mapping) and isinstance(online.get("count"), int):
            cpus = list(range(online["count"]))
        machine["cpus_allowed"] = {"cpus": cpus, "count": len(cpus)}
        out["machine"] = machine
    items = out.get("items")
    if isinstance(items, dict):
        new_items = {}
        for name, item in items.items():
            if isinstance(item, dict):
                item = dict(item)
                _upgrade_measured_v0(item)
                if isinstance(item.get("series"), list):
                    item["series"] = [dict(s) for s in item["series"]]
                    for s in item["series"]:
                        if isinstance(s, dict):
                            _upgrade_measured_v0(s)
            new_items[name] = item
        out["items"] = new_items
    return out


def _parse_cpu_list(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            return []
        cpus.extend(range(lo, hi + 1))
    return cpus


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: upgrade_v0}
"""``UPGRADES[v]`` turns a schema-``v`` mapping into a schema-``v + 1`` one."""


# ------------------------------------------------------------------ loading


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _problem(err: Mapping[str, Any]) -> tuple[str, str]:
    kind = err.get("type", "")
    value = err.get("input")
    msg = str(err.get("msg", "invalid"))
    if kind == "missing":
        return "is required", "re-collect the profile (rcusim collect)"
    if kind in ("greater_than_equal", "greater_than") and isinstance(value, (int, float)) and value < 0:
        return f"{value!r} is negative", "measurements are never negative: the file is corrupt; re-collect it"
    if kind.startswith("literal_error"):
        return f"{value!r} is not allowed ({msg.lower()})", "re-collect the profile with rcusim collect"
    if kind == "value_error":
        return msg.removeprefix("Value error, "), "the file is inconsistent: re-collect it"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg.lower()}, got {shown}", "re-collect the profile (rcusim collect)"


def validate_profile(raw: Any, source: str = "profile") -> Profile:
    """Check ``kind``/``schema_version``, upgrade an older mapping, validate; one ConfigError
    naming the field on any problem."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, f"expected a JSON object, got {type(raw).__name__}", "give a profile written by rcusim collect")
    kind = raw.get("kind", KIND if raw.get("schema_version") == 0 else None)
    if kind != KIND:
        raise ConfigError(f"{source}: kind", f"is {kind!r}, not {KIND!r}", "this is not an rcusim profile")
    version = raw.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigError(
            f"{source}: schema_version", f"expected an integer, got {version!r}", "this is not a valid rcusim profile"
        )
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version",
            f"{version} is newer than this rcusim reads ({SCHEMA_VERSION})",
            "update rcusim, or collect the profile with this version's collector (rcusim collect)",
        )
    if version < min(UPGRADES, default=SCHEMA_VERSION):
        raise ConfigError(f"{source}: schema_version", f"{version} is unknown", f"versions 0..{SCHEMA_VERSION} are readable")
    data: dict[str, Any] = dict(raw)
    for v in range(version, SCHEMA_VERSION):
        data = UPGRADES[v](data)
    try:
        prof = Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        problem, fix = _problem(err)
        where = _loc(tuple(err.get("loc", ())))
        raise ConfigError(f"{source}: {where}" if where else source, problem, fix) from None
    prof._source = source
    prof._upgraded_from = version if version != SCHEMA_VERSION else None
    return prof


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile file (see the module docstring)."""
    p = Path(path)
    name = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(name, "no such profile file", "give the path of a JSON profile written by rcusim collect") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(name, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        raise ConfigError(name, "is empty", "re-collect the profile (rcusim collect)")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) - 1
        what = "truncated" if truncated else "not valid JSON"
        raise ConfigError(
            name, f"{what}: {exc.msg} at line {exc.lineno} column {exc.colno}", "the file is damaged: re-collect it"
        ) from None
    return validate_profile(raw, name)


def default_profile() -> Profile:
    """The bundled profile of the project's development machine."""
    return load_profile(DEFAULT_PROFILE)


# ------------------------------------------------------------------ merging a later run


def dumps(raw: Any) -> str:
    """``raw`` as the collector writes JSON (util_json.c ``jv_write``): two-space indentation,
    arrays of scalars (or of arrays of at most 4 scalars) on one line, numbers as ``%.12g``.
    A profile the collector wrote comes back byte for byte."""
    out: list[str] = []
    _dump(raw, 0, out)
    return "".join(out) + "\n"


def _dump(v: Any, depth: int, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif isinstance(v, bool):
        out.append("true" if v else "false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append("null" if not math.isfinite(v) else "0" if v == 0 else f"{v:.12g}")
    elif isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, list):
        flat = all(not isinstance(x, (list, dict)) or (isinstance(x, list) and len(x) <= 4) for x in v)
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(", " if flat else ",")
            if not flat:
                out.append("\n" + "  " * (depth + 1))
            _dump(x, depth + 1, out)
        if not flat and v:
            out.append("\n" + "  " * depth)
        out.append("]")
    elif isinstance(v, Mapping):
        out.append("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.append(",")
            out.append("\n" + "  " * (depth + 1) + json.dumps(str(k), ensure_ascii=False) + ": ")
            _dump(x, depth + 1, out)
        if v:
            out.append("\n" + "  " * depth)
        out.append("}")
    else:
        raise TypeError(f"cannot write {type(v).__name__} as JSON")


def merge_items(base: Mapping[str, Any], new: Mapping[str, Any], *, merged: str = "") -> dict[str, Any]:
    """``base`` with every item of ``new`` (a later collector run on the same machine, e.g. with
    ``--items``) added or replaced, and ``new``'s header recorded in ``item_runs``. Both are raw
    profile mappings; both are validated, and they must come from the same host, kernel and CPUs
    (ConfigError naming the field otherwise). ``merged`` says how (command, time)."""
    a = validate_profile(base, "base profile")
    b = validate_profile(new, "new profile")
    checks = (
        ("uname.nodename", a.uname.nodename, b.uname.nodename),
        ("machine.kernel_release", a.machine.kernel_release, b.machine.kernel_release),
        ("machine.cpus_allowed.cpus", a.machine.cpus_allowed.cpus, b.machine.cpus_allowed.cpus),
    )
    for where, x, y in checks:
        if x != y:
            raise ConfigError(
                f"new profile: {where}",
                f"is {y!r}, the base profile's is {x!r}",
                "merge only runs of the same machine, kernel and CPUs",
            )
    if b.item_runs:
        raise ConfigError("new profile: item_runs", "is not empty", "merge a profile written by the collector itself")
    names = list(new["items"])
    if not names:
        raise ConfigError("new profile: items", "is empty", "collect the items to add: rcusim-collector --items a,b --out NEW")
    out = dict(base)
    items = dict(out["items"])
    for name in names:
        items[name] = new["items"][name]
    out["items"] = items
    run: dict[str, Any] = {"items": names}
    for key in ("collector", "command_line", "start_time", "end_time", "duration_s", "root", "options", "load", "warnings"):
        if key in new:
            run[key] = new[key]
    run["settings_changed"] = new.get("settings_changed", [])
    run["kernel_release"] = b.machine.kernel_release
    run["nodename"] = b.uname.nodename
    run["merged"] = merged
    earlier = [r for r in out.get("item_runs", []) if isinstance(r, Mapping)]
    # an item merged again leaves the earlier run's list
    kept = []
    for r in earlier:
        left = [n for n in r.get("items", []) if n not in names]
        if left:
            kept.append({**r, "items": left})
    out["item_runs"] = [*kept, run]
    validate_profile(out, "merged profile")
    return out


# ------------------------------------------------------------------ JSON Schema


def json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://rcusim.invalid/schema/profile.schema.json"
    schema["title"] = f"rcusim measurement profile, schema_version {SCHEMA_VERSION}"
    schema["description"] = (
        "What rcusim-collector writes (calibration/collector/README.md). Generated from calibration/profile.py; "
        "regenerate with: python -m calibration.profile --write-schema"
    )
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write-schema"]:
        SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
        SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
        return 0
    if args == ["--print-schema"]:
        sys.stdout.write(schema_text())
        return 0
    if len(args) == 5 and args[0] == "--merge" and args[3] == "--out":
        import time

        base_path, new_path, out_path = args[1], args[2], args[4]
        try:
            base = json.loads(Path(base_path).read_text(encoding="utf-8"))
            new = json.loads(Path(new_path).read_text(encoding="utf-8"))
            load_profile(base_path)
            load_profile(new_path)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            merged = merge_items(base, new, merged=f"python -m calibration.profile --merge {' '.join(args[1:])} ({stamp})")
        except ConfigError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 2
        Path(out_path).write_text(dumps(merged), encoding="utf-8")
        return 0
    sys.stderr.write(
        "usage: python -m calibration.profile --write-schema | --print-schema | --merge BASE.json NEW.json --out OUT.json\n"
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
