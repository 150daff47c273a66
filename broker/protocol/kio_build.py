"""Build kio entities of whatever version a request arrived in.

kio generates one dataclass per message version, each with only that version's fields.
`build(cls, **fields)` drops the fields the version does not carry, so one handler
body serves every version it advertises.
"""

from __future__ import annotations

import sys
from functools import cache
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


@cache
def _field_names(cls: Any) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__)


def build(cls: type[T], **fields: Any) -> T:
    names = _field_names(cls)  # type: ignore[arg-type]  # classes are hashable
    return cls(**{k: v for k, v in fields.items() if k in names})


def response_module(request: object) -> ModuleType:
    """The kio module holding the response classes of the request's API and version."""
    package = type(request).__module__.rsplit(".", 1)[0]
    module = sys.modules.get(package + ".response")
    if module is None:
        import importlib

        module = importlib.import_module(package + ".response")
    return module
