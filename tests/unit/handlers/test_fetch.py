"""Fetch v0-16 (v0-v3 down-converted to legacy message sets): records spliced as file
slices, decoded here by kio at every version; v13+ names topics by id."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.handlers import fetch, write_txn_markers
from broker.protocol.compression import Compression
from broker.protocol.kio_build import build
from broker.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    whole_batches_length,
)
from tests.unit.handlers.conftest import TestNode, make_ctx, run
from tests.unit.handlers.datapath import (
    BASE_TS,
    create,
    produce_ok,
    produce_txn,
    records,
    schema_module,
    txn_markers_request,
    txn_records,
)

VERSIONS = range(4, 19)


def fetch_request(version: int, topic: str, offset: int, *, max_wait_ms: int = 0,
                  min_bytes: int = 1, partition: int = 0, session_id: int = 0,
                  session_epoch: int = -1, leader_epoch: int = -1,
                  topic_id: uuid.UUID | None = None, partitions: tuple[int, ...] | None = None,
                  forgotten: tuple[int, ...] = ()) -> Any:
    """`partitions`: several partitions of `topic` at `offset` (None: `partition` alone;
    (): no topic at all, as an incremental fetch with nothing changed sends)."""
    m = schema_module("fetch", version)
    indexes = (partition,) if partitions is None else partitions
    topics = (build(m.FetchTopic, topic=topic, topic_id=topic_id, partitions=tuple(
        build(m.FetchPartition, partition=i, fetch_offset=offset,
              partition_max_bytes=1 << 20, current_leader_epoch=leader_epoch,
              log_start_offset=-1) for i in indexes)),) if indexes else ()
    forgotten_topics = (build(m.ForgottenTopic, topic=topic, topic_id=topic_id,
                              partitions=forgotten),) if forgotten else ()
    return build(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
        session_epoch=session_epoch, topics=topics,
        forgotten_topics_data=forgotten_topics, rack_id="",
    )


async def fetch_decoded(node: TestNode, version: int, request: Any) -> Any:
    chunks = await fetch.handle(node, make_ctx(1, version), request)
    body = chunks.to_bytes()
    m = schema_module("fetch", version, "response")
    decoded, used = entity_reader(m.FetchResponse)(body, 0)
    assert used == len(body)
    return decoded


@pytest.mark.parametrize("version", VERSIONS)
def test_fetch_returns_what_was_produced(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", b"b"))
        await produce_ok(node, "t", records(b"c"))
        topic_id = node.topic("t").topic_id
        resp = await fetch_decoded(node, version, fetch_request(version, "t", 0,
                                                                topic_id=topic_id))
        if version >= 13:
            assert resp.responses[0].topic_id == topic_id
        part = resp.responses[0].partitions[0]
        assert part.error_code is ErrorCode.none
        assert part.high_watermark == 3
        got = decode_records(part.records)
        values = [r.value for r in got]
        offsets = [r.offset for r in got]
        # Two batches: the first is decoded whole; batches may follow in the same bytes.
        assert values[:2] == [b"a", b"b"] and offsets[:2] == [0, 1]
        assert got[0].headers == (("h", b"v"),)
    run(go())


@pytest.mark.parametrize("version", [4, 12, 16])
def test_empty_partition_answers_empty_records_not_null(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        resp = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=node.topic("t").topic_id))
        assert resp.responses[0].partitions[0].records == b""
    run(go())


def test_offset_out_of_range_and_unknown_partition(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a"))
        resp = await fetch_decoded(node, 12, fetch_request(12, "t", 99))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.offset_out_of_range
        resp = await fetch_decoded(node, 12, fetch_request(12, "nope", 0))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_or_partition
    run(go())


def test_fenced_epoch(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        epoch = node.topic("t").partitions[0].leader_epoch
        resp = await fetch_decoded(node, 12, fetch_request(12, "t", 0, leader_epoch=epoch + 1))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.unknown_leader_epoch
    run(go())


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_fetch_session_answers_only_changed_partitions(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t", partitions=4)
        tid = node.topic("t").topic_id
        full = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, partitions=(0, 1, 2, 3), session_epoch=0))
        sid = full.session_id
        assert sid != 0 and full.error_code is ErrorCode.none
        assert sorted(p.partition_index for p in full.responses[0].partitions) == [0, 1, 2, 3]
        # Nothing changed: an empty incremental fetch answers no partition.
        idle = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, partitions=(), session_id=sid, session_epoch=1))
        assert (idle.error_code, idle.session_id, idle.responses) == (ErrorCode.none, sid, ())
        # New data on partition 2: only it is answered, though the request names none.
        await produce_ok(node, "t", records(b"x"), partition=2)
        inc = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, partitions=(), session_id=sid, session_epoch=2))
        assert [p.partition_index for p in inc.responses[0].partitions] == [2]
        assert [r.value for r in decode_records(inc.responses[0].partitions[0].records)] == [b"x"]
        # The client moves partition 2 on and forgets 3: 2's records are not sent again.
        inc = await fetch_decoded(node, version, fetch_request(
            version, "t", 1, topic_id=tid, partitions=(2,), session_id=sid, session_epoch=3,
            forgotten=(3,)))
        assert inc.responses == ()
        assert node.replicas.fetch_sessions.num_partitions == 3
        # A wrong epoch and an unknown session are refused with their errors.
        bad = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, partitions=(), session_id=sid, session_epoch=9))
        assert (bad.error_code, bad.session_id) == (ErrorCode.invalid_fetch_session_epoch, 0)
        gone = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, partitions=(), session_id=sid + 1, session_epoch=1))
        assert gone.error_code is ErrorCode.fetch_session_id_not_found
        # A sessionless fetch (epoch -1) naming the session closes it.
        closed = await fetch_decoded(node, version, fetch_request(
            version, "t", 0, topic_id=tid, session_id=sid, session_epoch=-1))
        assert closed.session_id == 0 and len(node.replicas.fetch_sessions) == 0
    run(go())


def test_fetch_session_long_polls_over_the_whole_session(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t", partitions=2)
        full = await fetch_decoded(node, 12, fetch_request(12, "t", 0, partitions=(0, 1),
                                                           session_epoch=0))
        sid = full.session_id

        async def later() -> None:
            await asyncio.sleep(0.2)
            await produce_ok(node, "t", records(b"y"), partition=1)

        task = asyncio.create_task(later())
        start = time.monotonic()
        inc = await fetch_decoded(node, 12, fetch_request(
            12, "t", 0, partitions=(), session_id=sid, session_epoch=1, max_wait_ms=5000))
        await task
        assert time.monotonic() - start < 4
        assert [p.partition_index for p in inc.responses[0].partitions] == [1]
    run(go())


def test_unknown_topic_id_in_a_session_is_answered_every_time(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        stray = uuid.uuid4()
        full = await fetch_decoded(node, 13, fetch_request(13, "t", 0, topic_id=stray,
                                                           session_epoch=0))
        sid = full.session_id
        for epoch in (1, 2):
            inc = await fetch_decoded(node, 13, fetch_request(
                13, "t", 0, partitions=(), session_id=sid, session_epoch=epoch))
            assert inc.responses[0].topic_id == stray
            assert inc.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_id
    run(go())


def test_long_poll_answers_as_soon_as_data_arrives(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")

        async def later() -> None:
            await asyncio.sleep(0.1)
            await produce_ok(node, "t", records(b"late"))

        task = asyncio.create_task(later())
        started = time.monotonic()
        resp = await fetch_decoded(node, 12, fetch_request(12, "t", 0, max_wait_ms=5000))
        elapsed = time.monotonic() - started
        await task
        assert [r.value for r in decode_records(resp.responses[0].partitions[0].records)] == [
            b"late"]
        assert 0.08 < elapsed < 2.0
    run(go())


@pytest.mark.parametrize("version", [13, 16])
def test_unknown_topic_id_is_answered_at_once(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        stranger = uuid.UUID(int=12345)
        started = time.monotonic()
        resp = await fetch_decoded(node, version, fetch_request(
            version, "", 0, topic_id=stranger, max_wait_ms=5000))
        assert time.monotonic() - started < 2.0
        [topic] = resp.responses
        assert topic.topic_id == stranger
        assert topic.partitions[0].error_code is ErrorCode.unknown_topic_id
    run(go())


# ---- v0-v3: down-conversion for consumers of the legacy formats (KIP-896 removed them) ------

def _legacy_records(data: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) per message, parsed by kafka-python (a real
    client's decoder of magic 0/1 message sets, wrappers decompressed)."""
    from kafka.record import MemoryRecords

    from broker.protocol import legacy

    out = []
    wrappers = legacy.parse_message_set(data) if data else []
    if any(w.magic == 0 and w.codec == Compression.LZ4 for w in wrappers):
        # kafka-python needs xxhash for Kafka's pre-0.10 lz4 framing: read it with ours, which
        # repairs that framing's header checksum before lz4 checks it.
        for w in wrappers:
            inner = legacy._inner_messages(w, 1 << 20) if w.codec else [w]
            out.extend((m.magic, m.offset, None, m.key, m.value) for m in inner)
        return out
    mr = MemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        out.extend((batch.magic, r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                   Compression.LZ4])
def test_legacy_fetch_down_converts(node: TestNode, version: int, codec: Compression) -> None:
    async def go() -> None:
        await create(node, "t")
        batch = [Record(timestamp=BASE_TS + i, key=b"k%d" % i, value=v, headers=(("h", b"x"),))
                 for i, v in enumerate((b"a", b"b", b"c"))]
        await produce_ok(node, "t", build_batch(batch, compression=codec))     # 0..2
        await produce_ok(node, "t", records(b"d"))                              # 3
        got: list[Any] = []
        offset = 1
        for _ in range(4):  # a fetch may stop at a batch boundary: read on to the end
            resp = await fetch_decoded(node, version, fetch_request(version, "t", offset))
            assert hasattr(resp, "throttle_time") == (version >= 1)
            part = resp.responses[0].partitions[0]
            assert part.error_code is ErrorCode.none and part.high_watermark == 4
            got.extend(_legacy_records(part.records))
            if not got or got[-1][1] == 3:
                break
            offset = got[-1][1] + 1
        magic = 0 if version <= 1 else 1
        assert [g[0] for g in got] == [magic] * 3
        # records before the fetch offset inside the first batch are left out
        assert [(g[1], g[3], g[4]) for g in got] == [
            (1, b"k1", b"b"), (2, b"k2", b"c"), (3, b"k0", b"d")]
        if magic == 1:
            assert [g[2] for g in got] == [BASE_TS + 1, BASE_TS + 2, BASE_TS]
        else:
            assert [g[2] for g in got] == [None] * 3 or [g[2] for g in got] == [-1] * 3
    run(go())


def test_legacy_fetch_zstd_is_unsupported_compression(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", build_batch([Record(value=b"z")],
                                                compression=Compression.ZSTD))
        resp = await fetch_decoded(node, 2, fetch_request(2, "t", 0))
        part = resp.responses[0].partitions[0]
        assert part.error_code is ErrorCode.unsupported_compression_type
        assert part.records == b""
        # newer versions read it as it is
        resp = await fetch_decoded(node, 4, fetch_request(4, "t", 0))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.none
    run(go())


def test_legacy_fetch_refused_when_down_conversion_disabled(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t", **{"message.downconversion.enable": "false"})
        await produce_ok(node, "t", records(b"a"))
        resp = await fetch_decoded(node, 1, fetch_request(1, "t", 0))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.unsupported_version
        resp = await fetch_decoded(node, 4, fetch_request(4, "t", 0))
        assert resp.responses[0].partitions[0].error_code is ErrorCode.none
    run(go())


def test_legacy_fetch_empty_and_log_append_time(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t", **{"message.timestamp.type": "LogAppendTime"})
        resp = await fetch_decoded(node, 3, fetch_request(3, "t", 0))
        assert resp.responses[0].partitions[0].records == b""
        await produce_ok(node, "t", records(b"a", ts=5))
        resp = await fetch_decoded(node, 3, fetch_request(3, "t", 0))
        raw = resp.responses[0].partitions[0].records
        [(magic, offset, ts, _k, value)] = _legacy_records(raw)
        assert (magic, offset, value) == (1, 0, b"a") and ts > BASE_TS
        assert raw[12 + 5] & 0x08  # attributes: timestamp type LogAppendTime
    run(go())


def committed_request(version: int, topic_id: uuid.UUID, offset: int = 0) -> Any:
    return dataclasses.replace(fetch_request(version, "t", offset, topic_id=topic_id),
                               isolation_level=1)


@pytest.mark.parametrize("version", [4, 5, 11, 12, 16])
def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(
    node: TestNode, version: int,
) -> None:
    async def go() -> None:
        await create(node, "t")
        topic_id = node.topic("t").topic_id
        now = int(time.time() * 1000)  # recent: segment.ms rolls nothing in between
        await produce_txn(node, "t", txn_records(7, 0, 0, b"x1", b"x2", ts=now))  # 0-1
        await produce_ok(node, "t", records(b"p", ts=now))                         # 2
        await write_txn_markers.handle(node, make_ctx(27, 1), txn_markers_request(
            1, (7, 0, False, 0, [("t", [0])])))                        # 3: ABORT of 0-1
        await produce_txn(node, "t", txn_records(8, 0, 0, b"open", ts=now))       # 4, open
        await produce_ok(node, "t", records(b"q", ts=now))                         # 5
        resp = await fetch_decoded(node, version, committed_request(version, topic_id))
        part = resp.responses[0].partitions[0]
        assert (part.high_watermark, part.last_stable_offset) == (6, 4)
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(7, 0)]
        assert max(r.offset for r in decode_records_all(part.records)) == 3
        # from past the aborted transaction: nothing aborted in range, an empty list
        resp = await fetch_decoded(node, version, committed_request(version, topic_id, 4))
        part = resp.responses[0].partitions[0]
        assert part.records == b"" and list(part.aborted_transactions) == []
        # read_uncommitted: everything up to the high watermark, a null list
        resp = await fetch_decoded(node, version, fetch_request(version, "t", 4,
                                                                topic_id=topic_id))
        part = resp.responses[0].partitions[0]
        assert part.aborted_transactions is None
        assert [r.value for r in decode_records_all(part.records)] == [b"open", b"q"]
    run(go())


def decode_records_all(data: bytes) -> list[Record]:
    out: list[Record] = []
    mv = memoryview(data)
    for pos, h in iter_batch_headers(mv[: whole_batches_length(mv)], validate_crc=True):
        out += decode_records(mv[pos : pos + h.size])
    return out
def follower_fetch(version: int, topic_id: uuid.UUID, offset: int, *, high_watermark: int,
                   max_wait_ms: int) -> Any:
    m = schema_module("fetch", version)
    return build(
        m.FetchRequest, replica_state=m.ReplicaState(replica_id=2, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
        rack_id="", topics=(build(m.FetchTopic, topic_id=topic_id, partitions=(
            build(m.FetchPartition, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                  current_leader_epoch=-1, log_start_offset=-1,
                  high_watermark=high_watermark),)),))


def test_v18_follower_behind_on_the_high_watermark_is_answered_at_once(
        node: TestNode) -> None:
    """KIP-1166: a follower that reports a high watermark below the leader's gets an answer
    without the long poll, so it learns the new one; one that is up to date waits."""
    from broker.controller.requests import CreatableTopic

    async def go() -> None:
        await node.register(2)
        [res] = await node.controller.create_topics(
            [CreatableTopic("t", assignments={0: (1, 2)})])
        assert res.error.name == "none"
        await asyncio.sleep(0.2)  # the replica sync applies the partition
        tid = node.topic("t").topic_id
        await node.replicas.append({("t", 0): records(b"a", b"b")}, required_acks=1,
                                   timeout_ms=1000)
        # The follower fetches at the log end: the high watermark moves to 2.
        first = await fetch_decoded(node, 18, follower_fetch(18, tid, 2, high_watermark=0,
                                                              max_wait_ms=0))
        assert first.responses[0].partitions[0].high_watermark == 2
        start = time.monotonic()
        behind = await fetch_decoded(node, 18, follower_fetch(18, tid, 2, high_watermark=0,
                                                               max_wait_ms=3000))
        assert time.monotonic() - start < 2.0
        assert behind.responses[0].partitions[0].high_watermark == 2
        start = time.monotonic()
        await fetch_decoded(node, 18, follower_fetch(18, tid, 2, high_watermark=2,
                                                     max_wait_ms=500))
        assert time.monotonic() - start >= 0.45  # up to date: the long poll runs its course
    run(go())


def test_idle_incremental_fetch_with_min_bytes_0_is_answered_at_once(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        full = await fetch_decoded(node, 12, fetch_request(12, "t", 0, session_epoch=0))
        start = time.monotonic()
        inc = await fetch_decoded(node, 12, fetch_request(
            12, "t", 0, partitions=(), session_id=full.session_id, session_epoch=1,
            max_wait_ms=3000, min_bytes=0))
        assert time.monotonic() - start < 2.0 and inc.responses == ()
    run(go())


def test_fetch_max_bytes_caps_what_a_fetch_asks_for(node_factory: Any) -> None:
    """fetch.max.bytes (Kafka's KafkaApis: min(request max_bytes, fetch.max.bytes), for a
    consumer's Fetch and a follower's alike): a Fetch asking 10 MB of a broker set to 1 MiB
    gets at most 1 MiB; at the 1024-byte floor it still gets its first batch whole."""
    import os

    async def go(node: TestNode) -> list[int]:
        await create(node, "t")
        for _ in range(4):
            await produce_ok(node, "t", build_batch([Record(
                timestamp=BASE_TS, key=b"k", value=os.urandom(400_000))]))
        m = schema_module("fetch", 12)
        request = build(
            m.FetchRequest, replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=0), min_bytes=10 << 20,
            max_bytes=10 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(build(m.FetchTopic, topic="t", partitions=(build(
                m.FetchPartition, partition=0, fetch_offset=0, partition_max_bytes=10 << 20,
                current_leader_epoch=-1, log_start_offset=-1),)),),
            forgotten_topics_data=(), rack_id="")
        t0 = time.monotonic()
        resp = await fetch_decoded(node, 12, request)
        assert time.monotonic() - t0 < 5  # min_bytes is held under the cap: no long wait
        part = resp.responses[0].partitions[0]
        assert part.error_code is ErrorCode.none
        # the whole batches, each as long as its header says (12 bytes of offset and
        # length), then perhaps the head of the next one, as Kafka's log reads cut it
        whole = bytes(part.records[:whole_batches_length(part.records)])
        sizes = [h.batch_length + 12 for _, h in iter_batch_headers(whole, validate_crc=True)]
        return [*sizes, len(part.records)]

    *batches, total = run(go(node_factory()))
    assert len(batches) == 4 and total == sum(batches)  # Kafka's default, 55 MiB: all
    *batches, total = run(go(node_factory({"fetch.max.bytes": str(1 << 20)})))
    assert len(batches) == 2 and total == 1 << 20  # two whole batches, the third cut
    *batches, total = run(go(node_factory({"fetch.max.bytes": "1024"})))
    assert len(batches) == 1 and total == batches[0] > 1024  # the first batch goes whole
