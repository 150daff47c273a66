"""Fetch (API 1), versions 0-16: long-polled reads up to the high watermark, and the
leader's side of replication for fetches from follower replicas (replica_id >= 0).

v0-v3 (Kafka 3.9 served them, 4.0 dropped them: KIP-896) are for consumers that read only the
legacy message formats: their records are down-converted, as Kafka 3.9 does, to magic 0 (v0-v1)
or magic 1 (v2-v3) message sets (broker/protocol/legacy.py `down_convert`), so they are read
into memory rather than sent with os.sendfile. v0-v2 have no response-wide max_bytes (Kafka
takes it as unlimited); v0 no throttle time.

Records go out as file slices spliced into the socket with os.sendfile: the response is
encoded by the narrow fast encoder (broker/protocol/fetch_encoder.py), which is tested
byte for byte against kio.

v11+ consumers may read from a follower up to its high watermark, and the leader names
an in-sync replica in the consumer's rack as preferred_read_replica when this broker has
a broker.rack (KIP-392).
v4+ consumers at isolation_level READ_COMMITTED read up to the last stable offset and get
the aborted transactions (producer id, first offset) of the range, from the segments'
.txnindex; the records still go out as file slices.
v12+ answers a follower whose last fetched epoch diverged with DivergingEpoch; v13+
names topics by id (an unknown id gets UNKNOWN_TOPIC_ID); v15+ carries the replica id
and broker epoch in ReplicaState; v16+ names the new leader's endpoint (KIP-951).

Fetch sessions (KIP-227) are declined the way Kafka declines them when its session
cache is full: every answer carries session_id 0, so clients keep sending full
fetches; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.config import effective_topic_configs
from broker.errors import KafkaError
from broker.handlers._leader_hints import (
    LEADER_HINT_ERRORS,
    current_leader,
    leader_endpoints,
    not_hosted_error,
)
from broker.protocol.fetch_encoder import (
    FetchPartition,
    FetchResponseData,
    FetchTopic,
    NodeEndpoint,
    encode_fetch_response,
)
from broker.protocol.frames import ResponseChunks
from broker.protocol.legacy import down_convert
from broker.replication.replica_manager import FetchPartitionRequest, FetchPartitionResult

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.metadata.image import MetadataImage
    from broker.server import RequestContext

API_KEY = 1
TOPIC_IDS_VERSION = 13
# Below this version consumers read legacy message sets only.
DOWN_CONVERSION_BELOW_VERSION = 4
_NO_MAX_BYTES = 2**31 - 1


def _down_conversion_enabled(node: BrokerServices, topic: str) -> bool:
    """The topic's message.downconversion.enable (Kafka 3.9's; default true)."""
    overrides = dict(node.metadata.topic_config(topic))
    dynamic = node.metadata.broker_config()
    return bool(effective_topic_configs(node.config, overrides, dynamic)
                ["message.downconversion.enable"])


def _down_converted(res: FetchPartitionResult, version: int, fetch_offset: int) -> Any:
    """The records of `res` as a legacy message set for a Fetch v0-v3 consumer."""
    if res.records is None or not res.records.length:
        return b""
    data = res.records.read_bytes()
    try:
        return down_convert(data, magic=0 if version <= 1 else 1, fetch_offset=fetch_offset)
    except KafkaError as e:
        res.error_code = e.error_code
        return b""


def _partition(res: FetchPartitionResult, image: MetadataImage,
               records: Any = None) -> FetchPartition:
    if res.error_code is ErrorCode.unknown_topic_or_partition:
        res.error_code = not_hosted_error(image, res.topic, res.partition)
    current = (-1, -1)
    if res.error_code in LEADER_HINT_ERRORS:
        # KIP-951: name the new leader so the client can switch without a metadata call.
        current = current_leader(image, res.topic, res.partition)
        if current == (-1, -1):
            current = (res.leader_id, res.leader_epoch)
    if records is None:
        records = res.records if res.records is not None and res.records.length else b""
    return FetchPartition(
        partition_index=res.partition, error_code=int(res.error_code),
        high_watermark=res.high_watermark, last_stable_offset=res.last_stable_offset,
        log_start_offset=res.log_start_offset, records=records,
        diverging_epoch=res.diverging_epoch or (-1, -1), current_leader=current,
        preferred_read_replica=res.preferred_read_replica,
        aborted_transactions=res.aborted_transactions,
    )


def replica_of(request: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of the sender: -1 for consumers."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id), int(state.replica_epoch)
    return int(getattr(request, "replica_id", -1)), -1


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> ResponseChunks:
    version = ctx.api_version
    if getattr(request, "session_id", 0) != 0:
        return encode_fetch_response(version, FetchResponseData(
            topics=(), error_code=int(ErrorCode.fetch_session_id_not_found), session_id=0,
        ))
    image = node.metadata
    by_ids = version >= TOPIC_IDS_VERSION
    wanted: list[FetchPartitionRequest] = []
    unknown_ids: dict[uuid.UUID | None, list[int]] = {}
    topic_ids: dict[str, uuid.UUID | None] = {}
    for topic in request.topics:
        if by_ids:
            t = image.topic_by_id(topic.topic_id) if topic.topic_id is not None else None
            if t is None:
                unknown_ids.setdefault(topic.topic_id, []).extend(
                    p.partition for p in topic.partitions)
                continue
            name = t.name
            topic_ids[name] = topic.topic_id
        else:
            name = topic.topic
        wanted.extend(
            FetchPartitionRequest(
                topic=name, partition=p.partition, fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
            )
            for p in topic.partitions
        )
    replica_id, replica_epoch = replica_of(request)
    # KIP-392: consumers of v11+ may read from a follower, and the leader may send them to
    # one in their rack.
    client_rack = request.rack_id if version >= 11 and replica_id < 0 else None
    results = await node.replicas.fetch(
        wanted, replica_id=replica_id, replica_epoch=replica_epoch, client_rack=client_rack,
        max_wait_ms=0 if unknown_ids else int(request.max_wait.total_seconds() * 1000),
        min_bytes=request.min_bytes, max_bytes=getattr(request, "max_bytes", _NO_MAX_BYTES),
        isolation_level=int(getattr(request, "isolation_level", 0)),
    )
    down_convert_to = version if version < DOWN_CONVERSION_BELOW_VERSION else None
    offsets = {(w.topic, w.partition): w.fetch_offset for w in wanted}
    by_topic: dict[str, list[FetchPartition]] = {}
    leaders: list[int] = []
    for res in results:
        records = None
        if down_convert_to is not None:
            if res.error_code is ErrorCode.none and not _down_conversion_enabled(node, res.topic):
                # Kafka: an old consumer of a topic with down-conversion disabled
                res.error_code = ErrorCode.unsupported_version
                records = b""
            else:
                records = _down_converted(res, down_convert_to,
                                          offsets.get((res.topic, res.partition), 0))
        part = _partition(res, image, records)
        if part.current_leader != (-1, -1):
            leaders.append(part.current_leader[0])
        by_topic.setdefault(res.topic, []).append(part)
    topics = [
        FetchTopic(partitions=parts, topic=name, topic_id=topic_ids.get(name))
        for name, parts in by_topic.items()
    ]
    topics.extend(
        FetchTopic(topic_id=tid, partitions=[
            FetchPartition(partition_index=i, error_code=int(ErrorCode.unknown_topic_id),
                           records=b"") for i in indexes])
        for tid, indexes in unknown_ids.items()
    )
    endpoints: list[NodeEndpoint] = []
    if version >= 16 and leaders:
        endpoints = [NodeEndpoint(b, host, port, rack) for b, host, port, rack
                     in leader_endpoints(image, ctx.listener_name, leaders)]
    return encode_fetch_response(version, FetchResponseData(
        topics=topics, node_endpoints=endpoints))
