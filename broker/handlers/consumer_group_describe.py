"""ConsumerGroupDescribe (API 69, KIP-848): epochs, assignor, members' current and target
assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.consumer import ConsumerGroupDescription
from broker.group.handler_util import AUTHORIZED_OPERATIONS_OMITTED
from broker.group.shell import service_of
from broker.handlers._authz import Op, Res, allowed, operations
from broker.handlers._context import GroupBroker
from broker.handlers.consumer_group_heartbeat import (
    DISABLED_MESSAGE,
    consumer_protocol_enabled,
)
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 69
MEMBER_TYPE_CONSUMER = 1


def _assignment(mod: Any, items: Any) -> Any:
    return build(mod.Assignment, topic_partitions=tuple(
        build(mod.TopicPartitions, topic_id=t, topic_name=name, partitions=ps)
        for t, name, ps in items))


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    out = []
    for group_id in request.group_ids:
        ops = (operations(node, ctx, Res.GROUP, str(group_id))
               if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        desc: ConsumerGroupDescription | None = None
        message: str | None = None
        if not consumer_protocol_enabled(node):
            # as Kafka: without group.version 1 every group is UNSUPPORTED_VERSION
            error, message = ErrorCode.unsupported_version, DISABLED_MESSAGE
        elif not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, str(group_id)):
            error = ErrorCode.group_authorization_failed
        else:
            try:
                error, desc = service_of(node).consumer_group_describe(str(group_id))
            except KafkaError as exc:
                error = exc.error_code
        if error is ErrorCode.none and desc is None:
            # Kafka's GroupMetadataManager.consumerGroup(): the two messages it tells apart
            error = ErrorCode.group_id_not_found
            message = (f"Group {group_id} is not a consumer group."
                       if service_of(node).is_classic_group(str(group_id))
                       else f"Group {group_id} not found.")
        if desc is None or error is not ErrorCode.none:
            # Kafka 4.4 answers a refused or missing group with its schema's defaults:
            # epochs 0 (seen for GROUP_AUTHORIZATION_FAILED in the differential harness)
            out.append(build(mod.DescribedGroup, error_code=error, error_message=message,
                             group_id=group_id, group_state="", group_epoch=0,
                             assignment_epoch=0, assignor_name="", members=(),
                             authorized_operations=ops))
            continue
        members = tuple(build(
            mod.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            # Kafka 4.4 answers "" for a member that subscribed by names, not null
            subscribed_topic_regex=m.subscribed_topic_regex or "",
            assignment=_assignment(mod, m.assignment),
            target_assignment=_assignment(mod, m.target_assignment),
            member_type=MEMBER_TYPE_CONSUMER) for m in desc.members)
        out.append(build(mod.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                         group_id=group_id, group_state=desc.state,
                         group_epoch=desc.group_epoch, assignment_epoch=desc.assignment_epoch,
                         assignor_name=desc.assignor_name, members=members,
                         authorized_operations=ops))
    return build(mod.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(out))
