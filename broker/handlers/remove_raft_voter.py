"""RemoveRaftVoter (API 81), version 0, on the broker listener: sent on to the metadata
quorum's leader, as Kafka's brokers forward it (KIP-853), so `kafka-metadata-quorum
--bootstrap-server ... remove-controller` works against a broker. ALTER on the cluster is
checked before (broker/handlers/_authz.py CLUSTER_CHECKS). The leader answers once the new
voter set is committed (RemoveRaftVoter carries no timeout: the forward waits up to
VOTER_CHANGE_TIMEOUT_S)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 81
VOTER_CHANGE_TIMEOUT_S = 30.0


def error_response(ctx: RequestContext, request: Any, code: ErrorCode,
                   message: str | None = None) -> Any:
    return build(response_module(request).RemoveRaftVoterResponse, throttle_time=NO_THROTTLE,
                 error_code=code, error_message=message)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    try:
        return await node.controller.voter_change(API_KEY, ctx.api_version, request,
                                                  VOTER_CHANGE_TIMEOUT_S)
    except KafkaError as exc:
        return error_response(ctx, request, exc.error_code, exc.message or None)
