"""DescribeProducers v0: a leader's active producers with their transaction state."""

from __future__ import annotations

from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.handlers import describe_producers, write_txn_markers
from broker.protocol.records import Record, build_batch
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import (
    BASE_TS,
    create,
    produce_ok,
    produce_txn,
    txn_markers_request,
    txn_records,
)


def test_active_producers_with_open_transactions(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", build_batch(
            [Record(timestamp=BASE_TS, key=b"k", value=b"i")], producer_id=3,
            producer_epoch=1, base_sequence=0))
        await produce_txn(node, "t", txn_records(9, 2, 0, b"a", b"b"))       # offsets 1-2
        await produce_txn(node, "t", txn_records(10, 0, 0, b"c"))            # offset 3
        await write_txn_markers.handle(node, make_ctx(27, 1), txn_markers_request(
            1, (10, 0, True, 6, [("t", [0])])))
        req = DescribeProducersRequest(topics=(
            TopicRequest(name="t", partition_indexes=(i32(0), i32(1))),
            TopicRequest(name="gone", partition_indexes=(i32(0),)),
        ))
        resp = await describe_producers.handle(node, make_ctx(61, 0), req)
        roundtrip(resp)
        p0, p1 = resp.topics[0].partitions
        assert p0.error_code is ErrorCode.none
        got = [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch,
                p.current_txn_start_offset, p.last_timestamp) for p in p0.active_producers]
        assert got == [(3, 1, 0, -1, -1, BASE_TS), (9, 2, 1, -1, 1, BASE_TS + 1),
                       (10, 0, 0, 6, -1, got[2][5])]
        assert p1.error_code is ErrorCode.unknown_topic_or_partition
        assert resp.topics[1].partitions[0].error_code is ErrorCode.unknown_topic_or_partition
    run(go())
