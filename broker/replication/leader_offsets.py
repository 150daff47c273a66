"""Offsets asked of a partition's leader on another broker: Kafka's ListOffsets (v4) over
the inter-broker listener, as Kafka's own brokers ask one another (the admin plane's resets to
a time, the lag of a share-partition led elsewhere, KIP-1226's PartitionMetadataClient)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.metadata.image import MetadataImage
from broker.protocol.transport import ConnectionSecurity, KafkaConnection

LIST_OFFSETS_KEY = 2
LATEST_TIMESTAMP = -1
PEER_TIMEOUT_S = 5.0
Key = tuple[str, int]


async def list_offsets(host: str, port: int, keys: list[Key], timestamp_ms: int,
                       security: ConnectionSecurity | None = None,
                       timeout_s: float = PEER_TIMEOUT_S) -> dict[Key, tuple[ErrorCode, int]]:
    """ListOffsets v4 for `keys` at `timestamp_ms` (-1: the latest, the high watermark at
    read_uncommitted): (error, offset) per partition the leader answered. Raises OSError or
    TimeoutError when the leader cannot be reached."""
    from kio.schema.list_offsets.v4 import request as lo

    q: Any = lo
    topics: dict[str, list[int]] = {}
    for t, p in keys:
        topics.setdefault(t, []).append(p)
    request = q.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=tuple(
        q.ListOffsetsTopic(name=t, partitions=tuple(
            q.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                   timestamp=timestamp_ms) for p in ps))
        for t, ps in topics.items()))
    conn = KafkaConnection(host, port, "skiff-leader-offsets", security=security)
    try:
        resp = await conn.request(LIST_OFFSETS_KEY, 4, request, timeout_s)
    finally:
        await conn.close()
    return {(str(t.name), int(p.partition_index)): (ErrorCode(int(p.error_code)), int(p.offset))
            for t in resp.topics for p in t.partitions}


async def latest_offsets(image: MetadataImage, listener: str,
                         security: ConnectionSecurity | None, keys: Iterable[Key],
                         timeout_s: float = PEER_TIMEOUT_S) -> dict[Key, int]:
    """The latest offset (high watermark) of each partition, asked of its leader; a partition
    whose leader is unknown, unreachable or answers an error is left out."""
    by_leader: dict[int, list[Key]] = {}
    for t, p in keys:
        leader = image.leader_of(t, p)
        if leader >= 0:
            by_leader.setdefault(leader, []).append((t, p))
    out: dict[Key, int] = {}

    async def ask(leader: int, wanted: list[Key]) -> None:
        reg = image.broker(leader)
        ep = None if reg is None else reg.endpoint(listener)
        if ep is None:
            return
        try:
            answered = await list_offsets(ep.host, ep.port, wanted, LATEST_TIMESTAMP, security,
                                          timeout_s)
        except (OSError, TimeoutError):
            return
        for key in wanted:
            error, offset = answered.get(key, (ErrorCode.unknown_server_error, -1))
            if error is ErrorCode.none and offset >= 0:
                out[key] = offset

    await asyncio.gather(*(ask(b, w) for b, w in by_leader.items()))
    return out
