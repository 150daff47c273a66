"""PushTelemetry (API 72), version 0 (KIP-714): a client's metrics, kept for the metrics
endpoint (broker/metrics/telemetry.py). A refused push is answered with KIP-714's error
(UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE,
INVALID_RECORD, ...)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._build import build, response_module

if TYPE_CHECKING:
    from broker.node import Node
    from broker.server import RequestContext

API_KEY = 72
log = structlog.get_logger(__name__)


async def handle(node: Node, ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.none
    try:
        node.telemetry.push(request.client_instance_id, int(request.subscription_id),
                            bool(request.terminating), int(request.compression_type),
                            bytes(request.metrics), ctx.client_id or "", node.clock())
    except KafkaError as exc:
        error = exc.error_code
        log.info("push_telemetry_refused", client=ctx.client_id, error=error.name,
                 reason=exc.message)
    return build(response_module(request).PushTelemetryResponse,
                 throttle_time=datetime.timedelta(0), error_code=error)
