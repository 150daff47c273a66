"""GetTelemetrySubscriptions (API 71), version 0 (KIP-714): which client metrics to push.

What is requested comes from `client.telemetry.metrics` (empty by default: nothing, so
clients push nothing) and `client.telemetry.push.interval.ms`; see broker/metrics/telemetry.py.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._build import build, response_module
from broker.metrics.telemetry import ACCEPTED_COMPRESSION

if TYPE_CHECKING:
    from broker.node import Node
    from broker.server import RequestContext

API_KEY = 71


async def handle(node: Node, ctx: RequestContext, request: Any) -> Any:
    store = node.telemetry
    return build(
        response_module(request).GetTelemetrySubscriptionsResponse,
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
        client_instance_id=store.subscribe(request.client_instance_id),
        subscription_id=store.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=datetime.timedelta(milliseconds=store.interval_ms),
        telemetry_max_bytes=store.max_bytes, delta_temporality=False,
        requested_metrics=store.requested,
    )
