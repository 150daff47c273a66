"""OffsetForLeaderEpoch (API 23), versions 0-4: the end offset of a leader epoch.

Clients (the Java consumer, librdkafka) ask it after a leader change to check that their
position is still on the leader's log (KIP-320); followers of older brokers used it to
find where to truncate. The leader answers from its leader-epoch cache as Kafka does:
for the latest epoch its log end offset; for an older one the start offset of the next
higher epoch it knows, with the largest epoch at or below the requested one; for an
epoch above its latest (or with no epochs) -1/-1.

v0-v1 (dropped by Kafka 4.0, KIP-896) carry no current_leader_epoch (no fencing) and no
throttle time; v0's answer has no leader_epoch, only the end offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._leader_hints import not_hosted_error
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 23


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    topics = []
    # CLUSTER_ACTION (a follower) covers every topic; otherwise DESCRIBE on each, as Kafka
    everything = allowed(node, ctx, Op.CLUSTER_ACTION, Res.CLUSTER)
    for topic in request.topics:
        partitions = []
        may = everything or allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, topic.topic)
        for p in topic.partitions:
            try:
                if not may:
                    raise KafkaError(ErrorCode.topic_authorization_failed, topic.topic)
                part = node.replicas.leader_partition(
                    topic.topic, p.partition, getattr(p, "current_leader_epoch", -1))
                epoch, end = part.end_offset_for_epoch(p.leader_epoch)
                partitions.append(build(
                    mod.EpochEndOffset, error_code=ErrorCode.none, partition=p.partition,
                    leader_epoch=epoch, end_offset=end,
                ))
            except KafkaError as exc:
                code = exc.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(node.metadata, topic.topic, p.partition)
                partitions.append(build(
                    mod.EpochEndOffset, error_code=code, partition=p.partition,
                    leader_epoch=-1, end_offset=-1,
                ))
        topics.append(build(mod.OffsetForLeaderTopicResult, topic=topic.topic,
                            partitions=tuple(partitions)))
    return build(mod.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE,
                 topics=tuple(topics))
