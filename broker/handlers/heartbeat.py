"""Heartbeat (API 12): a classic member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import HeartbeatRequest
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 12


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    req = HeartbeatRequest(str(request.group_id), request.generation_id, request.member_id,
                           getattr(request, "group_instance_id", None))
    if not allowed(node, ctx, Op.READ, Res.GROUP, str(request.group_id)):
        error = ErrorCode.group_authorization_failed
    else:
        try:
            error = service_of(node).heartbeat(req)
        except KafkaError as exc:
            error = exc.error_code
    return build(response_module(request).HeartbeatResponse, throttle_time=NO_THROTTLE,
                 error_code=error)
