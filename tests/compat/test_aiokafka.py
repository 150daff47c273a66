"""aiokafka 0.14: its admin client, producer and a group-less consumer (group_id=None,
assign(), no commits). aiokafka only sends non-flexible versions (Metadata <= 5, Fetch <= 11),
so these tests cover the older encodings. Codecs via cramjam (snappy, lz4, zstd) and zlib."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from broker.testing import admin as adm
from tests.support.records import (
    CODECS,
    Rec,
    assert_same_records,
    assign_expected_offsets,
    make_records,
    now_ms,
)

pytestmark = pytest.mark.timeout(120)
WAIT_S = 20.0
TOPIC_OVERRIDES = {"retention.ms": "3600000", "max.message.bytes": "2000000"}
TOPIC_ALREADY_EXISTS = 36
DYNAMIC_TOPIC_CONFIG = 1
T = TypeVar("T")


def run(coro: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro(), timeout=90)
    return asyncio.run(bounded())


async def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                         compression_type=None if codec == "none" else codec,
                         max_request_size=2_000_000)
    await p.start()
    try:
        futures = [await p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                partition=r.partition, timestamp_ms=r.timestamp_ms)
                   for r in recs]
        for r, f in zip(recs, futures, strict=True):
            md = await asyncio.wait_for(f, WAIT_S)
            assert md.partition == r.partition
            r.offset = md.offset
    finally:
        await p.stop()


async def consume(c: AIOKafkaConsumer, n: int, wait_s: float = WAIT_S) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + wait_s
    while len(out) < n and time.monotonic() < deadline:
        batches = await c.getmany(timeout_ms=200)
        for msgs in batches.values():
            for m in msgs:
                assert m.timestamp_type == 0, f"CreateTime expected at offset {m.offset}"
                out.append(Rec(key=m.key, value=m.value, headers=list(m.headers),
                               timestamp_ms=m.timestamp, partition=m.partition, offset=m.offset))
    out.sort(key=lambda r: (r.partition, r.offset or 0))
    return out


async def assert_nothing_more(c: AIOKafkaConsumer, wait: float = 1.0) -> None:
    extra = await consume(c, 1, wait_s=wait)
    assert not extra, f"unexpected extra record {extra[0].brief()}"


def consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            fetch_max_wait_ms=100, request_timeout_ms=int(WAIT_S * 1000) + 5000)


@pytest.fixture
def topic(bootstrap: str, topic_name: str) -> Iterator[str]:
    yield topic_name
    adm.try_delete_topic(bootstrap, topic_name)


def test_cluster_metadata(bootstrap: str) -> None:
    async def go() -> dict[str, Any]:
        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await a.start()
        try:
            desc: dict[str, Any] = await a.describe_cluster()
            return desc
        finally:
            await a.close()

    desc = run(go)
    host, port = bootstrap.rsplit(":", 1)
    assert isinstance(desc["cluster_id"], str) and desc["cluster_id"]
    assert [(b["host"], b["port"]) for b in desc["brokers"]] == [(host, int(port))]
    assert desc["controller_id"] == desc["brokers"][0]["node_id"]


def test_create_describe_delete_topic(bootstrap: str, topic: str) -> None:
    async def go() -> None:
        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await a.start()
        try:
            r = await a.create_topics([NewTopic(topic, 2, 1, topic_configs=TOPIC_OVERRIDES)])
            assert [(t[0], t[1]) for t in r.topic_errors] == [(topic, 0)], r
            await asyncio.to_thread(adm.wait_topic_ready, bootstrap, topic, 2)
            assert topic in await a.list_topics()
            r = await a.create_topics([NewTopic(topic, 2, 1)])
            assert [(t[0], t[1]) for t in r.topic_errors] == [(topic, TOPIC_ALREADY_EXISTS)], r

            (resp,) = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            (res,) = resp.resources
            assert res[0] == 0, res
            entries = {e[0]: e for e in res[4]}  # name, value, read_only, source, ...
            for name, value in TOPIC_OVERRIDES.items():
                assert entries[name][1] == value, entries.get(name)
                assert entries[name][3] == DYNAMIC_TOPIC_CONFIG, entries[name]
            assert entries["cleanup.policy"][1] == "delete"
            assert entries["cleanup.policy"][3] != DYNAMIC_TOPIC_CONFIG

            r = await a.delete_topics([topic])
            assert [(t[0], t[1]) for t in r.topic_error_codes] == [(topic, 0)], r
            await asyncio.to_thread(adm.wait_topic_absent, bootstrap, topic)
            assert topic not in await a.list_topics()
        finally:
            await a.close()

    run(go)


def test_every_codec_then_consume_from_earliest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 2)
    base = now_ms() - 60_000
    expected: list[Rec] = []

    async def go() -> None:
        for n, codec in enumerate(CODECS):
            recs = make_records(codec, 24, base_ts=base + n * 1000, partitions=(0, 1))
            await produce(bootstrap, topic, recs, codec)
            expected.extend(recs)
        acked = [r.offset for r in expected]
        assign_expected_offsets(expected)
        assert acked == [r.offset for r in expected]

        c = consumer(bootstrap)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in (0, 1)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            assert_same_records(expected, await consume(c, len(expected)))
            await assert_nothing_more(c)
            counts = {p: sum(1 for r in expected if r.partition == p) for p in (0, 1)}
            assert await c.beginning_offsets(tps) == {tp: 0 for tp in tps}
            assert await c.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
        finally:
            await c.stop()

    run(go)


def test_consume_from_latest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)

    async def go() -> None:
        await produce(bootstrap, topic, make_records("old", 10, base_ts=now_ms() - 9000), "lz4")
        c = consumer(bootstrap)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_end(tp)
            assert await c.position(tp) == 10
            after = make_records("new", 12, base_ts=now_ms())
            await produce(bootstrap, topic, after, "snappy")
            assign_expected_offsets(after, {0: 10})
            assert_same_records(after, await consume(c, len(after)))
            await assert_nothing_more(c)
        finally:
            await c.stop()

    run(go)


def test_consume_from_timestamp(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    base = now_ms() - 100_000
    first = make_records("a", 10, base_ts=base)
    second = make_records("b", 10, base_ts=base + 50_000)

    async def go() -> None:
        await produce(bootstrap, topic, first, "gzip")
        await produce(bootstrap, topic, second, "zstd")
        assign_expected_offsets(first + second)
        c = consumer(bootstrap)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)

            async def lookup(ts: int) -> int | None:
                found = (await c.offsets_for_times({tp: ts}))[tp]
                return None if found is None else int(found.offset)

            assert await lookup(base) == 0
            assert await lookup(base + 5) == 5, "first offset with timestamp >= target"
            assert await lookup(base + 10) == 10
            assert await lookup(base + 50_003) == 13
            assert await lookup(base + 99_000) is None, "no record that late"

            c.assign([tp])
            start = await lookup(base + 7)
            assert start is not None
            c.seek(tp, start)
            assert_same_records((first + second)[7:], await consume(c, 13))
            await assert_nothing_more(c)
        finally:
            await c.stop()

    run(go)
