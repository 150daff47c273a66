"""Requests for any kio schema with every nullable field null, for probing handlers.

`null_probe(cls)` fills a request entity: fields the schema lets be null are None, arrays of
structs hold one element (filled the same way, to a bounded depth, so nested nullable fields
are reached too), arrays of scalars are empty, and every other field gets a harmless value
(0, False, "", a topic-like name for strings).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.static.primitive import (
    Records,
    TZAware,
    TZAwareMicros,
    f64,
    i32Timedelta,
    i64Timedelta,
)

PROBE_NAME = "null-probe"
_NONE = type(None)


def _scalar(hint: Any) -> Any:
    if isinstance(hint, type):
        if issubclass(hint, bool):
            return False
        if issubclass(hint, (i32Timedelta, i64Timedelta)):
            return datetime.timedelta(0)
        if issubclass(hint, (TZAware, TZAwareMicros)):
            return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        if issubclass(hint, Records):
            return Records(b"")
        if issubclass(hint, f64):
            return f64(0.0)
        if issubclass(hint, int):
            return hint(0)
        if issubclass(hint, str):
            return hint(PROBE_NAME)
        if issubclass(hint, bytes):
            return hint(b"")
        if issubclass(hint, uuid.UUID):
            return uuid.UUID(int=1)
    raise TypeError(f"no probe value for {hint!r}")


def null_probe(cls: type, depth: int = 3) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        if union and _NONE in typing.get_args(hint):
            values[f.name] = None
            continue
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            if dataclasses.is_dataclass(element) and depth > 0:
                values[f.name] = (null_probe(typing.cast(type, element), depth - 1),)
            else:
                values[f.name] = ()
        elif dataclasses.is_dataclass(hint):
            values[f.name] = null_probe(typing.cast(type, hint), depth - 1)
        elif f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        else:
            values[f.name] = _scalar(hint)
    return cls(**values)


def nullable_paths(cls: type, prefix: str = "", depth: int = 3) -> list[str]:
    """Every field the probe sets to None, as dotted paths (for messages)."""
    hints = typing.get_type_hints(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        if _NONE in args:
            out.append(prefix + f.name)
            continue
        if typing.get_origin(hint) is tuple and dataclasses.is_dataclass(args[0]) and depth > 0:
            out += nullable_paths(args[0], f"{prefix}{f.name}[0].", depth - 1)
        elif dataclasses.is_dataclass(hint):
            out += nullable_paths(typing.cast(type, hint), f"{prefix}{f.name}.", depth - 1)
    return out
