"""DeleteRecords v0-2: advances the log start offset up to the high watermark."""

from __future__ import annotations

import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import delete_records
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import create, produce_ok, records


def request(version: int, topic: str, offset: int) -> Any:
    m = importlib.import_module(f"kio.schema.delete_records.v{version}.request")
    return build(m.DeleteRecordsRequest, timeout=datetime.timedelta(seconds=5), topics=(
        build(m.DeleteRecordsTopic, name=topic, partitions=(
            build(m.DeleteRecordsPartition, partition_index=0, offset=offset),)),))


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_before_offset(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", b"b", b"c", b"d"))
        resp = await delete_records.handle(node, make_ctx(21, version), request(version, "t", 2))
        roundtrip(resp)
        part = resp.topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (ErrorCode.none, 2)
        assert node.replicas.get("t", 0).log.log_start_offset == 2
        # -1 means "up to the high watermark"
        resp = await delete_records.handle(node, make_ctx(21, version), request(version, "t", -1))
        assert resp.topics[0].partitions[0].low_watermark == 4
    run(go())


def test_beyond_high_watermark_and_unknown(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a"))
        resp = await delete_records.handle(node, make_ctx(21, 2), request(2, "t", 5))
        assert resp.topics[0].partitions[0].error_code is ErrorCode.offset_out_of_range
        resp = await delete_records.handle(node, make_ctx(21, 2), request(2, "nope", 0))
        assert resp.topics[0].partitions[0].error_code is ErrorCode.unknown_topic_or_partition
    run(go())
