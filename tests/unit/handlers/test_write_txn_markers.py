"""WriteTxnMarkers v1-2: end-transaction markers written on the leader, per-partition
errors as Kafka answers them, the LSO and aborted index that follow, and the hook the
group coordinator is told through."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import write_txn_markers
from broker.log.control import read_marker
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import iter_batch_headers
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import (
    create,
    produce_ok,
    produce_txn,
    records,
    txn_markers_request,
    txn_records,
)


async def write(node: TestNode, version: int, *markers: Any) -> list[list[tuple[str, int, Any]]]:
    resp = await write_txn_markers.handle(node, make_ctx(27, version),
                                          txn_markers_request(version, *markers))
    roundtrip(resp)
    return [[(t.name, p.partition_index, p.error_code) for t in m.topics for p in t.partitions]
            for m in resp.markers]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_commit_and_abort_markers_end_transactions(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t", partitions=2)
        seen: list[tuple[str, int, int, bool]] = []
        node.replicas.txn_marker_listener = lambda *a: seen.append(a)
        assert (await produce_txn(node, "t", txn_records(7, 0, 0, b"a", b"b"))).error_code \
            is ErrorCode.none
        assert (await produce_txn(node, "t", txn_records(8, 0, 0, b"c"), partition=1)
                ).error_code is ErrorCode.none
        await produce_ok(node, "t", records(b"plain"))
        p0 = node.replicas.get("t", 0)
        assert p0 is not None and p0.last_stable_offset == 0 and p0.high_watermark == 3
        got = await write(node, version, (7, 0, False, 2, [("t", [0])]),
                          (8, 0, True, 2, [("t", [1])]))
        assert got == [[("t", 0, ErrorCode.none)], [("t", 1, ErrorCode.none)]]
        assert p0.last_stable_offset == 4 == p0.high_watermark
        assert list(p0.log.all_aborted_txns()) == [AbortedTxn(7, 0, 3, 4)]
        assert seen == [("t", 0, 7, False), ("t", 1, 8, True)]
        data = p0.log.read(3, 1 << 20, 4).read_bytes()
        [(pos, h)] = list(iter_batch_headers(data, validate_crc=True))
        assert h.is_control and h.producer_id == 7
        m = read_marker(data[pos : pos + h.size], h)
        assert m is not None and not m.committed and m.coordinator_epoch == 2
    run(go())


def test_per_partition_errors(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_txn(node, "t", txn_records(7, 3, 0, b"a"))
        got = await write(node, 2, (7, 2, True, 0, [("t", [0, 5]), ("nope", [0])]),
                          (7, 3, True, 5, [("t", [0])]),
                          (7, 3, False, 4, [("t", [0])]))
        assert got == [
            [("t", 0, ErrorCode.invalid_producer_epoch),
             ("t", 5, ErrorCode.unknown_topic_or_partition),
             ("nope", 0, ErrorCode.unknown_topic_or_partition)],
            [("t", 0, ErrorCode.none)],
            [("t", 0, ErrorCode.transaction_coordinator_fenced)],
        ]
        part = node.replicas.get("t", 0)
        assert part is not None and part.log.log_end_offset == 2
    run(go())


def test_not_leader(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        part = node.replicas.get("t", 0)
        assert part is not None
        part.become_follower(leader_id=2, leader_epoch=part.leader_epoch + 1,
                             partition_epoch=part.partition_epoch + 1, replicas=(1, 2),
                             isr=(1, 2))
        got = await write(node, 1, (7, 0, True, 0, [("t", [0])]))
        assert got == [[("t", 0, ErrorCode.not_leader_or_follower)]]
    run(go())
