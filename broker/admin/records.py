"""RecordService: produce and consume a few records through this node's ReplicaManager.

For debugging only: the node must lead the partitions it is asked about (a Kafka client
is the tool for anything else). Records are built with broker.protocol.records and
appended exactly as a Produce request's batch would be.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, rpc_errors, stream_errors
from broker.admin.pb import records, records_grpc
from broker.admin.services import AdminServices
from broker.admin.topics import require_topic
from broker.errors import KafkaError
from broker.log import AppendResult
from broker.protocol.records import (
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batches,
    whole_batches_length,
)
from broker.replication.leader_offsets import list_offsets
from broker.replication.partition import Partition, Role
from broker.replication.replica_manager import FetchPartitionRequest

MAX_PRODUCE_RECORDS = 10_000
MAX_CONSUME_RECORDS = 100_000
MAX_WAIT_MS = 300_000
_READ_BYTES = 1 << 20
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's default partitioner hash), as a signed int32."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & ~3
    rem = length % 4
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _not_led(node: AdminServices, topic: str, index: int) -> AdminError:
    leader = node.metadata.leader_of(topic, index)
    who = f"broker {leader} leads it" if leader >= 0 else "it has no leader now"
    return AdminError(S.FAILED_PRECONDITION,
                      f"{topic}-{index}: {who}; node {node.node_id} produces and consumes "
                      "only partitions it leads (use that broker's admin listener, or a "
                      "Kafka client)")


def _leader_partition(node: AdminServices, topic: str, index: int) -> Partition | None:
    """The partition when this process leads it; None when this broker leads it in another
    of its worker processes (skiff.broker.workers), whose ReplicaManager routes to it."""
    part = node.replicas.get(topic, index)
    if part is not None and part.role is Role.LEADER:
        return part
    router = node.replicas.shard_router
    if (router is not None and not router.owns(topic, index)
            and node.metadata.leader_of(topic, index) == node.node_id):
        return None
    raise _not_led(node, topic, index)


class _OtherWorker:
    """A partition this broker leads in another worker process: its offsets by ListOffsets
    to this broker's own listener, its records by the routed fetch; each read is bounded by
    the high watermark, as a consumer's is."""

    def __init__(self, node: AdminServices, topic: str, index: int) -> None:
        self.node, self.topic, self.index = node, topic, index

    async def offset(self, timestamp_ms: int) -> int:
        reg = self.node.metadata.broker(self.node.node_id)
        ep = None if reg is None else reg.endpoint(self.node.config.inter_broker_listener_name)
        if ep is None:
            raise AdminError(S.UNAVAILABLE, "this broker's own endpoint is not known yet")
        key = (self.topic, self.index)
        try:
            out = await list_offsets(ep.host, ep.port, [key], timestamp_ms,
                                     self.node.inter_broker_security, 10.0)
        except (OSError, TimeoutError) as exc:
            raise AdminError(S.UNAVAILABLE, f"ListOffsets failed: {exc!r}; retry") from None
        error, offset = out.get(key, (ErrorCode.unknown_server_error, -1))
        if error is not ErrorCode.none:
            raise KafkaError(error, f"{self.topic}-{self.index}")
        return offset

    async def read(self, offset: int, max_records: int) -> tuple[list[tuple[Any, int]], int]:
        """(records from `offset`, each with the offset after it; the high watermark)."""
        [result] = await self.node.replicas.fetch(
            [FetchPartitionRequest(self.topic, self.index, offset, _READ_BYTES, -1, -1)],
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_READ_BYTES)
        if result.error_code is ErrorCode.not_leader_or_follower:
            raise _not_led(self.node, self.topic, self.index)
        if result.error_code is not ErrorCode.none:
            raise KafkaError(result.error_code, f"{self.topic}-{self.index}")
        data = b"" if result.records is None else result.records.read_bytes()
        hw = int(result.high_watermark)
        return _decode(self.topic, self.index, data, offset, hw, max_records)[0], hw


class RecordService(records_grpc.RecordServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices) -> None:
        self.node = node
        self._sticky = itertools.count()

    @rpc_errors
    async def Produce(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        t = require_topic(self.node, request.topic)
        if not request.records:
            raise AdminError(S.INVALID_ARGUMENT, "no records to produce")
        if len(request.records) > MAX_PRODUCE_RECORDS:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"at most {MAX_PRODUCE_RECORDS} records per call")
        acks = request.acks if request.HasField("acks") else -1
        if acks not in (-1, 0, 1):
            raise AdminError(S.INVALID_ARGUMENT, f"acks must be -1, 0 or 1, not {acks}")
        n = t.num_partitions
        sticky = next(self._sticky) % n
        now = self.node.clock()
        placed: list[tuple[int, int]] = []   # (partition, index within its batch)
        batches: dict[int, list[Record]] = {}
        for r in request.records:
            if r.HasField("partition"):
                p = r.partition
                if p not in t.partitions:
                    raise AdminError(S.NOT_FOUND, f"partition {t.name}-{p} does not exist "
                                                  f"(the topic has {n} partitions)")
            elif r.HasField("key"):
                p = partition_for_key(r.key, n)
            else:
                p = sticky
            batch = batches.setdefault(p, [])
            placed.append((p, len(batch)))
            batch.append(Record(
                timestamp=r.timestamp_ms if r.HasField("timestamp_ms") else now,
                key=r.key if r.HasField("key") else None,
                value=r.value if r.HasField("value") else None,
                headers=tuple((h.key, h.value if h.HasField("value") else None)
                              for h in r.headers)))
        for p in batches:
            _leader_partition(self.node, t.name, p)
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else 30_000
        results: dict[tuple[str, int], AppendResult | KafkaError] = (
            await self.node.replicas.append(
                {(t.name, p): build_batch(rs) for p, rs in batches.items()},
                required_acks=acks, timeout_ms=timeout_ms))
        for (_, p), res in sorted(results.items()):
            if isinstance(res, KafkaError):
                if res.error_code is ErrorCode.not_leader_or_follower:
                    raise _not_led(self.node, t.name, p)
                raise KafkaError(res.error_code, f"{t.name}-{p}: {res.message}")
        out = []
        for p, i in placed:
            res = results[(t.name, p)]
            assert isinstance(res, AppendResult)
            rec = batches[p][i]
            ts = res.log_append_time_ms if res.log_append_time_ms >= 0 else rec.timestamp
            out.append(records.ProducedRecord(partition=p, offset=res.base_offset + i,
                                              timestamp_ms=ts))
        return records.ProduceResponse(records=out)

    async def _start_of(self, request: Any, part: Partition | _OtherWorker) -> int:
        if isinstance(part, Partition):
            return self._start_offset(request, part)
        which = request.WhichOneof("start")
        if which == "offset":
            start, end = await part.offset(-2), await part.offset(-1)
            if not start <= request.offset <= end:
                raise AdminError(S.OUT_OF_RANGE,
                                 f"offset {request.offset} is outside [{start}, {end}] of "
                                 f"{part.topic}-{part.index}")
            return int(request.offset)
        if which == "timestamp_ms":
            offset = await part.offset(request.timestamp_ms)
            return await part.offset(-1) if offset < 0 else offset
        if which == "position" and request.position == records.START_POSITION_EARLIEST:
            return await part.offset(-2)
        return await part.offset(-1)

    def _start_offset(self, request: Any, part: Partition) -> int:
        log = part.log
        which = request.WhichOneof("start")
        if which == "offset":
            if not log.log_start_offset <= request.offset <= part.high_watermark:
                raise AdminError(S.OUT_OF_RANGE,
                                 f"offset {request.offset} is outside "
                                 f"[{log.log_start_offset}, {part.high_watermark}] of "
                                 f"{part.topic}-{part.index}")
            return int(request.offset)
        if which == "timestamp_ms":
            _, offset, _ = part.fetch_offset_for_timestamp(request.timestamp_ms)
            return part.high_watermark if offset < 0 else offset
        if which == "position" and request.position == records.START_POSITION_EARLIEST:
            return int(log.log_start_offset)
        return part.high_watermark

    @stream_errors
    async def Consume(self, request: Any,
                      context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        t = require_topic(self.node, request.topic)
        indexes = list(dict.fromkeys(request.partitions)) or sorted(t.partitions)
        for i in indexes:
            if i not in t.partitions:
                raise AdminError(S.NOT_FOUND, f"partition {t.name}-{i} does not exist")
        if request.max_records < 0 or request.max_wait_ms < 0:
            raise AdminError(S.INVALID_ARGUMENT, "max_records and max_wait_ms must be >= 0")
        if request.WhichOneof("start") == "offset" and len(indexes) != 1:
            raise AdminError(S.INVALID_ARGUMENT, "a start offset needs exactly one partition")
        limit = min(request.max_records or 10, MAX_CONSUME_RECORDS)
        wait_s = min(request.max_wait_ms or 1000, MAX_WAIT_MS) / 1000
        parts: list[Partition | _OtherWorker] = [
            _leader_partition(self.node, t.name, i) or _OtherWorker(self.node, t.name, i)
            for i in indexes]
        positions = {p.index: await self._start_of(request, p) for p in parts}
        sent = 0
        loop = asyncio.get_running_loop()
        idle_deadline = loop.time() + wait_s
        if not all(isinstance(p, Partition) for p in parts):
            async for msg in self._consume_routed(t.name, parts, positions, limit, wait_s):
                yield msg
            return
        local = [p for p in parts if isinstance(p, Partition)]
        while sent < limit:
            # Waiters first, then read: a record appended in between still wakes us.
            waiters = [p.new_waiter() for p in local]
            try:
                progressed = False
                for p in local:
                    if p.role is not Role.LEADER:
                        raise _not_led(self.node, t.name, p.index)
                    for msg, next_offset in self._read(p, positions[p.index], limit - sent):
                        yield msg
                        sent += 1
                        progressed = True
                        positions[p.index] = next_offset
                    if sent >= limit:
                        break
                if progressed:
                    idle_deadline = loop.time() + wait_s
                remaining = idle_deadline - loop.time()
                if sent >= limit or remaining <= 0:
                    return
                if not progressed:
                    await asyncio.wait(waiters, timeout=remaining,
                                       return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()

    async def _consume_routed(self, topic: str, parts: list[Partition | _OtherWorker],
                              positions: dict[int, int], limit: int,
                              wait_s: float) -> AsyncIterator[Any]:
        """Consume over partitions some of which other workers of this broker own: each
        read goes through the routed fetch, each wait through the routed wait."""
        readers = [p if isinstance(p, _OtherWorker) else _OtherWorker(self.node, topic, p.index)
                   for p in parts]
        sent = 0
        loop = asyncio.get_running_loop()
        idle_deadline = loop.time() + wait_s
        while sent < limit:
            progressed = False
            for r in readers:
                got, _ = await r.read(positions[r.index], limit - sent)
                for msg, next_offset in got:
                    yield msg
                    sent += 1
                    progressed = True
                    positions[r.index] = next_offset
                if sent >= limit:
                    return
            if progressed:
                idle_deadline = loop.time() + wait_s
            remaining = idle_deadline - loop.time()
            if remaining <= 0:
                return
            if not progressed:
                await self.node.replicas.wait_any([(topic, r.index) for r in readers],
                                                  for_log_end=False,
                                                  timeout_s=min(remaining, 0.5))

    @staticmethod
    def _read(part: Partition, offset: int, max_records: int) -> list[tuple[Any, int]]:
        """Up to max_records committed records from `offset`, each with the offset after it."""
        hw = part.high_watermark
        out: list[tuple[Any, int]] = []
        while offset < hw and len(out) < max_records:
            data = part.log.read(offset, _READ_BYTES, hw).read_bytes()
            got, offset, done = _decode(part.topic, part.index, data, offset, hw,
                                        max_records - len(out))
            out += got
            if done:
                break
        return out


def _decode(topic: str, index: int, data: bytes, offset: int, hw: int, max_records: int,
            ) -> tuple[list[tuple[Any, int]], int, bool]:
    """The records of `data` from `offset` below `hw` (at most max_records), each with the
    offset after it; the offset after what was read; whether to stop (nothing whole left,
    or max_records taken)."""
    out: list[tuple[Any, int]] = []
    data = data[:whole_batches_length(data)]
    if not data:
        return out, offset, True
    for h, batch in iter_batches(data):
        if h.is_control:
            offset = max(offset, h.next_offset)
            continue
        ttype = ("LogAppendTime" if h.timestamp_type is TimestampType.LOG_APPEND_TIME
                 else "CreateTime")
        for r in decode_records(batch):
            if r.offset < offset or r.offset >= hw:
                continue
            msg = records.ConsumedRecord(
                topic=topic, partition=index, offset=r.offset,
                timestamp_ms=r.timestamp, timestamp_type=ttype,
                headers=[records.Header(key=k, **({} if v is None else {"value": v}))
                         for k, v in r.headers])
            if r.key is not None:
                msg.key = r.key
            if r.value is not None:
                msg.value = r.value
            out.append((msg, r.offset + 1))
            if len(out) >= max_records:
                return out, r.offset + 1, True
        offset = max(offset, h.next_offset)
    return out, offset, False
