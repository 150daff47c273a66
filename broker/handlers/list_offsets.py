"""ListOffsets (API 2), versions 0-11: earliest, latest, by timestamp, max timestamp (v7+),
earliest local (-4, v8+), latest tiered (-5, v9+) and earliest pending upload (-6, v11+)
offsets, a timeout (v10+). A special timestamp the request's version does not have, or an
unknown one, is answered UNSUPPORTED_VERSION for its partition, as Kafka 4.4 answers.

Skiff has no tiered storage, so it answers as Kafka's UnifiedLog does without remote
storage: earliest local is the log start offset with its epoch (the whole log is local),
latest tiered and earliest pending upload are offset -1, timestamp -1, leader epoch -1; the
v10 timeout (for waits on
remote storage) has nothing to wait for.

v0 (Kafka 3.9 served it, 4.0 dropped it: KIP-896) answers the way Kafka's
legacyFetchOffsetsBefore did: a list (`old_style_offsets`) of up to `max_num_offsets` offsets,
newest first, drawn from the segments' base offsets (each with its file's last-modified time)
and, when the active segment holds data, the log end offset (time now). Latest starts from the
newest entry, earliest from the oldest; a timestamp starts from the newest segment modified
at or before it. For a consumer the high watermark replaces the offsets above it.

v2+ consumers name an isolation level: READ_UNCOMMITTED (0) answers LATEST as the high
watermark, READ_COMMITTED (1) as the last stable offset, and lookups by timestamp find
nothing at or past that bound; replicas (replica_id >= 0) read up to the log end.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._leader_hints import not_hosted_error
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.replication.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.replication import Partition
    from broker.server import RequestContext

API_KEY = 2


def legacy_offsets(part: Partition, timestamp: int, max_num_offsets: int, *,
                   replica_id: int, now_ms: int) -> list[int]:
    """ListOffsets v0: offsets newest first (see the module docstring)."""
    plog = part.log
    segments = plog.segments
    entries: list[tuple[int, int]] = [
        (max(seg.base_offset, plog.log_start_offset), seg.last_modified_ms())
        for seg in segments[:-1]
    ]
    active = segments[-1]
    entries.append((max(active.base_offset, plog.log_start_offset), active.last_modified_ms()))
    if active.size > 0:
        entries.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        start = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        start = -1
        for i, (_, modified) in enumerate(entries):
            if modified <= timestamp:
                start = i
    offsets = [entries[i][0] for i in range(start, max(start - max_num_offsets, -1), -1)]
    if replica_id < 0:
        hw = part.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw, *(o for o in offsets if o <= hw)][:max(max_num_offsets, 1)]
    return offsets


# The first version with each special timestamp (Kafka's ListOffsetsRequest).
SPECIAL_TIMESTAMP_SINCE = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9, -6: 11}


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    if ctx.api_version == 0:
        return _handle_v0(node, ctx, request, mod)
    topics = []
    for topic in request.topics:
        partitions = []
        may = allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, topic.name)
        for p in topic.partitions:
            try:
                if not may:
                    raise KafkaError(ErrorCode.topic_authorization_failed, topic.name)
                part = node.replicas.leader_partition(
                    topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1))
                if p.timestamp < 0 and ctx.api_version < SPECIAL_TIMESTAMP_SINCE.get(
                        p.timestamp, 1 << 15):
                    raise KafkaError(ErrorCode.unsupported_version,
                                     f"timestamp {p.timestamp} needs a newer ListOffsets")
                ts, offset, epoch = part.fetch_offset_for_timestamp(
                    p.timestamp, replica_id=request.replica_id,
                    isolation_level=int(getattr(request, "isolation_level", 0)))
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


def _handle_v0(node: BrokerServices, ctx: RequestContext, request: Any, mod: Any) -> Any:
    now_ms = int(time.time() * 1000)
    topics = []
    for topic in request.topics:
        partitions = []
        may = allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, topic.name)
        for p in topic.partitions:
            try:
                if not may:
                    raise KafkaError(ErrorCode.topic_authorization_failed, topic.name)
                if p.max_num_offsets < 0:
                    raise KafkaError(ErrorCode.invalid_request,
                                     f"max_num_offsets {p.max_num_offsets}")
                part = node.replicas.leader_partition(topic.name, p.partition_index, -1)
                offsets = legacy_offsets(part, p.timestamp, p.max_num_offsets,
                                         replica_id=request.replica_id, now_ms=now_ms)
                code = ErrorCode.none
            except KafkaError as exc:
                code = exc.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(node.metadata, topic.name, p.partition_index)
                offsets = []
            partitions.append(build(
                mod.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                error_code=code, old_style_offsets=tuple(offsets)))
        topics.append(build(mod.ListOffsetsTopicResponse, name=topic.name,
                            partitions=tuple(partitions)))
    return build(mod.ListOffsetsResponse, topics=tuple(topics))
