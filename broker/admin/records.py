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
from broker.replication.partition import Partition, Role

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


def _leader_partition(node: AdminServices, topic: str, index: int) -> Partition:
    part = node.replicas.get(topic, index)
    if part is None or part.role is not Role.LEADER:
        raise _not_led(node, topic, index)
    return part


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
        parts = [_leader_partition(self.node, t.name, i) for i in indexes]
        positions = {p.index: self._start_offset(request, p) for p in parts}
        sent = 0
        loop = asyncio.get_running_loop()
        idle_deadline = loop.time() + wait_s
        while sent < limit:
            # Waiters first, then read: a record appended in between still wakes us.
            waiters = [p.new_waiter() for p in parts]
            try:
                progressed = False
                for p in parts:
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

    @staticmethod
    def _read(part: Partition, offset: int, max_records: int) -> list[tuple[Any, int]]:
        """Up to max_records committed records from `offset`, each with the offset after it."""
        hw = part.high_watermark
        out: list[tuple[Any, int]] = []
        while offset < hw and len(out) < max_records:
            data = part.log.read(offset, _READ_BYTES, hw).read_bytes()
            data = data[:whole_batches_length(data)]
            if not data:
                break
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
                        topic=part.topic, partition=part.index, offset=r.offset,
                        timestamp_ms=r.timestamp, timestamp_type=ttype,
                        headers=[records.Header(key=k, **({} if v is None else {"value": v}))
                                 for k, v in r.headers])
                    if r.key is not None:
                        msg.key = r.key
                    if r.value is not None:
                        msg.value = r.value
                    out.append((msg, r.offset + 1))
                    if len(out) >= max_records:
                        return out
                offset = max(offset, h.next_offset)
        return out
