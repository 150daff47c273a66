"""DescribeProducers (API 61), v0: the active producers of partitions this broker leads
(what `kafka-transactions.sh describe-producers` and `find-hanging` read).

Per producer: id, epoch, last sequence, last timestamp, coordinator epoch of its last
transaction marker and the first offset of its ongoing transaction (-1 when none), from
the partition's producer state. A partition not led here answers NOT_LEADER_OR_FOLLOWER,
an unknown one UNKNOWN_TOPIC_OR_PARTITION, as Kafka does. With an authorizer, READ on the
topic is needed (else TOPIC_AUTHORIZATION_FAILED).
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

API_KEY = 61


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    topics = []
    for topic in request.topics:
        partitions = []
        readable = allowed(node, ctx, Op.READ, Res.TOPIC, topic.name)
        for index in topic.partition_indexes:
            if not readable:  # READ on the topic, as Kafka checks it
                partitions.append(build(
                    mod.PartitionResponse, partition_index=index,
                    error_code=ErrorCode.topic_authorization_failed, error_message=None,
                    active_producers=()))
                continue
            try:
                part = node.replicas.leader_partition(topic.name, int(index))
            except KafkaError as exc:
                code = exc.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(node.metadata, topic.name, int(index))
                partitions.append(build(
                    mod.PartitionResponse, partition_index=index, error_code=code,
                    error_message=exc.message or None, active_producers=()))
                continue
            producers = tuple(
                build(mod.ProducerState, producer_id=pid, producer_epoch=e.epoch,
                      last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                      coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.current_txn_first_offset)
                for pid, e in sorted(part.producer_state.producers.items())
            )
            partitions.append(build(mod.PartitionResponse, partition_index=index,
                                    error_code=ErrorCode.none, active_producers=producers))
        topics.append(build(mod.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(mod.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
