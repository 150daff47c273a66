"""A deadline on a controller operation, as Kafka's controller APIs carry one (timeout_ms)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError

T = TypeVar("T")


async def within(call: Callable[[], Awaitable[T]], timeout_ms: int) -> T:
    """Run a controller operation for at most `timeout_ms` (non-positive: no limit). The
    operation keeps running after a timeout (ControllerService shields it): its records may
    already be in the log, so the caller gets REQUEST_TIMED_OUT, not a rollback."""
    task: asyncio.Future[T] = asyncio.ensure_future(call())
    if timeout_ms <= 0:
        return await task
    done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
    if not done:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        raise KafkaError(ErrorCode.request_timed_out,
                         f"The controller did not finish within {timeout_ms} ms.")
    return task.result()
