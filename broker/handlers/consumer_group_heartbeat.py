"""ConsumerGroupHeartbeat (API 68, KIP-848): join, heartbeat, reconcile and leave in one RPC.

As Kafka 4.x, the consumer protocol needs the finalized group.version 1 or higher: below it
every heartbeat is answered UNSUPPORTED_VERSION (`skiff features upgrade --feature
group.version=1` turns it on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.consumer import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from broker.group.handler_util import client_host
from broker.group.shell import service_of
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.metadata.features import GROUP_VERSION
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 68
DISABLED_MESSAGE = ("The consumer group protocol (KIP-848) is not enabled: it needs "
                    "group.version 1 or higher (skiff features upgrade --feature "
                    "group.version=1).")


def consumer_protocol_enabled(node: GroupBroker) -> bool:
    """group.version >= 1 (Kafka's GroupVersion.isConsumerRebalanceProtocolSupported)."""
    return bool(node.metadata.finalized_level(GROUP_VERSION) >= 1)


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    owned = None
    if request.topic_partitions is not None:
        owned = tuple((tp.topic_id, tuple(tp.partitions)) for tp in request.topic_partitions)
    names = request.subscribed_topic_names
    req = ConsumerHeartbeatRequest(
        group_id=str(request.group_id), member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=to_ms(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned_partitions=owned,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
    )
    # READ on the group, DESCRIBE on every subscribed topic (KIP-848 as Kafka checks it)
    if not consumer_protocol_enabled(node):
        result = ConsumerHeartbeatResult(
            ErrorCode.unsupported_version, member_id=req.member_id or None,
            error_message=DISABLED_MESSAGE)
    elif not allowed(node, ctx, Op.READ, Res.GROUP, req.group_id):
        result = ConsumerHeartbeatResult(ErrorCode.group_authorization_failed,
                                         member_id=req.member_id or None)
    elif any(not allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, n)
             for n in req.subscribed_topic_names or ()):
        result = ConsumerHeartbeatResult(ErrorCode.topic_authorization_failed,
                                         member_id=req.member_id or None)
    else:
        try:
            result = service_of(node).consumer_group_heartbeat(req)
        except KafkaError as exc:
            result = ConsumerHeartbeatResult(exc.error_code, member_id=req.member_id or None)
    mod = response_module(request)
    assignment = None
    if result.assignment is not None:
        assignment = build(mod.Assignment, topic_partitions=tuple(
            build(mod.TopicPartitions, topic_id=t, partitions=ps) for t, ps in result.assignment))
    return build(
        mod.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=result.error,
        error_message=result.error_message, member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=to_timedelta(result.heartbeat_interval_ms), assignment=assignment,
    )


def to_timedelta(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)
