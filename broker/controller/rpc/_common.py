"""What every controller RPC module shares: finding the active local controller, deadlines
and the kio duration type."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError

if TYPE_CHECKING:
    from broker.controller.service import ControllerService

T = TypeVar("T")
NO_THROTTLE = datetime.timedelta(0)

# Security protocols as BrokerRegistration carries them (Kafka's SecurityProtocol ids).
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


def active_service(node: Any) -> ControllerService:
    """This node's controller service if it is the active controller, else NOT_CONTROLLER
    (the broker's channel then asks the quorum's leader)."""
    service: ControllerService | None = getattr(node, "controller_service", None)
    if service is None or not service.quorum.is_leader:
        raise KafkaError(ErrorCode.not_controller,
                         f"node {getattr(node, 'node_id', '?')} is not the active controller")
    return service


def duration(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=max(0, ms))


def to_ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value) if value is not None else 0


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
