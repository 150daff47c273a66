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
# the longest Consume waits on another worker's partitions before reading them again
ROUTED_WAIT_S = 0.5
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


class _Led:
    """A partition this process leads, as Consume reads it: its log directly, woken by its
    own waiter."""

    def __init__(self, node: AdminServices, part: Partition) -> None:
        self.node, self.part = node, part
        self.topic, self.index = part.topic, part.index

    async def start(self) -> int:
        return int(self.part.log.log_start_offset)

    async def end(self) -> int:
        return int(self.part.high_watermark)

    async def offset_at(self, timestamp_ms: int) -> int:
        _, offset, _ = self.part.fetch_offset_for_timestamp(timestamp_ms)
        return int(offset)

    def waiter(self) -> asyncio.Future[None] | None:
        return self.part.new_waiter()

    async def read(self, offset: int, max_records: int) -> list[tuple[Any, int]]:
        """Up to max_records committed records from `offset`, each with the offset after
        it."""
        part = self.part
        if part.role is not Role.LEADER:
            raise _not_led(self.node, self.topic, self.index)
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


class _OtherWorker:
    """A partition this broker leads in another worker process: its offsets by ListOffsets
    to this broker's own listener, its records by the routed fetch (each read bounded by
    the high watermark, as a consumer's is); it has no waiter here, Consume waits for it
    through the routed wait."""

    def __init__(self, node: AdminServices, topic: str, index: int) -> None:
        self.node, self.topic, self.index = node, topic, index

    async def start(self) -> int:
        return await self.offset_at(-2)

    async def end(self) -> int:
        return await self.offset_at(-1)

    def waiter(self) -> asyncio.Future[None] | None:
        return None

    async def offset_at(self, timestamp_ms: int) -> int:
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

    async def read(self, offset: int, max_records: int) -> list[tuple[Any, int]]:
        """Records from `offset`, each with the offset after it."""
        [result] = await self.node.replicas.fetch(
            [FetchPartitionRequest(self.topic, self.index, offset, _READ_BYTES, -1, -1)],
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_READ_BYTES)
        if result.error_code is ErrorCode.not_leader_or_follower:
            raise _not_led(self.node, self.topic, self.index)
        if result.error_code is not ErrorCode.none:
            raise KafkaError(result.error_code, f"{self.topic}-{self.index}")
        data = b"" if result.records is None else result.records.read_bytes()
        return _decode(self.topic, self.index, data, offset, int(result.high_watermark),
                       max_records)[0]


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

    async def _start_of(self, request: Any, part: _Led | _OtherWorker) -> int:
        which = request.WhichOneof("start")
        if which == "offset":
            start, end = await part.start(), await part.end()
            if not start <= request.offset <= end:
                raise AdminError(S.OUT_OF_RANGE,
                                 f"offset {request.offset} is outside [{start}, {end}] of "
                                 f"{part.topic}-{part.index}")
            return int(request.offset)
        if which == "timestamp_ms":
            offset = await part.offset_at(request.timestamp_ms)
            return await part.end() if offset < 0 else offset
        if which == "position" and request.position == records.START_POSITION_EARLIEST:
            return await part.start()
        return await part.end()

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
        parts: list[_Led | _OtherWorker] = []
        for i in indexes:
            led = _leader_partition(self.node, t.name, i)
            parts.append(_OtherWorker(self.node, t.name, i) if led is None
                         else _Led(self.node, led))
        positions = {p.index: await self._start_of(request, p) for p in parts}
        routed = [(t.name, p.index) for p in parts if isinstance(p, _OtherWorker)]
        sent = 0
        loop = asyncio.get_running_loop()
        idle_deadline = loop.time() + wait_s
        while sent < limit:
            # Waiters first, then read: a record appended in between still wakes us.
            waiters: list[asyncio.Future[Any]] = [
                w for p in parts if (w := p.waiter()) is not None]
            try:
                progressed = False
                for p in parts:
                    for msg, next_offset in await p.read(positions[p.index], limit - sent):
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
                    if routed:
                        # another worker's partitions: the routed wait, armed after the
                        # read, so it is bounded and the partitions read again
                        waiters.append(asyncio.ensure_future(self.node.replicas.wait_any(
                            routed, for_log_end=False,
                            timeout_s=min(remaining, ROUTED_WAIT_S))))
                    await asyncio.wait(waiters, timeout=remaining,
                                       return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()


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
