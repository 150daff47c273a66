"""JoinGroup (API 11): join a classic group and wait for the rebalance to complete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.handler_util import client_host
from broker.group.shell import service_of
from broker.group.types import JoinGroupRequest, JoinGroupResult
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 11


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    session = to_ms(request.session_timeout)
    req = JoinGroupRequest(
        group_id=str(request.group_id), member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=session,
        rebalance_timeout_ms=to_ms(getattr(request, "rebalance_timeout", None), session),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=ctx.api_version >= 4,
        supports_skip_assignment=ctx.api_version >= 9,  # KIP-814
    )
    if not allowed(node, ctx, Op.READ, Res.GROUP, req.group_id):
        return response(request, ctx.api_version, JoinGroupResult(
            ErrorCode.group_authorization_failed, member_id=req.member_id))
    try:
        result = await service_of(node).join_group(req)
    except KafkaError as exc:
        result = JoinGroupResult(exc.error_code, member_id=req.member_id)
    return response(request, ctx.api_version, result)


def response(request: Any, version: int, r: JoinGroupResult) -> Any:
    mod = response_module(request)
    members = tuple(
        build(mod.JoinGroupResponseMember, member_id=m.member_id,
              group_instance_id=m.group_instance_id, metadata=m.metadata)
        for m in r.members
    )
    nullable = version >= 7
    return build(
        mod.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type if nullable else None,
        protocol_name=r.protocol_name if nullable else (r.protocol_name or ""),
        leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=members,
    )

