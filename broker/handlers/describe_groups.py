"""DescribeGroups (API 15), v0-v6: state, protocol and members of classic groups.

An unknown group is answered "Dead" with no error up to v5; v6 (KIP-1043) answers
GROUP_ID_NOT_FOUND with Kafka's message: "Group G not found.", or "Group G is not a classic
group." for a KIP-848 consumer group (which ConsumerGroupDescribe describes) or a share group
(ShareGroupDescribe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.handler_util import AUTHORIZED_OPERATIONS_OMITTED
from broker.group.shell import service_of
from broker.group.types import GroupDescription
from broker.handlers._authz import Op, Res, allowed, operations
from broker.handlers._context import GroupsBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 15


def _is_consumer_group(node: GroupsBroker, group_id: str) -> bool:
    """A KIP-848 consumer group, a streams group or a share group: a group, but not a
    classic one."""
    share = node.share_groups
    if share is not None and group_id in share.groups.groups:
        return True
    try:
        svc = service_of(node)
        _, desc = svc.consumer_group_describe(group_id)
        _, streams = svc.streams_group_describe(group_id)
    except KafkaError:
        return False
    return desc is not None or streams is not None


async def handle(node: GroupsBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    out = []
    for group_id in request.groups:
        ops = (operations(node, ctx, Res.GROUP, str(group_id)) if want_ops
               else AUTHORIZED_OPERATIONS_OMITTED)
        desc: GroupDescription | None = None
        if not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, str(group_id)):
            error = ErrorCode.group_authorization_failed
        else:
            try:
                error, desc = service_of(node).describe_group(str(group_id))
            except KafkaError as exc:
                error = exc.error_code
        if error is not ErrorCode.none:
            out.append(build(mod.DescribedGroup, error_code=error, error_message=None,
                             group_id=group_id, group_state="", protocol_type="",
                             protocol_data="", members=(), authorized_operations=ops))
        elif desc is None:
            # unknown group: "Dead"; v6 adds GROUP_ID_NOT_FOUND
            code, message = ErrorCode.none, None
            if ctx.api_version >= 6:
                code = ErrorCode.group_id_not_found
                message = (f"Group {group_id} is not a classic group."
                           if _is_consumer_group(node, str(group_id))
                           else f"Group {group_id} not found.")
            out.append(build(mod.DescribedGroup, error_code=code, error_message=message,
                             group_id=group_id, group_state="Dead", protocol_type="",
                             protocol_data="", members=(), authorized_operations=ops))
        else:
            members = tuple(build(
                mod.DescribedGroupMember, member_id=m.member_id,
                group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata,
                member_assignment=m.assignment) for m in desc.members)
            out.append(build(mod.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                             group_id=group_id, group_state=desc.state,
                             protocol_type=desc.protocol_type, protocol_data=desc.protocol_data,
                             members=members, authorized_operations=ops))
    return build(mod.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
