"""Typed records as JSON values and back, by their type hints: a saved plan (`plan
--out`, `down --out`) keeps the typed plan itself, read back field by field into the
same classes, so what is applied is what was saved. PURE.

A field whose metadata says ``{"wire": False}`` (the spec a plan was made for: the
saved plan names the spec file and its digest instead) is left out both ways."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

WIRE_OFF = {"wire": False}  # field(metadata=WIRE_OFF): not written, not read


class WireError(ValueError):
    """A value that does not fit the type it is read as (a damaged or foreign file)."""


def _wired(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("wire", True)]


def to_plain(value: Any) -> Any:
    """A record as JSON values: dataclasses field by field, mappings (read-only ones too:
    ``asdict`` would deep-copy them, and a ``mappingproxy`` cannot be copied), enums and
    tuples made plain."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in _wired(type(value))}
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(to_plain(v) for v in value)
    if isinstance(value, Enum):
        return value.value
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_plain(hint: Any, data: Any) -> Any:
    """``data`` (JSON values) read as ``hint`` (a dataclass, an enum, ``X | None``,
    ``tuple[X, ...]``, ``frozenset[X]``, ``Mapping[K, V]``, a scalar); WireError when it does not fit."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return _union(typing.get_args(hint), data)
    if origin is tuple:
        return _tuple(typing.get_args(hint), data)
    if origin in (frozenset, set):
        return frozenset(_tuple((typing.get_args(hint)[0], ...), data))
    if origin in (dict, Mapping):
        return _mapping(typing.get_args(hint), data, frozen=origin is not dict)
    if dataclasses.is_dataclass(hint):
        return _record(hint, data)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(data)
    return _scalar(hint, data)


def _union(options: tuple[Any, ...], data: Any) -> Any:
    if data is None and type(None) in options:
        return None
    errors = []
    for option in (o for o in options if o is not type(None)):
        try:
            return from_plain(option, data)
        except (WireError, ValueError, TypeError) as exc:
            errors.append(str(exc))
    raise WireError(f"{data!r} fits none of {options} ({'; '.join(errors)})")


def _tuple(args: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    if not isinstance(data, list):
        raise WireError(f"expected a list, got {data!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(from_plain(args[0], v) for v in data)
    if len(args) != len(data):
        raise WireError(f"expected {len(args)} values, got {data!r}")
    return tuple(from_plain(a, v) for a, v in zip(args, data, strict=True))


def _mapping(args: tuple[Any, ...], data: Any, frozen: bool) -> Mapping[Any, Any]:
    if not isinstance(data, dict):
        raise WireError(f"expected an object, got {data!r}")
    key, value = args or (str, Any)
    out = {from_plain(key, k): from_plain(value, v) for k, v in data.items()}
    return MappingProxyType(out) if frozen else out


def _record(cls: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise WireError(f"{cls.__name__}: expected an object, got {data!r}")
    hints = _hints(cls)
    values = {}
    for f in _wired(cls):
        if f.name in data:
            try:
                values[f.name] = from_plain(hints[f.name], data[f.name])
            except (WireError, ValueError, TypeError) as exc:
                raise WireError(f"{cls.__name__}.{f.name}: {exc}") from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise WireError(f"{cls.__name__}: no {f.name!r}")
    return cls(**values)


def _scalar(hint: Any, data: Any) -> Any:
    if hint is Any or hint is object:
        return data
    if hint is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if isinstance(hint, type) and not isinstance(data, hint):
        raise WireError(f"expected {hint.__name__}, got {data!r}")
    return data
