import datetime
import io
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from broker.errors import KafkaError
from broker.protocol.compression import Compression
from broker.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batch_headers,
    iter_raw_batch_headers,
    parse_header,
    patch_log_append_time,
    patch_offset_and_epoch,
    valid_prefix,
    validate_batches,
    whole_batches_length,
)

RECS = [
    Record(
        timestamp=1_700_000_000_000 + i,
        key=b"k%d" % i if i % 3 else None,
        value=None if i == 4 else b"v" * i,
        headers=(("h", b"x"), ("n", None)) if i % 2 else (),
    )
    for i in range(10)
]


def code(exc: pytest.ExceptionInfo[KafkaError]) -> ErrorCode:
    return exc.value.error_code


@pytest.mark.parametrize("codec", list(Compression))
def test_build_decode_round_trip(codec):
    b = build_batch(
        RECS,
        base_offset=100,
        compression=codec,
        producer_id=7,
        producer_epoch=2,
        base_sequence=5,
        partition_leader_epoch=3,
        is_transactional=True,
    )
    h = parse_header(b)
    assert (h.base_offset, h.last_offset, h.records_count, h.magic) == (100, 109, 10, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (
        7,
        2,
        5,
        3,
    )
    assert h.compression == codec and h.is_transactional and not h.is_control
    assert h.max_timestamp == RECS[-1].timestamp and h.size == len(b)
    out = decode_records(b)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (100 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(RECS)
    ]


def test_kio_reads_our_batches_and_we_read_kios():
    b = build_batch([Record(timestamp=1_700_000_000_000, key=b"a", value=b"b")], base_offset=5)
    batch, size = read_batch(b, 0)
    assert size == len(b) and batch.base_offset == 5 and batch.records[0].value == b"b"
    ts = TZAwareMicros.parse(datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))
    buf = io.BytesIO()
    write_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            attributes=i16(0),
            records=(
                KioRecord(
                    attributes=i8(0), timestamp=ts, offset=i64(0), key=b"k", value=b"v", headers=()
                ),
            ),
        ),
    )
    (r,) = decode_records(buf.getvalue())
    assert (r.key, r.value, r.timestamp) == (b"k", b"v", int(ts.timestamp() * 1000))


def test_sparse_offsets_and_overrides_for_the_cleaner():
    recs = [Record(offset=10, timestamp=5, key=b"a"), Record(offset=14, timestamp=3, key=b"b")]
    b = build_batch(recs, base_offset=10, last_offset_delta=9, max_timestamp=99)
    h = parse_header(b)
    assert (h.last_offset, h.max_timestamp, h.records_count) == (19, 99, 2)
    assert [r.offset for r in decode_records(b)] == [10, 14]
    with pytest.raises(ValueError):
        build_batch([Record(offset=3), Record(offset=2)], base_offset=0)


def test_log_append_time_batches_report_max_timestamp_for_every_record():
    b = bytearray(build_batch(RECS[:3]))
    patch_log_append_time(b, 0, len(b), 123456)
    validate_batches(b, 1 << 20)  # CRC still right
    h = parse_header(b)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == 123456
    assert {r.timestamp for r in decode_records(b)} == {123456}


def test_patching_offset_and_epoch_keeps_the_crc():
    b = bytearray(build_batch(RECS))
    patch_offset_and_epoch(b, 0, 1 << 40, 9)
    (h,) = validate_batches(b, 1 << 20)
    assert h.base_offset == 1 << 40 and h.partition_leader_epoch == 9


def _two_batches() -> bytearray:
    return bytearray(build_batch(RECS[:2]) + build_batch(RECS[2:5], compression=Compression.LZ4))


@pytest.mark.parametrize("length", [-1, 0, 48, 1 << 31 - 1, 2**31 - 1, 10_000])
def test_lying_batch_length_is_corrupt(length):
    b = _two_batches()
    struct.pack_into(">i", b, 8, length)
    with pytest.raises(KafkaError) as e:
        validate_batches(b, 1 << 30)
    assert code(e) == ErrorCode.corrupt_message


def test_truncated_and_trailing_bytes_are_corrupt():
    b = _two_batches()
    for cut in (1, 11, 30, HEADER_SIZE, len(b) - 1):
        with pytest.raises(KafkaError) as e:
            validate_batches(b[:cut], 1 << 30)
        assert code(e) == ErrorCode.corrupt_message
    with pytest.raises(KafkaError):
        validate_batches(b + b"\0" * 20, 1 << 30)
    with pytest.raises(KafkaError):
        validate_batches(b"", 1 << 30)


def test_every_single_bit_flip_in_the_crc_region_is_caught():
    b = bytearray(build_batch(RECS[:2]))
    for i in range(21 * 8, len(b) * 8, 7):
        c = bytearray(b)
        c[i // 8] ^= 1 << (i % 8)
        with pytest.raises(KafkaError):
            validate_batches(c, 1 << 30)


def test_bad_magic_codec_count_and_size():
    b = bytearray(build_batch(RECS[:3]))
    c = bytearray(b)
    c[16] = 3
    with pytest.raises(KafkaError) as e:
        validate_batches(c, 1 << 30)
    assert code(e) == ErrorCode.corrupt_message

    def recrc(x: bytearray) -> bytearray:
        struct.pack_into(">I", x, 17, crc32c(bytes(x[21:])))
        return x

    c = bytearray(b)
    struct.pack_into(">h", c, 21, 5)  # codec 5 does not exist
    with pytest.raises(KafkaError) as e:
        validate_batches(recrc(c), 1 << 30)
    assert code(e) == ErrorCode.unsupported_compression_type

    c = bytearray(b)
    struct.pack_into(">i", c, 23, 7)  # lastOffsetDelta 7 with 3 records
    with pytest.raises(KafkaError) as e:
        validate_batches(recrc(c), 1 << 30)
    assert code(e) == ErrorCode.invalid_record

    with pytest.raises(KafkaError) as e:
        validate_batches(b, len(b) - 1)
    assert code(e) == ErrorCode.message_too_large

    c = bytearray(b)
    struct.pack_into(">i", c, 57, 1_000_000)  # a million records claimed in ~40 bytes
    struct.pack_into(">i", c, 23, 999_999)
    with pytest.raises(KafkaError) as e:
        validate_batches(recrc(c), 1 << 30)
    assert code(e) == ErrorCode.corrupt_message


def test_decode_rejects_lying_record_fields():
    b = bytearray(build_batch([Record(timestamp=1, key=b"abc", value=b"defg")]))
    # The key length varint sits at a fixed place in this one-record batch.
    c = bytearray(b)
    c[HEADER_SIZE + 4] = 0x7E  # zigzag 63: key longer than the record
    struct.pack_into(">I", c, 17, crc32c(bytes(c[21:])))
    with pytest.raises(KafkaError):
        decode_records(c)
    c = bytearray(b)
    struct.pack_into(">i", c, 57, 1 << 30)  # record count far beyond the data
    with pytest.raises(KafkaError):
        decode_records(c)


def test_valid_prefix_and_whole_batches():
    b = _two_batches()
    first = parse_header(b).size
    assert valid_prefix(b)[0] == len(b)
    assert valid_prefix(b[:-1])[0] == first
    c = bytearray(b)
    c[first + 40] ^= 0xFF
    n, batches = valid_prefix(c)
    assert n == first and len(batches) == 1
    assert whole_batches_length(b[:-3]) == first
    assert [p for p, _ in iter_batch_headers(b, validate_crc=True)] == [0, first]


def test_raw_headers_are_the_headers_fields_with_the_same_checks():
    b = _two_batches()
    raw = list(iter_raw_batch_headers(b, validate_crc=True))
    assert [(p, BatchHeader(*t)) for p, t in raw] == list(
        iter_batch_headers(b, validate_crc=True))
    first = parse_header(b).size
    c = bytearray(b)
    c[first + 40] ^= 0xFF  # the second batch's CRC no longer matches
    with pytest.raises(KafkaError) as e:
        list(iter_raw_batch_headers(c, validate_crc=True))
    assert code(e) == ErrorCode.corrupt_message
    assert [p for p, _ in iter_raw_batch_headers(c, validate_crc=False)] == [0, first]
    c = bytearray(b)
    c[16] = 1  # magic
    with pytest.raises(KafkaError, match="magic 1"):
        list(iter_raw_batch_headers(c, validate_crc=False))
    with pytest.raises(KafkaError, match="trailing bytes"):
        list(iter_raw_batch_headers(b + b"\0" * 20, validate_crc=False))


record_st = st.builds(
    Record,
    timestamp=st.integers(0, 2**41),
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3
    ).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(record_st, min_size=1, max_size=20),
    st.sampled_from(list(Compression)),
    st.integers(0, 2**40),
)
def test_property_round_trip(recs, codec, base):
    b = build_batch(recs, base_offset=base, compression=codec)
    (h,) = validate_batches(b, 1 << 30)
    out = decode_records(b)
    assert [(r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (r.timestamp, r.key, r.value, r.headers) for r in recs
    ]
    assert [r.offset for r in out] == list(range(base, base + len(recs)))
    assert h.max_timestamp == max(r.timestamp for r in recs)
