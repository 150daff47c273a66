"""AddRaftVoter (API 80), versions 0-1, on the broker listener: sent on to the metadata
quorum's leader, as Kafka's brokers forward it (KIP-853), so `kafka-metadata-quorum
--bootstrap-server ... add-controller` works against a broker. ALTER on the cluster is
checked before (broker/handlers/_authz.py CLUSTER_CHECKS). The leader answers once the new
voter set is committed, or REQUEST_TIMED_OUT after the request's timeout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 80
# how long past the request's own timeout the broker waits for the leader's answer
FORWARD_GRACE_S = 5.0


def error_response(ctx: RequestContext, request: Any, code: ErrorCode,
                   message: str | None = None) -> Any:
    return build(response_module(request).AddRaftVoterResponse, throttle_time=NO_THROTTLE,
                 error_code=code, error_message=message)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    timeout_s = max(0.0, request.timeout.total_seconds()) + FORWARD_GRACE_S
    try:
        return await node.controller.voter_change(API_KEY, ctx.api_version, request, timeout_s)
    except KafkaError as exc:
        return error_response(ctx, request, exc.error_code, exc.message or None)
