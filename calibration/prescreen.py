"""Patch pre-screening: does a kernel change move a benchmark, by how much, and is it worth a lab run?

A *patch* is a TOML file naming a baseline scenario and the changes the patch makes, as dotted
keys of that scenario (any knob ``rcusim knobs`` lists, mechanisms' sections included)::

    [patch]
    name = "nocb-all"
    description = "offload every CPU's RCU callbacks to rcuo kthreads"
    baseline = "netns-2014"         # a scenario file (relative to this file) or a bundled name
    story = "netns-2014"            # optional: the validation story whose error applies

    [set]                           # new values
    "kernel.rcu.nocb" = "all"

    [scale]                         # factors on the baseline's numbers: 1.10 = 10% more
    "costs.context_switch" = 1.10

    [metrics]                       # optional: directions of metrics rcusim cannot guess
    "rate_at_500" = "higher"

:func:`compare` runs both arms with common random numbers: replication ``i`` of the baseline and
of the patch use the same seed (``SeedSequence`` children of the baseline's seed), so every
random stream (cost jitter, think times...) draws the same numbers in both, and the paired
differences measure the patch, not the noise. For each metric it reports the relative effect
``mean(patch) / mean(base) - 1`` with a paired bootstrap confidence interval
(``scipy.stats.bootstrap``, BCa, seeded: the same runs give the same interval) and a verdict:

* **no detectable effect** — the interval contains 0;
* **improves** / **regresses** — the interval excludes 0, on the better or the worse side for
  that metric (:func:`direction`: times and latencies lower is better, rates higher);
* **worth a lab run?** — yes when the whole interval lies farther from 0 than the model's
  validated error on the story (the largest error of its predicted rows in ``rcusim
  validate``): the effect is then larger than what the model is known to get wrong. Without a
  story for the scenario the answer is "no validated error known".

Nothing here imports the CLI or streamlit; the explorer calls :func:`compare` as the CLI does.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import math
import tomllib
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sim import scenario as sc
from sim.config import set_path
from sim.errors import ConfigError, RcusimError

from .sweep import Job, catalog, replication_seeds, resolve_scenario, run_jobs

Direction = Literal["lower", "higher"]

_PATCH_KEYS = ("name", "description", "baseline", "story")
_SECTIONS = ("patch", "set", "scale", "metrics")

# Metric directions rcusim knows: exact names first, then name patterns (first match wins).
DIRECTIONS: dict[str, Direction | None] = {
    "time_s": "lower",
    "sim_time_s": "lower",
    "messages_per_s": "higher",
    "switches_per_message": "lower",
    "context_switches": "lower",
    "cpu_utilisation": None,  # neither: more can mean busier or more useful work
    "sleeper_periods_per_s": None,  # the timers workload's own pace, set by the scenario
    "messages": None,
    "events": None,
}
_LATENCY_STATS = (".mean", ".p50", ".p90", ".p99", ".max")


def direction(metric: str, declared: Mapping[str, str] | None = None) -> Direction | None:
    """Which way is better for ``metric``: ``"lower"``, ``"higher"`` or None (unknown, or
    neither). ``declared`` (a patch's [metrics] table, ``--metric NAME:higher``) wins; then
    the names above; then the name's shape: wakeups (idle, timer, wasted, rcuo: work and power
    spent, also ``*wakeups_per_s``) lower, rates and throughputs (``*_per_s``, ``rate_*``)
    higher, latency statistics and durations (``*.p99``, ``*_ns``, ``*_s``) lower."""
    if declared and metric in declared:
        d = declared[metric]
        return "lower" if d == "lower" else "higher" if d == "higher" else None
    if metric in DIRECTIONS:
        return DIRECTIONS[metric]
    if metric.endswith(_LATENCY_STATS) or "latency" in metric:
        return "lower"
    if "wakeups" in metric:
        return "lower"
    if metric.endswith("_per_s") or "throughput" in metric or metric.startswith("rate_"):
        return "higher"
    if metric.endswith(("_ns", "_us", "_ms", "_s")):
        return "lower"
    return None


# ---------------------------------------------------------------------------------- patches
@dataclass(frozen=True)
class Patch:
    """A parsed patch file: what it changes in which baseline."""

    path: Path | None
    name: str
    description: str = ""
    baseline: str | None = None
    story: str | None = None
    sets: tuple[tuple[str, Any], ...] = ()
    scales: tuple[tuple[str, float], ...] = ()
    metrics: tuple[tuple[str, Direction], ...] = ()

    def label(self) -> str:
        return self.path.name if self.path is not None else self.name

    def changes(self) -> list[str]:
        out = [f"{k} = {v!r}" for k, v in self.sets]
        out += [f"{k} x {f:g} ({100 * (f - 1):+g}%)" for k, f in self.scales]
        return out


def _flatten(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{"a": {"b": 1}}`` and ``{"a.b": 1}`` both -> ``[("a.b", 1)]``: dotted keys may be
    written quoted or as nested TOML tables."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.extend(_flatten(v, key + "."))
        else:
            out.append((key, v))
    return out


def is_patch_file(path: Path) -> bool:
    """Whether ``path`` is a patch (has a [patch] table) rather than a scenario."""
    try:
        return "patch" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def _looks_like_scenario(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
    return "patch" not in data and ("scenario" in data or "workload" in data)


def _is_bundled(name: str) -> bool:
    try:
        resolve_scenario(name)
    except ConfigError:
        return False
    return True


def load_patch(path: str | Path) -> Patch:
    """Read and check a patch file; every problem is one ConfigError naming the field."""
    p = Path(path)
    where = p.name
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "no such patch file", "give the path of a patch .toml (see scenarios/patches/)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(where, f"not valid TOML: {exc}", "fix the syntax at the position shown") from None
    return parse_patch(data, p)


def parse_patch(data: Mapping[str, Any], path: Path | None = None) -> Patch:
    where = path.name if path is not None else "patch"
    for key in data:
        if key not in _SECTIONS:
            close = difflib.get_close_matches(key, _SECTIONS, n=1)
            raise ConfigError(
                f"{where}: {key}",
                "unknown section",
                f"did you mean [{close[0]}]?" if close else "sections are [patch], [set], [scale], [metrics]",
            )
    head = data.get("patch")
    if not isinstance(head, Mapping):
        raise ConfigError(f"{where}: [patch]", "is missing", "start the file with [patch] and name = ..., baseline = ...")
    for key in head:
        if key not in _PATCH_KEYS:
            close = difflib.get_close_matches(str(key), _PATCH_KEYS, n=1)
            raise ConfigError(
                f"{where}: patch.{key}",
                "unknown key",
                f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(_PATCH_KEYS)}",
            )
        if not isinstance(head[key], str):
            raise ConfigError(f"{where}: patch.{key}", f"expected a string, got {head[key]!r}")
    name = head.get("name") or (path.stem if path is not None else "patch")
    sets_t = data.get("set", {})
    scales_t = data.get("scale", {})
    metrics_t = data.get("metrics", {})
    for sec, t in (("set", sets_t), ("scale", scales_t), ("metrics", metrics_t)):
        if not isinstance(t, Mapping):
            raise ConfigError(f"{where}: {sec}", "expected a table", f'write [{sec}] and then "section.key" = value lines')
    sets = _flatten(sets_t)
    scales = _flatten(scales_t)
    for key, f in scales:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise ConfigError(
                f"{where}: scale.{key}", f"{f!r} is not a positive factor", "write e.g. 1.10 for +10% or 0.5 for half"
            )
    both = sorted({k for k, _ in sets} & {k for k, _ in scales})
    if both:
        raise ConfigError(f"{where}: scale.{both[0]}", "is also in [set]", "either set a value or scale it, not both")
    metrics = []
    for key, d in _flatten(metrics_t):
        if d not in ("lower", "higher"):
            raise ConfigError(f"{where}: metrics.{key}", f"{d!r} is not 'lower' or 'higher'", "say which way is better")
        metrics.append((key, d))
    if not sets and not scales:
        raise ConfigError(f"{where}: [set]", "the patch changes nothing", "add [set] or [scale] entries")
    return Patch(
        path=path,
        name=str(name),
        description=str(head.get("description", "")),
        baseline=head.get("baseline"),
        story=head.get("story"),
        sets=tuple(sets),
        scales=tuple((k, float(f)) for k, f in scales),
        metrics=tuple(metrics),  # type: ignore[arg-type]
    )


def _get(mapping: Mapping[str, Any], dotted: str) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _numeric_keys(mapping: Mapping[str, Any]) -> list[str]:
    return [k for k, v in _flatten(mapping) if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _is_knob(base: Mapping[str, Any], key: str, cat: sc.Catalog) -> bool:
    """Whether ``key`` names a field of the scenario (whatever the value given to it)."""
    probe = copy.deepcopy(dict(base))
    try:
        set_path(probe, key, 1)
        sc.validate(probe, cat)
    except ConfigError as exc:
        return exc.problem != "unknown key" and not exc.problem.startswith("unknown")
    return True


def apply_patch(base: Mapping[str, Any], patch: Patch, cat: sc.Catalog | None = None) -> dict[str, Any]:
    """The patched scenario mapping: ``[set]`` values written over the baseline, ``[scale]``
    factors applied to the baseline's values (defaults included). Validated: an error names
    the patch entry that caused it."""
    cat = cat if cat is not None else catalog()
    where = patch.label()
    canon = sc.canonical(sc.validate(base, cat))
    data = copy.deepcopy(dict(base))
    for key, value in patch.sets:
        try:
            set_path(data, key, value)
        except ConfigError as exc:
            raise ConfigError(f"{where}: set.{key}", exc.problem, exc.fix) from None
    for key, factor in patch.scales:
        try:
            old = _get(canon, key)
        except KeyError:
            if _is_knob(base, key, cat):
                raise ConfigError(
                    f"{where}: scale.{key}",
                    "has no value in the baseline to scale (its default is worked out at run time)",
                    "give it a value with [set] instead",
                ) from None
            close = difflib.get_close_matches(key, _numeric_keys(canon), n=1)
            raise ConfigError(
                f"{where}: scale.{key}",
                "is not a knob of the baseline",
                f"did you mean {close[0]!r}?" if close else "see rcusim knobs",
            ) from None
        if isinstance(old, bool) or not isinstance(old, (int, float)):
            raise ConfigError(
                f"{where}: scale.{key}",
                f"the baseline value {old!r} is not a number",
                "scale only numeric knobs; use [set] for others",
            )
        new = old * factor
        set_path(data, key, int(round(new)) if isinstance(old, int) else float(new))
    try:
        sc.validate(data, cat)
    except ConfigError as exc:
        touched = [k for k, _ in patch.sets] + [k for k, _ in patch.scales]
        culprit = next(
            (k for k in touched if exc.field == k or exc.field.startswith(k + ".") or k.startswith(exc.field + ".")), None
        )
        sec = "set" if any(k == culprit for k, _ in patch.sets) else "scale"
        label = f"{where}: {sec}.{exc.field}" if culprit else f"{where}: {exc.field}"
        raise ConfigError(label, exc.problem, exc.fix) from None
    return data


@dataclass(frozen=True)
class Arms:
    """The two scenario mappings a comparison runs, and what to call them."""

    base: dict[str, Any]
    patched: dict[str, Any]
    baseline_label: str
    patch_label: str
    changes: list[str]
    declared: dict[str, str]
    story: str | None


def prepare(
    first: str, second: str | None = None, overrides: Mapping[str, Any] | None = None, cat: sc.Catalog | None = None
) -> Arms:
    """The arms of ``rcusim compare FIRST [SECOND]``:

    * ``PATCH`` alone: the patch's ``baseline`` against the patched baseline;
    * ``SCENARIO PATCH``: that scenario against it with the patch applied (the patch's own
      ``baseline`` is not used);
    * ``SCENARIO_A SCENARIO_B``: two scenarios against each other.

    ``overrides`` (``--set``) apply to both arms before the patch does.
    """
    cat = cat if cat is not None else catalog()
    first_path = Path(first)
    if second is None:
        if not first_path.is_file() or _looks_like_scenario(first_path):
            raise ConfigError(
                str(first),
                "is not a patch file" if first_path.is_file() or _is_bundled(first) else "no such patch file",
                "give a patch (a .toml with [patch]), or a scenario and a patch: rcusim compare SCENARIO PATCH",
            )
        patch = load_patch(first_path)
        if not patch.baseline:
            raise ConfigError(
                f"{patch.label()}: patch.baseline",
                "is required when compare is given only the patch",
                'add baseline = "SCENARIO" or run: rcusim compare SCENARIO PATCH',
            )
        base_path = resolve_scenario(patch.baseline, relative_to=first_path.parent)
    else:
        if first_path.is_file() and is_patch_file(first_path):
            raise ConfigError(
                str(first), "is a patch file, not a scenario", "give the scenario first: rcusim compare SCENARIO PATCH"
            )
        base_path = resolve_scenario(first)
        second_path = Path(second)
        if second_path.is_file() and is_patch_file(second_path):
            patch = load_patch(second_path)
        else:
            other = resolve_scenario(second)
            base = sc.load(base_path, overrides)
            patched = sc.load(other, overrides)
            sc.validate(base, cat)
            sc.validate(patched, cat)
            names = [str(base.get("scenario", {}).get("name", "")), base_path.stem]
            return Arms(
                base,
                patched,
                str(first),
                str(second),
                [f"scenario {other.name} instead of {base_path.name}"],
                {},
                story_for(names),
            )
    base = sc.load(base_path, overrides)
    sc.validate(base, cat)
    patched = apply_patch(base, patch, cat)
    names = [str(base.get("scenario", {}).get("name", "")), base_path.stem]
    story = patch.story or story_for(names)
    return Arms(
        base,
        patched,
        str(first if second is not None else base_path.stem),
        patch.name,
        patch.changes(),
        dict(patch.metrics),
        story,
    )


# ---------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Effect:
    """The relative effect of the patch on one metric, with its confidence interval."""

    metric: str
    direction: Direction | None
    base_mean: float
    patch_mean: float
    effect: float  # mean(patch) / mean(base) - 1
    ci_low: float
    ci_high: float
    verdict: str  # "no detectable effect" | "improves" | "regresses" | "changes" | "not compared"
    lab_run: str  # "yes" | "no" | "unknown"
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "metric": self.metric,
            "direction": self.direction,
            "base_mean": num(self.base_mean),
            "patch_mean": num(self.patch_mean),
            "effect": num(self.effect),
            "ci_low": num(self.ci_low),
            "ci_high": num(self.ci_high),
            "verdict": self.verdict,
            "worth_lab_run": self.lab_run,
            "note": self.note,
        }


def paired_effect_ci(
    base: Sequence[float] | np.ndarray,
    patch: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 9999,
) -> tuple[float, float, float]:
    """``(effect, low, high)`` for effect = mean(patch)/mean(base) - 1, by a paired bootstrap
    over replications (BCa; percentile if BCa is degenerate). Deterministic for a seed.
    Identical arms give exactly (0, 0, 0)."""
    from scipy import stats

    b = np.asarray(base, dtype=float)
    p = np.asarray(patch, dtype=float)
    if np.array_equal(b, p):
        return 0.0, 0.0, 0.0
    mb = b.mean()
    if mb == 0:
        return math.nan, math.nan, math.nan
    effect = float(p.mean() / mb - 1.0)
    if np.array_equal(b, p):
        return 0.0, 0.0, 0.0
    if len(b) < 2:
        return effect, math.nan, math.nan

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return y.mean(axis=axis) / x.mean(axis=axis) - 1.0

    lo = hi = math.nan
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap(
                (b, p),
                stat,
                paired=True,
                vectorized=True,
                n_resamples=resamples,
                confidence_level=confidence,
                method=method,
                random_state=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # every resample gives the same statistic: the paired differences are proportional
        lo = hi = effect
    return effect, min(lo, effect), max(hi, effect)


def judge(
    metric: str,
    d: Direction | None,
    base: Sequence[float],
    patch: Sequence[float],
    confidence: float,
    model_error: float | None,
    seed: int,
) -> Effect:
    b = np.asarray(base, dtype=float)
    p = np.asarray(patch, dtype=float)
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(p))):
        return Effect(
            metric, d, math.nan, math.nan, math.nan, math.nan, math.nan, "not compared", "unknown", "some runs have no value"
        )
    effect, lo, hi = paired_effect_ci(b, p, confidence, seed)
    if not math.isfinite(effect):
        return Effect(
            metric,
            d,
            float(b.mean()),
            float(p.mean()),
            math.nan,
            math.nan,
            math.nan,
            "not compared",
            "unknown",
            "baseline mean is 0",
        )
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return Effect(
            metric,
            d,
            float(b.mean()),
            float(p.mean()),
            effect,
            lo,
            hi,
            "not compared",
            "unknown",
            "needs at least 2 replications",
        )
    if lo <= 0.0 <= hi:
        verdict = "no detectable effect"
    elif d is None:
        verdict = "changes"
    else:
        up = lo > 0
        verdict = "improves" if up == (d == "higher") else "regresses"
    note = ""
    if verdict == "no detectable effect":
        lab = "no"
    elif model_error is None:
        lab = "unknown"
        note = "no validated error known"
    else:
        nearest = min(abs(lo), abs(hi))
        lab = "yes" if nearest > model_error else "no"
        note = f"{'beyond' if lab == 'yes' else 'within'} the model error of {100 * model_error:.0f}%"
    return Effect(metric, d, float(b.mean()), float(p.mean()), effect, lo, hi, verdict, lab, note)


# ---------------------------------------------------------------------------------- model error
@dataclass(frozen=True)
class ModelError:
    """The model's validated error on a story: the largest |relative error| of its predicted rows."""

    story: str | None
    value: float | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"story": self.story, "value": self.value, "source": self.source}


def story_prefix(story: str) -> str:
    """A story's name without its year: the prefix of its scenarios (``timers-2023`` ->
    ``timers``, whose scenarios are ``timers-idle``, ``timers-dbench``...)."""
    head, _, year = story.rpartition("-")
    return head if head and year.isdigit() else story


def story_for(names: Sequence[str]) -> str | None:
    """The validation story of a scenario, from its name or file stem: the story of that name
    (``netns-2014``), a variant of it (``netns-2014-small``), or one of the story's scenarios
    named by its prefix (``timers-dbench`` -> ``timers-2023``). None if no story matches."""
    from .stories import NAMES

    for n in names:
        if n in NAMES:
            return n
    for n in names:
        for story in NAMES:
            if n.startswith(story + "-") or n.startswith(story_prefix(story) + "-"):
                return story
    return None


def model_error_from_rows(rows: Sequence[Mapping[str, Any]], story: str) -> float | None:
    errs = [
        abs(r["rel_error"])
        for r in rows
        if r.get("story") == story and r.get("role") == "predicted" and r.get("rel_error") is not None
    ]
    return max(errs) if errs else None


def model_error(story: str | None, validation_rows: Sequence[Mapping[str, Any]] | None = None, seeds: int = 1) -> ModelError:
    """The validated error of ``story``: from ``validation_rows`` (``rcusim validate --json``'s
    rows) when given, else by running the story's validation (``seeds`` per figure)."""
    if story is None:
        return ModelError(None, None, "no validation story for this scenario")
    from . import stories
    from .validation import StoryOptions

    if validation_rows is not None:
        v = model_error_from_rows(validation_rows, story)
        if v is None:
            return ModelError(story, None, f"the validation file has no predicted rows of {story}: no validated error known")
        return ModelError(story, v, "largest |error| of the predicted rows in the validation file")
    if story not in stories.NAMES:
        raise ConfigError("story", f"unknown story {story!r}", f"stories are {', '.join(stories.NAMES)}")
    st = stories.get(story)
    if st is None:
        return ModelError(story, None, f"{story} is not modelled yet: no validated error known")
    given = getattr(st, "validated_error", None)
    if isinstance(given, (int, float)):
        return ModelError(story, float(given), f"{story}: declared validated error")
    rows = [r.to_json() for r in st.rows(StoryOptions(seeds=seeds))]
    v = model_error_from_rows(rows, story)
    if v is None:
        return ModelError(story, None, f"{story} has no predicted rows: no validated error known")
    return ModelError(story, v, f"largest |error| of {story}'s predicted rows (rcusim validate {story} --seeds {seeds})")


# ---------------------------------------------------------------------------------- compare
@dataclass
class Comparison:
    baseline: str
    patch: str
    changes: list[str]
    replications: int
    seeds: list[int]
    confidence: float
    model_error: ModelError
    effects: list[Effect]
    base_runs: list[dict[str, float]] = field(default_factory=list)
    patch_runs: list[dict[str, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """One sentence: what the patch does and whether a lab run is worth it."""
        judged = [e for e in self.effects if e.verdict in ("improves", "regresses")]
        moved = [e for e in self.effects if e.verdict == "changes"]
        if not judged and not moved:
            return f"no detectable effect at {100 * self.confidence:.0f}% confidence: not worth a lab run"
        parts = [f"{e.metric} {e.verdict} by {100 * abs(e.effect):.1f}%" for e in judged[:3]]
        if len(judged) > 3:
            parts[-1] += f" (and {len(judged) - 3} more metric(s))"
        if moved:
            parts.append(f"{len(moved)} metric(s) of unknown direction moved")
        # the decision is over every metric that moved: name the ones that decide it
        worth = [e for e in judged + moved if e.lab_run == "yes"]
        me = self.model_error
        words = "the model error given" if me.source.startswith("given with") else "the model's validated error"
        if worth:
            names = ", ".join(e.metric for e in worth[:3]) + (f" and {len(worth) - 3} more" if len(worth) > 3 else "")
            pct = f" ({100 * me.value:.0f}%)" if me.value is not None else ""
            tail = f"{names} beyond {words}{pct}: worth a lab run"
        elif me.value is None:
            tail = "no validated error known for this scenario: a lab run would have to decide"
        else:
            tail = f"within {words} ({100 * me.value:.0f}%): not worth a lab run on this evidence"
        return "; ".join(parts) + f" — {tail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "patch": self.patch,
            "changes": self.changes,
            "replications": self.replications,
            "seeds": self.seeds,
            "confidence": self.confidence,
            "model_error": self.model_error.to_json(),
            "metrics": [e.to_json() for e in self.effects],
            "verdict": self.verdict,
            "failures": self.failures,
        }


def _check_metrics(wanted: Sequence[str], known: Sequence[str]) -> None:
    unknown = [m for m in wanted if m not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        shown = ", ".join(m for m in known if not m.endswith((".p50", ".p90", ".max")))
        raise ConfigError(
            f"--metric {unknown[0]}",
            "is not a metric both arms report",
            f"did you mean {close[0]!r}?" if close else f"metrics: {shown}",
        )


def compare(
    base: Mapping[str, Any],
    patched: Mapping[str, Any],
    *,
    baseline_label: str = "baseline",
    patch_label: str = "patch",
    changes: Sequence[str] = (),
    replications: int = 10,
    base_seed: int | None = None,
    metrics: Sequence[str] | None = None,
    declared: Mapping[str, str] | None = None,
    confidence: float = 0.95,
    error: ModelError | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Comparison:
    """Run both scenario mappings over the same ``replications`` seeds and judge every metric.

    ``metrics``: the metrics to judge (default: every metric both arms report, and the mean
    and p99 of each latency; any other flattened name, e.g. ``message_latency_ns.p50``, on
    request).
    """
    if replications < 2:
        raise ConfigError("--replications", f"{replications} is below 2", "use at least 2 (10 or more for a useful interval)")
    if not 0.5 <= confidence < 1:
        raise ConfigError("--confidence", f"{confidence} is not in [0.5, 1)", "use e.g. 0.95")
    cat = catalog()
    bscn = sc.validate(base, cat)
    sc.validate(patched, cat)
    seed0 = bscn.meta.seed if base_seed is None else base_seed
    seeds = replication_seeds(seed0, replications)
    jobs = [Job(("base", i), base, s) for i, s in enumerate(seeds)] + [Job(("patch", i), patched, s) for i, s in enumerate(seeds)]
    got: dict[tuple[str, int], dict[str, float]] = {}
    failures: list[str] = []
    if progress is not None:
        progress(0, len(jobs))
    with contextlib.closing(run_jobs(jobs, workers=workers, scheduler=scheduler)) as outcomes:
        for k, out in enumerate(outcomes, 1):
            arm, i = out.job.key
            if out.error:
                failures.append(f"{arm} replication {i} (seed {out.job.seed}): {out.error}")
            got[(arm, i)] = out.metrics
            if metrics and not out.error:
                _check_metrics(metrics, list(out.metrics))  # fail at the first run, not the last
            if progress is not None:
                progress(k, len(jobs))
    if failures:
        raise RcusimError(f"{len(failures)} run(s) failed, e.g. {failures[0]}")
    base_runs = [got[("base", i)] for i in range(replications)]
    patch_runs = [got[("patch", i)] for i in range(replications)]
    common = [m for m in base_runs[0] if all(m in r for r in base_runs + patch_runs)]
    if metrics:
        _check_metrics(metrics, common)
        chosen = list(metrics)
    else:
        # the run's metrics, and each latency's mean and p99 (the other statistics on request)
        # (a metric that is 0 or undefined in every run of both arms, such as an idle
        # mechanism's counter, says nothing)
        chosen = [
            m
            for m in common
            if m != "events"
            and not m.endswith((".p50", ".p90", ".max"))
            and any(r[m] != 0 and math.isfinite(r[m]) for r in base_runs + patch_runs)
        ]
    err = error if error is not None else ModelError(None, None, "no validated error known")
    effects = [
        judge(m, direction(m, declared), [r[m] for r in base_runs], [r[m] for r in patch_runs], confidence, err.value, seed0)
        for m in chosen
    ]
    return Comparison(
        baseline=baseline_label,
        patch=patch_label,
        changes=list(changes),
        replications=replications,
        seeds=seeds,
        confidence=confidence,
        model_error=err,
        effects=effects,
        base_runs=base_runs,
        patch_runs=patch_runs,
    )
