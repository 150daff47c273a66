"""Fetch (API 1), versions 4-12: long-polled reads up to the high watermark.

Records go out as file slices spliced into the socket with os.sendfile: the response is
encoded by the narrow fast encoder (broker/protocol/fetch_encoder.py), which is tested
byte for byte against kio.

Fetch sessions (KIP-227) are declined the way Kafka declines them when its session
cache is full: every answer carries session_id 0, so clients keep sending full
fetches; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.protocol.fetch_encoder import (
    FetchPartition,
    FetchResponseData,
    FetchTopic,
    encode_fetch_response,
)
from broker.replication.replica_manager import FetchPartitionRequest, FetchPartitionResult
from broker.server.frames import ResponseChunks

if TYPE_CHECKING:
    from broker.node import Node
    from broker.server import RequestContext

API_KEY = 1
_LEADER_HINT_ERRORS = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)


def _partition(res: FetchPartitionResult) -> FetchPartition:
    current_leader = (-1, -1)
    if res.error_code in _LEADER_HINT_ERRORS:
        # KIP-951: name the new leader so the client can switch without a metadata call.
        current_leader = (res.leader_id, res.leader_epoch)
    records: Any = res.records if res.records is not None and res.records.length else b""
    return FetchPartition(
        partition_index=res.partition, error_code=int(res.error_code),
        high_watermark=res.high_watermark, last_stable_offset=res.last_stable_offset,
        log_start_offset=res.log_start_offset, records=records,
        diverging_epoch=res.diverging_epoch or (-1, -1), current_leader=current_leader,
    )


async def handle(node: Node, ctx: RequestContext, request: Any) -> ResponseChunks:
    version = ctx.api_version
    if getattr(request, "session_id", 0) != 0:
        return encode_fetch_response(version, FetchResponseData(
            topics=(), error_code=int(ErrorCode.fetch_session_id_not_found), session_id=0,
        ))
    wanted = [
        FetchPartitionRequest(
            topic=topic.topic, partition=p.partition, fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes,
            current_leader_epoch=getattr(p, "current_leader_epoch", -1),
            last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
        )
        for topic in request.topics for p in topic.partitions
    ]
    results = await node.replicas.fetch(
        wanted, replica_id=request.replica_id,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=request.min_bytes, max_bytes=request.max_bytes,
    )
    by_topic: dict[str, list[FetchPartition]] = {}
    for res in results:
        by_topic.setdefault(res.topic, []).append(_partition(res))
    return encode_fetch_response(version, FetchResponseData(
        topics=[FetchTopic(partitions=parts, topic=name) for name, parts in by_topic.items()],
    ))
