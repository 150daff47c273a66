"""PushTelemetry (API 72), version 0 (KIP-714): a client's metrics, kept for the metrics
endpoint (broker/metrics/telemetry.py). A refused push is answered with KIP-714's error
(UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE,
INVALID_RECORD, ...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers.get_telemetry_subscriptions import client_meta
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.metrics.telemetry import TelemetryStore
    from broker.server import RequestContext


class TelemetryNode(Protocol):
    """What this handler needs of the node: the telemetry store and the wall clock."""

    telemetry: TelemetryStore
    clock: Callable[[], int]

API_KEY = 72
log = structlog.get_logger(__name__)


async def handle(node: TelemetryNode, ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.none
    try:
        node.telemetry.push(request.client_instance_id, int(request.subscription_id),
                            bool(request.terminating), int(request.compression_type),
                            bytes(request.metrics), ctx.client_id or "", node.clock(),
                            client_meta(node.telemetry, ctx, request.client_instance_id))
    except KafkaError as exc:
        error = exc.error_code
        log.info("push_telemetry_refused", client=ctx.client_id, error=error.name,
                 reason=exc.message)
    return build(response_module(request).PushTelemetryResponse,
                 throttle_time=NO_THROTTLE, error_code=error)
