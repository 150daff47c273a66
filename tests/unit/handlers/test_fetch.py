"""Fetch v4-16: records spliced as file slices, decoded here by kio at every version; v13+
names topics by id."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.handlers import fetch
from broker.handlers._build import build
from broker.protocol.records import decode_records
from tests.unit.handlers.conftest import TestNode, make_ctx, run
from tests.unit.handlers.datapath import create, produce_ok, records

VERSIONS = range(4, 17)


def fetch_request(version: int, topic: str, offset: int, *, max_wait_ms: int = 0,
                  min_bytes: int = 1, partition: int = 0, session_id: int = 0,
                  leader_epoch: int = -1, topic_id: uuid.UUID | None = None) -> Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    return build(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
        session_epoch=-1,
        topics=(build(m.FetchTopic, topic=topic, topic_id=topic_id, partitions=(
            build(m.FetchPartition, partition=partition, fetch_offset=offset,
                  partition_max_bytes=1 << 20, current_leader_epoch=leader_epoch,
                  log_start_offset=-1),)),),
        forgotten_topics_data=(), rack_id="",
    )


async def fetch_decoded(node: TestNode, version: int, request: Any) -> Any:
    chunks = await fetch.handle(node, make_ctx(1, version), request)
    body = chunks.to_bytes()
    m = importlib.import_module(f"kio.schema.fetch.v{version}.response")
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


def test_incremental_fetch_sessions_are_declined(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        resp = await fetch_decoded(node, 12, fetch_request(12, "t", 0, session_id=42))
        assert resp.error_code is ErrorCode.fetch_session_id_not_found
        full = await fetch_decoded(node, 12, fetch_request(12, "t", 0))
        assert full.session_id == 0
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
