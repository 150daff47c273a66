"""RecordService: produce and consume through the node's ReplicaManager."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from broker.admin.records import murmur2, partition_for_key
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode
R = pb.records


def rec(value: bytes | None, key: bytes | None = None, partition: int | None = None,
        headers: dict[str, bytes] | None = None, ts: int | None = None) -> Any:
    r = R.ProducerRecord(headers=[R.Header(key=k, value=v) for k, v in (headers or {}).items()])
    if value is not None:
        r.value = value
    if key is not None:
        r.key = key
    if partition is not None:
        r.partition = partition
    if ts is not None:
        r.timestamp_ms = ts
    return r


async def consume(a: Admin, **kw: Any) -> list[Any]:
    return [m async for m in a.records.Consume(R.ConsumeRequest(**kw))]


@pytest.mark.parametrize("key", [b"", b"a", b"ab", b"abc", b"abcd", b"hello", b"\xff" * 13])
def test_murmur2_matches_the_kafka_clients(key: bytes) -> None:
    # kafka-python returns the hash as an unsigned 32-bit value; Java's is signed
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)
    assert partition_for_key(key, 7) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % 7


def test_produce_then_consume_from_the_beginning(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("p", partitions=3))

    async def body(a: Admin) -> Any:
        produced = await a.records.Produce(R.ProduceRequest(topic="p", records=[
            rec(b"v0", key=b"k0", headers={"h": b"1"}, ts=1_000),
            rec(b"v1", key=b"k1"),
            rec(None, key=b"k0"),            # a tombstone lands with its key
            rec(b"v3", partition=2),
        ]))
        consumed = await consume(a, topic="p", position=R.START_POSITION_EARLIEST,
                                 max_records=100, max_wait_ms=50)
        return produced, consumed

    produced, consumed = serve(node, body)
    p_k0, p_k1 = partition_for_key(b"k0", 3), partition_for_key(b"k1", 3)
    assert [r.partition for r in produced.records] == [p_k0, p_k1, p_k0, 2]
    assert produced.records[0].timestamp_ms == 1_000
    by_value = {(m.partition, m.offset): m for m in consumed}
    assert len(consumed) == 4
    for r in produced.records:
        assert (r.partition, r.offset) in by_value
    first = by_value[(produced.records[0].partition, produced.records[0].offset)]
    assert (first.key, first.value, first.timestamp_ms, first.timestamp_type) == (
        b"k0", b"v0", 1_000, "CreateTime")
    assert [(h.key, h.value) for h in first.headers] == [("h", b"1")]
    tomb = by_value[(produced.records[2].partition, produced.records[2].offset)]
    assert not tomb.HasField("value") and tomb.key == b"k0"
    # the records really are in the partition logs
    log = node.replicas.get("p", 2).log
    assert [r.value for r in log.read_records(0)][-1] == b"v3"


def test_consume_from_offset_and_timestamp_and_bounded_by_max_records(
        node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("c"))

    async def body(a: Admin) -> Any:
        await a.records.Produce(R.ProduceRequest(topic="c", records=[
            rec(b"%d" % i, ts=10_000 + i * 10) for i in range(10)]))
        from_offset = await consume(a, topic="c", partitions=[0], offset=7, max_wait_ms=50)
        from_ts = await consume(a, topic="c", timestamp_ms=10_045, max_wait_ms=50)
        limited = await consume(a, topic="c", position=R.START_POSITION_EARLIEST,
                                max_records=3, max_wait_ms=5000)
        latest = await consume(a, topic="c", max_wait_ms=50)
        return from_offset, from_ts, limited, latest

    from_offset, from_ts, limited, latest = serve(node, body)
    assert [m.offset for m in from_offset] == [7, 8, 9]
    assert [m.value for m in from_ts] == [b"5", b"6", b"7", b"8", b"9"]
    assert [m.offset for m in limited] == [0, 1, 2]
    assert latest == []


def test_consume_waits_for_a_record_produced_later(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("w"))

    async def body(a: Admin) -> Any:
        # A consume that missed the produce would answer empty after max_wait_ms; a loaded
        # machine (load 13 in a parallel run) can take seconds to run the wake-up.
        task = asyncio.ensure_future(consume(a, topic="w", max_records=1, max_wait_ms=30_000))
        await asyncio.sleep(0.2)
        assert not task.done()
        await a.records.Produce(R.ProduceRequest(topic="w", records=[rec(b"late")]))
        return await asyncio.wait_for(task, 40)

    [m] = serve(node, body)
    assert m.value == b"late" and m.offset == 0


def test_record_errors(node: AdminTestNode) -> None:
    async def setup() -> None:
        await node.register(2)
        await node.create_topic("e", assignments={0: [1], 1: [2]})

    asyncio.run(setup())

    async def body(a: Admin) -> list[tuple[Any, str]]:
        produce = a.records.Produce
        req = R.ProduceRequest
        return [
            await status_of(produce(req(topic="nope", records=[rec(b"x")]))),
            await status_of(produce(req(topic="e"))),
            await status_of(produce(req(topic="e", records=[rec(b"x", partition=5)]))),
            await status_of(produce(req(topic="e", acks=2, records=[rec(b"x")]))),
            await status_of(produce(req(topic="e", records=[rec(b"x", partition=1)]))),
            await status_of(consume(a, topic="nope")),
            await status_of(consume(a, topic="e", partitions=[9])),
            await status_of(consume(a, topic="e", partitions=[1])),
            await status_of(consume(a, topic="e", offset=0)),
            await status_of(consume(a, topic="e", partitions=[0], offset=5)),
            await status_of(consume(a, topic="e", partitions=[0], max_records=-1)),
        ]

    r = serve(node, body)
    assert [c for c, _ in r] == [
        S.NOT_FOUND, S.INVALID_ARGUMENT, S.NOT_FOUND, S.INVALID_ARGUMENT,
        S.FAILED_PRECONDITION, S.NOT_FOUND, S.NOT_FOUND, S.FAILED_PRECONDITION,
        S.INVALID_ARGUMENT, S.OUT_OF_RANGE, S.INVALID_ARGUMENT]
    assert "broker 2 leads it" in r[4][1]
    assert "broker 2 leads it" in r[7][1]
    assert node.replicas.get("e", 0).log.log_end_offset == 0


def test_produce_below_min_insync_replicas_is_unavailable(node: AdminTestNode) -> None:
    async def setup() -> None:
        await node.register(2)
        await node.create_topic("m", assignments={0: [1, 2]}, **{"min.insync.replicas": "2"})
        await node.fence(2)

    asyncio.run(setup())

    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.records.Produce(R.ProduceRequest(topic="m",
                                                                 records=[rec(b"x")])))

    code, details = serve(node, body)
    assert code is S.UNAVAILABLE and "min.insync.replicas" in details


def test_produce_with_acks_0_and_1_reports_the_assigned_offsets(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("a"))

    async def body(a: Admin) -> Any:
        r0 = await a.records.Produce(R.ProduceRequest(topic="a", acks=0,
                                                      records=[rec(b"x"), rec(b"y")]))
        r1 = await a.records.Produce(R.ProduceRequest(topic="a", acks=1, records=[rec(b"z")]))
        return r0, r1

    r0, r1 = serve(node, body)
    assert [(r.partition, r.offset) for r in r0.records] == [(0, 0), (0, 1)]
    assert [(r.partition, r.offset) for r in r1.records] == [(0, 2)]
    assert [r.value for r in node.replicas.get("a", 0).log.read_records(0)] == [b"x", b"y", b"z"]
