"""DescribeQuorum (API 55), versions 0-2, on the broker listener: sent on to the metadata
quorum's leader and its answer returned as it is, as Kafka's brokers forward it (so
`kafka-metadata-quorum.sh --bootstrap-server` works against a broker). DESCRIBE on the
cluster is checked before (broker/handlers/_authz.py CLUSTER_CHECKS). When no controller
answers as the leader, the answer carries the error at the top (NOT_LEADER_OR_FOLLOWER or
REQUEST_TIMED_OUT), which clients retry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 55


def error_response(ctx: RequestContext, request: Any, code: ErrorCode,
                   message: str | None = None) -> Any:
    mod = response_module(request)
    return build(mod.DescribeQuorumResponse, error_code=code, error_message=message,
                 topics=(), nodes=())


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    try:
        return await node.controller.describe_quorum(request, ctx.api_version)
    except KafkaError as exc:
        return error_response(ctx, request, exc.error_code, exc.message or None)
