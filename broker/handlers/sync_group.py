"""SyncGroup (API 14): the leader hands out the assignment; every member receives its part."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import SyncGroupRequest, SyncGroupResult
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 14


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    req = SyncGroupRequest(
        group_id=str(request.group_id), generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
    )
    if not allowed(node, ctx, Op.READ, Res.GROUP, req.group_id):
        result = SyncGroupResult(ErrorCode.group_authorization_failed)
    else:
        try:
            result = await service_of(node).sync_group(req)
        except KafkaError as exc:
            result = SyncGroupResult(exc.error_code)
    mod = response_module(request)
    return build(mod.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error,
                 protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                 assignment=result.assignment)
