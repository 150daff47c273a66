"""GetTelemetrySubscriptions (API 71), version 0 (KIP-714): which client metrics to push.

What is requested comes from `client.telemetry.metrics` (empty by default: nothing, so
clients push nothing) and `client.telemetry.push.interval.ms`; see broker/metrics/telemetry.py.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from broker.metrics.telemetry import ACCEPTED_COMPRESSION, TelemetryStore
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext


class TelemetryNode(Protocol):
    """What this handler needs of the node: the telemetry store."""

    telemetry: TelemetryStore

API_KEY = 71


async def handle(node: TelemetryNode, ctx: RequestContext, request: Any) -> Any:
    store = node.telemetry
    return build(
        response_module(request).GetTelemetrySubscriptionsResponse,
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        client_instance_id=store.subscribe(request.client_instance_id),
        subscription_id=store.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=datetime.timedelta(milliseconds=store.interval_ms),
        telemetry_max_bytes=store.max_bytes, delta_temporality=False,
        requested_metrics=store.requested,
    )
