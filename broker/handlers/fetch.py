"""Fetch (API 1), versions 4-12: long-polled reads up to the high watermark.

Fetch sessions (KIP-227) are declined the way Kafka declines them when its session
cache is full: every answer carries session_id 0, so clients keep sending full
fetches; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._build import build, response_module
from broker.replication.replica_manager import FetchPartitionRequest, FetchPartitionResult

if TYPE_CHECKING:
    from broker.node import Node
    from broker.server import RequestContext

API_KEY = 1
_NO_THROTTLE = datetime.timedelta(0)
READ_COMMITTED = 1
_LEADER_HINT_ERRORS = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)


def _partition_data(mod: Any, res: FetchPartitionResult) -> Any:
    fields: dict[str, Any] = {}
    if res.error_code in _LEADER_HINT_ERRORS and hasattr(mod, "LeaderIdAndEpoch"):
        # KIP-951: tell the client the new leader so it can switch without a metadata call.
        fields["current_leader"] = mod.LeaderIdAndEpoch(
            leader_id=res.leader_id, leader_epoch=res.leader_epoch
        )
    return build(
        mod.PartitionData, partition_index=res.partition, error_code=res.error_code,
        high_watermark=res.high_watermark, last_stable_offset=res.last_stable_offset,
        log_start_offset=res.log_start_offset, aborted_transactions=None,
        preferred_read_replica=-1,
        records=res.records.read_bytes() if res.records is not None else b"",
        **fields,
    )


async def handle(node: Node, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    if getattr(request, "session_id", 0) != 0:
        return build(
            mod.FetchResponse, throttle_time=_NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found, session_id=0, responses=(),
        )
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
    by_topic: dict[str, list[Any]] = {}
    for res in results:
        by_topic.setdefault(res.topic, []).append(_partition_data(mod, res))
    responses = tuple(
        build(mod.FetchableTopicResponse, topic=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return build(
        mod.FetchResponse, throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
        responses=responses,
    )
