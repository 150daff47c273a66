"""The aborted-transaction index (`.txnindex`): Kafka's 34-byte entries, the search a
read_committed fetch makes, and the file's life with its segment (roll, truncation,
deletion, cleaner swap names, a corrupt file)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.log.control import ControlMarker, encode_marker_batch, read_marker
from broker.log.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    decode_entries,
)
from broker.protocol.records import Record, build_batch, decode_records, parse_header

TS = 1_700_000_000_000


def test_entry_is_kafkas_34_byte_layout(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert not idx.path.exists()  # created by the first entry, as Kafka does
    idx.append(AbortedTxn(producer_id=7, first_offset=3, last_offset=9, last_stable_offset=10))
    raw = idx.path.read_bytes()
    assert ENTRY_SIZE == 34 and len(raw) == 34
    assert raw == struct.pack(">hqqqq", 0, 7, 3, 9, 10)
    idx.append(AbortedTxn(8, 4, 12, 4))
    again = TransactionIndex(idx.path, 0)
    assert again.entries == [AbortedTxn(7, 3, 9, 10), AbortedTxn(8, 4, 12, 4)]


def test_torn_tail_is_dropped_and_unknown_version_resets(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(AbortedTxn(1, 0, 2, 3).encode() + b"\x00" * 10)
    idx = TransactionIndex(path, 0)
    assert idx.entries == [AbortedTxn(1, 0, 2, 3)] and path.stat().st_size == 34
    path.write_bytes(struct.pack(">hqqqq", 5, 1, 0, 2, 3))
    bad = TransactionIndex(path, 0)
    assert bad.was_reset and bad.entries == [] and not path.exists()


def test_collect_stops_at_an_entry_whose_lso_passes_the_upper_bound(tmp_path: Path) -> None:
    a = TransactionIndex(tmp_path / "a.txnindex", 0)
    b = TransactionIndex(tmp_path / "b.txnindex", 100)
    a.append(AbortedTxn(1, 0, 10, 5))      # LSO 5: another txn was open from 5
    a.append(AbortedTxn(2, 5, 20, 21))
    b.append(AbortedTxn(3, 90, 110, 111))
    assert collect_aborted([a, b], 11, 50) == [AbortedTxn(2, 5, 20, 21)]
    assert collect_aborted([a, b], 0, 15) == [AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21)]
    # the search goes on into later segments only while no entry proves it complete
    assert collect_aborted([a, b], 0, 100) == [
        AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 90, 110, 111)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 20)), max_size=12),
       st.integers(0, 300))
def test_truncate_keeps_exactly_the_markers_below(
    tmp_path_factory: pytest.TempPathFactory, txns: list[tuple[int, int]], cut: int,
) -> None:
    path = tmp_path_factory.mktemp("ti") / "x.txnindex"
    idx = TransactionIndex(path, 0)
    offset, entries = 0, []
    for pid, length in txns:
        e = AbortedTxn(pid, offset, offset + length, offset + length + 1)
        idx.append(e)
        entries.append(e)
        offset += length + 1
    idx.truncate_to(cut)
    expected = [e for e in entries if e.last_offset < cut]
    assert idx.entries == expected
    assert decode_entries(path.read_bytes() if path.exists() else b"") == expected


def test_marker_batch_is_kafkas_end_transaction_marker() -> None:
    batch = encode_marker_batch(producer_id=42, producer_epoch=3, committed=False,
                                coordinator_epoch=9, timestamp_ms=TS)
    h = parse_header(batch)
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert (h.producer_id, h.producer_epoch, h.records_count) == (42, 3, 1)
    assert read_marker(batch, h) == ControlMarker(committed=False, coordinator_epoch=9)
    # key: version 0, type 0 (ABORT); value: version 0, coordinator epoch
    (r,) = decode_records(batch)
    assert r.key == b"\x00\x00\x00\x00" and r.value == b"\x00\x00\x00\x00\x00\x09"
    commit = encode_marker_batch(producer_id=42, producer_epoch=3, committed=True,
                                 coordinator_epoch=9, timestamp_ms=TS)
    assert decode_records(commit)[0].key == b"\x00\x00\x00\x01"


def _open(path: Path, **cfg: int) -> PartitionLog:
    return PartitionLog(path, TopicPartition("t", 0), LogConfig(**cfg),  # type: ignore[arg-type]
                        clock=lambda: TS)


def _data(tag: bytes) -> bytes:
    return build_batch([Record(timestamp=TS, key=b"k", value=tag * 40)])


def test_index_files_follow_their_segments(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0", segment_bytes=400, file_delete_delay_ms=0)
    plog.append_as_leader(_data(b"a"), 0, TS)
    first = plog.segments[0]
    first.txn_index.append(AbortedTxn(1, 0, 0, 1))
    while len(plog.segments) < 3:
        plog.append_as_leader(_data(b"b"), 0, TS)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".txnindex")
    assert names == ["00000000000000000000.txnindex"]  # one per segment, only when needed
    plog.segments[-1].txn_index.append(
        AbortedTxn(2, plog.log_end_offset - 1, plog.log_end_offset - 1, plog.log_end_offset))
    assert len(plog.collect_aborted_txns(0, plog.log_end_offset)) == 2
    # truncation drops the entries at and past the cut
    plog.truncate_to(plog.segments[-1].base_offset)
    assert [e.producer_id for e in plog.all_aborted_txns()] == [1]
    # deletion with its segment (DeleteRecords past it, then the delayed unlink)
    plog.update_high_watermark(plog.log_end_offset)
    plog.delete_records_before(plog.segments[1].base_offset)
    plog.delete_expired_files(TS + 1, force=True)
    assert not list((tmp_path / "t-0").glob("*.txnindex*"))
    plog.close()


def test_orphan_txn_index_is_removed_at_load(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0")
    plog.append_as_leader(_data(b"a"), 0, TS)
    plog.close()
    orphan = tmp_path / "t-0" / "00000000000000000099.txnindex"
    orphan.write_bytes(AbortedTxn(1, 99, 100, 101).encode())
    plog = _open(tmp_path / "t-0")
    assert not orphan.exists()
    plog.close()


def test_clients_may_not_write_control_batches(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0")
    marker = encode_marker_batch(producer_id=1, producer_epoch=0, committed=True,
                                 coordinator_epoch=0, timestamp_ms=TS)
    with pytest.raises(KafkaError) as info:
        plog.append_as_leader(marker, 0, TS)
    assert info.value.error_code is ErrorCode.invalid_record
    assert plog.append_as_leader(marker, 0, TS, allow_control=True).base_offset == 0
    plog.close()
