"""GetTelemetrySubscriptions (API 71), version 0 (KIP-714): which client metrics to push.

What is requested comes from the client-metrics subscriptions matching the client (and
Skiff's `client.telemetry.metrics` / `client.telemetry.push.interval.ms`); see
broker/metrics/telemetry.py.
"""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from broker.metrics.telemetry import ACCEPTED_COMPRESSION, ClientMeta, TelemetryStore
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext


class TelemetryNode(Protocol):
    """What this handler needs of the node: the telemetry store."""

    telemetry: TelemetryStore

API_KEY = 71


def client_meta(store: TelemetryStore, ctx: RequestContext,
                client_instance_id: uuid.UUID | None) -> ClientMeta:
    """Who is asking, as a client-metrics `match` sees it."""
    name, version = store.software.get(ctx.connection_id, ("", ""))
    return ClientMeta(client_instance_id, ctx.client_id or "", ctx.peer_host, ctx.peer_port,
                      name, version)


async def handle(node: TelemetryNode, ctx: RequestContext, request: Any) -> Any:
    store = node.telemetry
    instance_id = store.subscribe(request.client_instance_id)
    sub = store.subscription(client_meta(store, ctx, instance_id))
    return build(
        response_module(request).GetTelemetrySubscriptionsResponse,
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        client_instance_id=instance_id,
        subscription_id=sub.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=datetime.timedelta(milliseconds=sub.interval_ms),
        telemetry_max_bytes=store.max_bytes, delta_temporality=False,
        requested_metrics=sub.requested,
    )
