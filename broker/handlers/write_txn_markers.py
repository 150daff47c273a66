"""WriteTxnMarkers (API 27), versions 0-2 (v0, dropped by Kafka 4.0, is v1's shape):
the transaction coordinator's end-transaction
markers, written on this broker's leader replicas.

Each marker names a producer (id, epoch), the outcome (COMMIT when transaction_result is
true, ABORT otherwise), the coordinator epoch and topic-partitions; every partition gets
one control batch through `ReplicaManager.write_txn_marker`, which answers once the ISR
holds it (acks=all), and its own error code (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...). The
partitions of one request are written concurrently. Kafka 4 serves v1+ (v0 was removed by
KIP-896); v2 adds transaction_version (KIP-890 part 2: written as a TV0/1 marker, its
epoch checks are the classic ones).

This is an inter-broker API: Kafka authorizes it with CLUSTER_ACTION on the cluster; the
ACL layer must refuse other principals (CLUSTER_AUTHORIZATION_FAILED for the whole request).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 27
# How long a marker may wait for the ISR: Kafka uses the coordinator's request timeout
# (request.timeout.ms, 30 s) for the append; the coordinator retries what times out.
MARKER_TIMEOUT_MS = 30_000


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    jobs: list[asyncio.Future[ErrorCode]] = []
    shape: list[tuple[int, list[tuple[str, list[int]]]]] = []
    for marker in request.markers:
        topics: list[tuple[str, list[int]]] = []
        for topic in marker.topics:
            indexes = [int(i) for i in topic.partition_indexes]
            topics.append((topic.name, indexes))
            for index in indexes:
                jobs.append(asyncio.ensure_future(_write(node, topic.name, index, marker)))
        shape.append((int(marker.producer_id), topics))
    codes = iter(await asyncio.gather(*jobs) if jobs else [])
    markers = []
    for producer_id, topics in shape:
        results = []
        for name, indexes in topics:
            parts = tuple(
                build(mod.WritableTxnMarkerPartitionResult, partition_index=i,
                      error_code=next(codes))
                for i in indexes
            )
            results.append(build(mod.WritableTxnMarkerTopicResult, name=name, partitions=parts))
        markers.append(build(mod.WritableTxnMarkerResult, producer_id=producer_id,
                             topics=tuple(results)))
    return build(mod.WriteTxnMarkersResponse, markers=tuple(markers))


async def _write(node: BrokerServices, topic: str, index: int, marker: Any) -> ErrorCode:
    if node.metadata.topic(topic) is None:
        return ErrorCode.unknown_topic_or_partition
    return await node.replicas.write_txn_marker(
        topic, index, producer_id=int(marker.producer_id),
        producer_epoch=int(marker.producer_epoch),
        coordinator_epoch=int(marker.coordinator_epoch),
        committed=bool(marker.transaction_result), timeout_ms=MARKER_TIMEOUT_MS,
    )


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition of every marker answers `code` (a refused CLUSTER_ACTION)."""
    mod = response_module(request)
    return build(mod.WriteTxnMarkersResponse, markers=tuple(
        build(mod.WritableTxnMarkerResult, producer_id=m.producer_id, topics=tuple(
            build(mod.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(
                build(mod.WritableTxnMarkerPartitionResult, partition_index=i, error_code=code)
                for i in t.partition_indexes))
            for t in m.topics))
        for m in request.markers))
