"""The event loop the node processes run on: uvloop when it is installed (a libuv loop;
each network round trip costs less Python than on asyncio's selector loop), else
asyncio's own. `SKIFF_EVENT_LOOP=asyncio` forces asyncio's, to rule the loop out when
debugging."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_name() -> str:
    if os.environ.get("SKIFF_EVENT_LOOP", "").lower() == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the loop `loop_name()` names."""
    if loop_name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
