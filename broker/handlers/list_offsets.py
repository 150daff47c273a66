"""ListOffsets (API 2), versions 1-7: earliest, latest, by timestamp, max timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._build import build, response_module
from broker.handlers._leader_hints import not_hosted_error
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.replication import Partition
    from broker.server import RequestContext

API_KEY = 2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def lookup(part: Partition, timestamp: int, *, replica_id: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) the way Kafka's leader answers ListOffsets."""
    plog = part.log
    fetchable = plog.log_end_offset if replica_id >= 0 else part.last_stable_offset
    if timestamp == EARLIEST_TIMESTAMP:
        return -1, plog.log_start_offset, plog.epoch_cache.epoch_for_offset(plog.log_start_offset)
    if timestamp == LATEST_TIMESTAMP:
        return -1, fetchable, plog.epoch_cache.epoch_for_offset(fetchable)
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable:
        return -1, -1, -1
    offset, ts, epoch = found
    return ts, offset, epoch


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            try:
                part = node.replicas.leader_partition(
                    topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1))
                ts, offset, epoch = lookup(part, p.timestamp, replica_id=request.replica_id)
                partitions.append(build(
                    mod.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                    error_code=ErrorCode.none, timestamp=ts, offset=offset, leader_epoch=epoch,
                ))
            except KafkaError as exc:
                code = exc.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(node.metadata, topic.name, p.partition_index)
                partitions.append(build(
                    mod.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                    error_code=code, timestamp=-1, offset=-1, leader_epoch=-1,
                ))
        topics.append(build(mod.ListOffsetsTopicResponse, name=topic.name,
                            partitions=tuple(partitions)))
    return build(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
