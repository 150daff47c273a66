"""LeaveGroup (API 13): one member (v0-v2) or a batch identified by member or instance id (v3+)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import LeaveGroupResult, LeaveMember
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 13


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < 3:
        members = [LeaveMember(request.member_id)]
    else:
        members = [LeaveMember(m.member_id, m.group_instance_id) for m in request.members]
    if not allowed(node, ctx, Op.READ, Res.GROUP, str(request.group_id)):
        result = LeaveGroupResult(ErrorCode.group_authorization_failed)
    else:
        try:
            result = service_of(node).leave_group(str(request.group_id), members)
        except KafkaError as exc:
            result = LeaveGroupResult(exc.error_code)
    mod = response_module(request)
    if ctx.api_version < 3:
        error = result.error
        if error is ErrorCode.none and result.members:
            error = result.members[0][1]
        return build(mod.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error)
    return build(
        mod.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error,
        members=tuple(build(mod.MemberResponse, member_id=m.member_id,
                            group_instance_id=m.group_instance_id, error_code=e)
                      for m, e in result.members),
    )
