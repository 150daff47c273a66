"""A partition another worker owns, as a share-partition reads it (broker/node/shard_routing.py
PartitionView): reads from inside the records it carries, and the aborted transactions in
a range."""

from __future__ import annotations

from broker.log.txn_index import AbortedTxn
from broker.node.shard_routing import _ViewLog
from broker.protocol.records import Record, build_batch, iter_batch_headers


def batches(base: int, sizes: list[int]) -> bytes:
    out = b""
    for n in sizes:
        out += build_batch([Record(value=b"v%d" % (base + i)) for i in range(n)],
                           base_offset=base)
        base += n
    return out


def offsets(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset)
            for _, h in iter_batch_headers(memoryview(data), validate_crc=True)]


def test_a_read_starts_at_the_batch_holding_the_offset() -> None:
    data = batches(10, [3, 2, 4])  # 10-12, 13-14, 15-18
    view = _ViewLog(5, 10, data, [])
    assert view.log_start_offset == 5
    assert offsets(view.read(10, 1 << 20, 19).read_bytes()) == [(10, 12), (13, 14), (15, 18)]
    assert offsets(view.read(14, 1 << 20, 19).read_bytes()) == [(13, 14), (15, 18)]
    assert offsets(view.read(15, 1 << 20, 19).read_bytes()) == [(15, 18)]
    assert view.read(19, 1 << 20, 19).read_bytes() == b""  # past what was read
    assert view.read(9, 1 << 20, 19).read_bytes() == b""  # before it
    first = len(batches(10, [3]))
    assert view.read(10, first, 19).read_bytes() == data[:first]  # max_bytes holds


def test_aborted_transactions_in_a_range() -> None:
    a, b = AbortedTxn(7, 10, 12, 13), AbortedTxn(8, 15, 16, 17)
    view = _ViewLog(0, 10, batches(10, [3, 2, 4]), [a, b])
    assert view.collect_aborted_txns(10, 19) == [a, b]
    assert view.collect_aborted_txns(13, 15) == []
    assert view.collect_aborted_txns(16, 19) == [b]
