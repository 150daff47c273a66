"""Arrays that arrived null where the request's schema does not allow null.

kio refuses a null string in a non-nullable field while decoding (`UnexpectedNull`), but an
array of length -1 decodes as None whatever the schema says, so a handler would meet None
where its type promises a tuple. Kafka's parser refuses such a request ("non-nullable field
... was serialized as null") and closes the connection; `first_null_array` finds the field so
the server can do the same before any handler runs.

The walk is planned once per entity class: only array and nested-entity fields are visited,
and the elements of an array are walked only when their class holds arrays itself, so the
partitions of a Produce or Fetch request are not visited one by one.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Final, NamedTuple


class _ArrayField(NamedTuple):
    name: str
    nullable: bool
    element: type | None  # a nested entity class to walk into, else None


_plans: dict[type, tuple[_ArrayField, ...]] = {}
_NONE: Final = type(None)


def _is_entity(t: object) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def _walked(element: object) -> type | None:
    """The element class when it holds arrays somewhere; leaves are not walked."""
    if _is_entity(element) and _plan(typing.cast(type, element)):
        return typing.cast(type, element)
    return None


def _plan(cls: type) -> tuple[_ArrayField, ...]:
    plan = _plans.get(cls)
    if plan is not None:
        return plan
    hints = typing.get_type_hints(cls)
    fields: list[_ArrayField] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nullable = False
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            args = [a for a in typing.get_args(hint) if a is not _NONE]
            nullable = len(args) < len(typing.get_args(hint))
            if len(args) != 1:
                continue
            hint = args[0]
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            fields.append(_ArrayField(f.name, nullable, _walked(element)))
        elif _is_entity(hint) and _plan(hint):
            fields.append(_ArrayField(f.name, True, hint))  # a nested struct: walk into it
    plan = tuple(fields)
    _plans[cls] = plan
    return plan


def first_null_array(entity: Any, path: str = "") -> str | None:
    """The dotted path of the first non-nullable array in `entity` that is None, or None."""
    found = _first_null(entity)
    return None if found is None else path + found


def _first_null(entity: Any) -> str | None:
    # Every request passes through here: the path is spelled out only for a field found
    # null, not built for each field and element on the way (1.22 -> 0.70 us per
    # 6-partition Produce).
    for name, nullable, element in _plan(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
            continue
        if element is None:
            continue
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                found = _first_null(item)
                if found is not None:
                    return f"{name}[{i}].{found}"
        else:
            found = _first_null(value)
            if found is not None:
                return f"{name}.{found}"
    return None
