"""Typed, frozen, validated configuration.

Every kernel knob, cost and workload parameter is a field of a frozen dataclass declared with
:func:`knob`, which records its documentation, unit, bounds and the *source* of its default
(a kernel file, a collector measurement or a documented fit). :func:`from_mapping` turns a
plain mapping (parsed TOML, ``--set`` overrides, app widgets) into such an object and rejects
unknown keys, wrong types and out-of-range values with a :class:`~sim.errors.ConfigError` that
names the dotted field and the fix. Nothing here is global or mutable.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

from .errors import ConfigError
from .units import DurationError, fmt_ns, parse_duration

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def knob(
    default: Any = _MISSING,
    *,
    doc: str,
    unit: str | None = None,
    min: float | None = None,  # noqa: A002 - the natural name for a bound
    max: float | None = None,  # noqa: A002
    source: str = "",
    default_factory: Any = _MISSING,
) -> Any:
    """Declare a configuration field.

    ``unit="ns"`` makes the field a duration: it accepts ``"2 us"`` style strings and is
    stored as integer nanoseconds. ``source`` says where the default comes from.
    """
    meta = {"doc": doc, "unit": unit, "min": min, "max": max, "source": source}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is tuple:
        return f"list of {_type_name(get_args(tp)[0])}"
    if dataclasses.is_dataclass(tp):
        return "table"
    if tp is type(None):
        return "nothing"
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, meta: Mapping[str, Any], path: str) -> Any:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, meta, path)
            except ConfigError as exc:
                errors.append(exc)
        raise (
            errors[-1]
            if len(errors) == 1
            else ConfigError(path, f"expected {_type_name(tp)}, got {value!r}", "see the field's documentation")
        )
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
            hint = f"did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                path,
                f"{value!r} is not one of {', '.join(repr(c) for c in choices)}",
                hint or f"use one of {', '.join(repr(c) for c in choices)}",
            )
        return value
    if origin is tuple:
        (item_tp, *_rest) = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {value!r}", "write it as [a, b, ...]")
        return tuple(_convert(v, item_tp, meta, f"{path}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        if isinstance(value, typing.cast(type, tp)):
            return value
        return from_mapping(typing.cast(type, tp), value, path)
    if meta.get("unit") == "ns":
        if isinstance(value, (bool,)) or not isinstance(value, (int, float, str)):
            raise ConfigError(path, f"expected a duration, got {value!r}", "write e.g. '2 us' or an integer of ns")
        try:
            value = parse_duration(value)
        except DurationError as exc:
            raise ConfigError(path, str(exc)) from None
        _check_bounds(value, meta, path, duration=True)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(path, f"expected an integer, got {value!r}")
        _check_bounds(value, meta, path)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"expected a number, got {value!r}")
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(path, f"expected a finite number, got {value!r}")
        _check_bounds(value, meta, path)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"expected a string, got {value!r}")
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported config type {tp!r} at {path}")  # a programming error


def _check_bounds(value: float, meta: Mapping[str, Any], path: str, duration: bool = False) -> None:
    lo, hi = meta.get("min"), meta.get("max")
    show = fmt_ns if duration else repr
    if lo is not None and value < lo:
        what = "negative" if lo == 0 and value < 0 else f"below the minimum {show(lo)}"
        raise ConfigError(path, f"{show(value)} is {what}", f"use a value >= {show(lo)}")
    if hi is not None and value > hi:
        raise ConfigError(path, f"{show(value)} is above the maximum {show(hi)}", f"use a value <= {show(hi)}")


def from_mapping(cls: type[T], data: Any, path: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``, validating every field."""
    if not isinstance(data, Mapping):
        raise ConfigError(path or cls.__name__, f"expected a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(typing.cast(Any, cls)) if f.init}
    for key in data:
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            where = f"{path}.{key}" if path else str(key)
            fix = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(fields))}"
            raise ConfigError(where, "unknown key", fix)
    kwargs = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], f.metadata, where)
        elif f.default is _MISSING and f.default_factory is _MISSING:
            raise ConfigError(where, "is required", f"add {name} = ... to the [{path or 'top'}] table")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        check(path)
    return obj


def to_mapping(obj: Any) -> dict[str, Any]:
    """The inverse of :func:`from_mapping`: a plain, TOML-writable dict (durations in ns)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out[f.name] = to_mapping(v)
        elif isinstance(v, tuple):
            out[f.name] = list(v)
        elif v is not None:
            out[f.name] = v
    return out


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """Rows ``(key, type, default, doc, source)`` for every field, recursively (for --help
    and the README's knob table)."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(typing.cast(type, tp), key + "."))
            continue
        if f.default is not _MISSING:
            default = f.default
        elif f.default_factory is not _MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        if f.metadata.get("unit") == "ns" and isinstance(default, int):
            default = fmt_ns(default)
        rows.append((key, _type_name(tp), str(default), f.metadata.get("doc", ""), f.metadata.get("source", "")))
    return rows


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b][c] = value`` for ``dotted = "a.b.c"``, creating tables on the way."""
    parts = dotted.split(".")
    if not all(parts):
        raise ConfigError(repr(dotted), "is not a valid key path", "write it as section.key, e.g. machine.cpus")
    node = data
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        elif not isinstance(nxt, dict):
            raise ConfigError(".".join(parts[: i + 1]), "is a value, not a table", f"cannot set {dotted}")
        node = nxt
    node[parts[-1]] = value
