"""ShareGroupDescribe (API 77, KIP-932): a share group's epochs, assignor and members with
their assignments (broker/share/group.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.group.handler_util import AUTHORIZED_OPERATIONS_OMITTED
from broker.handlers._authz import Op, Res, allowed, operations
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.group import ShareGroupDescription
from broker.share.shell import DISABLED_MESSAGE, ShareNode, share_enabled, share_service_of

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 77


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    out = []
    for group_id in request.group_ids:
        gid = str(group_id)
        ops = (operations(node, ctx, Res.GROUP, gid)
               if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        desc: ShareGroupDescription | None = None
        message: str | None = None
        if not share_enabled(node):
            error, message = ErrorCode.unsupported_version, DISABLED_MESSAGE
        elif not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, gid):
            error = ErrorCode.group_authorization_failed
        else:
            error, desc, message = share_service_of(node).describe(gid)
        if desc is None or error is not ErrorCode.none:
            # Kafka 4.4 answers a refused or missing group with its schema's defaults:
            # epochs 0 (seen for GROUP_AUTHORIZATION_FAILED in the differential harness)
            out.append(build(mod.DescribedGroup, error_code=error, error_message=message,
                             group_id=group_id, group_state="", group_epoch=0,
                             assignment_epoch=0, assignor_name="", members=(),
                             authorized_operations=ops))
            continue
        members = tuple(build(
            mod.Member, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=build(mod.Assignment, topic_partitions=tuple(
                build(mod.TopicPartitions, topic_id=t, topic_name=name, partitions=ps)
                for t, name, ps in m.assignment)))
            for m in desc.members)
        out.append(build(mod.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                         group_id=group_id, group_state=desc.state,
                         group_epoch=desc.group_epoch, assignment_epoch=desc.assignment_epoch,
                         assignor_name=desc.assignor_name, members=members,
                         authorized_operations=ops))
    return build(mod.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
