import gzip
import struct
import zlib

import lz4.frame
import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.compression import Compression
from broker.protocol.legacy import (
    _xxh32,
    build_message_set,
    convert_to_v2,
    parse_message_set,
)
from broker.protocol.records import decode_records, iter_batch_headers, parse_header

MSGS = [(b"k1", b"v1", 1000), (None, b"v2", 1001), (b"k3", None, 1003)]


def records_of(v2: bytes):
    out = []
    for pos, h in iter_batch_headers(v2, validate_crc=True):
        out.append((h, decode_records(v2[pos : pos + h.size])))
    return out


def test_xxh32_known_values():
    assert _xxh32(b"") == 0x02CC5D05
    assert _xxh32(b"abc") == 0x32D153FF
    assert _xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_to_one_v2_batch(magic):
    v2 = convert_to_v2(build_message_set(MSGS, magic=magic, base_offset=40), now_ms=0)
    ((h, recs),) = records_of(v2)
    assert h.base_offset == 0 and h.records_count == 3 and h.compression == Compression.NONE
    assert [(r.key, r.value) for r in recs] == [(k, v) for k, v, _ in MSGS]
    expected_ts = [-1, -1, -1] if magic == 0 else [1000, 1001, 1003]
    assert [r.timestamp for r in recs] == expected_ts


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_compressed_wrappers(magic, codec):
    ms = build_message_set(MSGS, magic=magic, codec=codec) + build_message_set(
        [(b"x", b"y", 2000)], magic=magic
    )
    batches = records_of(convert_to_v2(ms, now_ms=0))
    assert [h.compression for h, _ in batches] == [codec, Compression.NONE]
    assert [(r.key, r.value) for r in batches[0][1]] == [(k, v) for k, v, _ in MSGS]
    assert batches[1][1][0].value == b"y"


def test_kafka_0_8_lz4_header_checksum_is_repaired():
    inner = build_message_set(MSGS, magic=0)
    frame = bytearray(lz4.frame.compress(inner, content_checksum=False))
    # Kafka before 0.10 hashed the magic number too (KAFKA-3160).
    flg = frame[4]
    desc_len = 2 + (8 if flg & 0x08 else 0)
    frame[4 + desc_len] = (_xxh32(bytes(frame[: 4 + desc_len])) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(bytes(frame))
    body = (
        bytearray(struct.pack(">bb", 0, 3))
        + struct.pack(">i", -1)
        + struct.pack(">i", len(frame))
        + frame
    )
    msg = struct.pack(">I", zlib.crc32(body)) + body
    ms = struct.pack(">qi", 2, len(msg)) + msg
    ((h, recs),) = records_of(convert_to_v2(ms, now_ms=0))
    assert h.compression == Compression.LZ4 and [r.value for r in recs] == [v for _, v, _ in MSGS]


def test_log_append_time_wrapper_stamps_inner_messages():
    ms = bytearray(build_message_set(MSGS, magic=1, codec=Compression.GZIP, wrapper_timestamp=5555))
    # Set the LogAppendTime bit on the wrapper and fix its CRC.
    ms[12 + 5] |= 0x08
    struct.pack_into(">I", ms, 12, zlib.crc32(bytes(ms[16:])))
    ((_, recs),) = records_of(convert_to_v2(bytes(ms), now_ms=0))
    assert {r.timestamp for r in recs} == {5555}


def test_bad_legacy_input():
    good = build_message_set(MSGS, magic=1)
    flipped = bytearray(good)
    flipped[-1] ^= 1
    for bad in (flipped, good[:-1], good + b"\0" * 5):
        with pytest.raises(KafkaError) as e:
            convert_to_v2(bytes(bad), now_ms=0)
        assert e.value.error_code == ErrorCode.corrupt_message
    for size in (-1, 5, 1 << 30):
        lying = bytearray(good)
        struct.pack_into(">i", lying, 8, size)
        with pytest.raises(KafkaError):
            parse_message_set(lying)
    # A key length that runs past the message.
    body = (
        bytearray(struct.pack(">bb", 0, 0)) + struct.pack(">i", 99) + b"ab" + struct.pack(">i", -1)
    )
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaError):
        parse_message_set(struct.pack(">qi", 0, len(msg)) + msg)


def test_nested_compression_is_invalid():
    inner = build_message_set(MSGS, magic=1, codec=Compression.GZIP)
    body = bytearray(struct.pack(">bbq", 1, 1, 0)) + struct.pack(">i", -1)
    payload = gzip.compress(inner)
    body += struct.pack(">i", len(payload)) + payload
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaError) as e:
        convert_to_v2(struct.pack(">qi", 0, len(msg)) + msg, now_ms=0)
    assert e.value.error_code == ErrorCode.invalid_record


def test_unknown_legacy_codec():
    body = bytearray(struct.pack(">bb", 0, 4)) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"x"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaError) as e:
        convert_to_v2(struct.pack(">qi", 0, len(msg)) + msg, now_ms=0)
    assert e.value.error_code == ErrorCode.unsupported_compression_type


def test_partition_log_converts_legacy_on_append(tmp_path):
    from broker.log import LogConfig, PartitionLog, TopicPartition

    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), LogConfig(), clock=lambda: 0)
    r = plog.append_as_leader(build_message_set(MSGS, magic=1, codec=Compression.SNAPPY), 2, 0)
    assert (r.base_offset, r.last_offset, r.records_count) == (0, 2, 3)
    r = plog.append_as_leader(build_message_set(MSGS[:1], magic=0), 2, 0)
    assert r.base_offset == 3
    data = plog.read(0, 1 << 20, 10).read_bytes()
    assert parse_header(data).magic == 2
    assert [x.value for x in plog.read_records(0)] == [b"v1", b"v2", None, b"v1"]
    plog.close()


# ---- down-conversion for Fetch v0-v3 ------------------------------------------------------

def _v2(values, base_offset=0, **kw):
    from broker.protocol.records import Record, build_batch

    return build_batch([Record(timestamp=2000 + i, key=b"k", value=v, headers=(("h", b"x"),))
                        for i, v in enumerate(values)], base_offset=base_offset, **kw)


def _flatten(legacy_set):
    """(magic, offset, timestamp, key, value) of every message, wrappers opened."""
    from broker.protocol.legacy import _inner_messages

    out = []
    for m in parse_message_set(legacy_set):
        if m.codec == Compression.NONE:
            out.append((m.magic, m.offset, m.timestamp, m.key, m.value))
            continue
        inner = _inner_messages(m, 1 << 20)
        first = m.offset - (len(inner) - 1) if m.magic == 1 else 0
        for i in inner:
            off = first + i.offset if m.magic == 1 else i.offset
            out.append((i.magic, off, i.timestamp, i.key, i.value))
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4,
                                   Compression.SNAPPY])
def test_down_convert_offsets_timestamps_and_fetch_offset(magic, codec):
    from broker.protocol.legacy import down_convert

    data = _v2([b"a", b"b", b"c"], base_offset=10, compression=codec) + _v2([b"d"], base_offset=13)
    got = _flatten(down_convert(data, magic=magic, fetch_offset=11))
    ts = (lambda t: t) if magic == 1 else (lambda t: -1)
    assert got == [(magic, 11, ts(2001), b"k", b"b"), (magic, 12, ts(2002), b"k", b"c"),
                   (magic, 13, ts(2000), b"k", b"d")]
    # every message's CRC checks (parse_message_set verifies them) and the wrapper of a
    # compressed batch sits at its last inner offset
    wrappers = parse_message_set(down_convert(data, magic=magic, fetch_offset=0))
    assert wrappers[0].offset == (12 if codec else 10)
    assert wrappers[0].codec == codec


def test_down_convert_drops_control_batches_and_partial_tail():
    from broker.protocol.legacy import down_convert
    from broker.protocol.records import Record, build_batch

    marker = build_batch([Record(key=b"\x00\x00\x00\x00", value=b"\x00\x00")], base_offset=1,
                         is_control=True, is_transactional=True, producer_id=5,
                         producer_epoch=0)
    data = _v2([b"a"]) + marker + _v2([b"c"], base_offset=2)
    assert [g[1] for g in _flatten(down_convert(data, magic=1, fetch_offset=0))] == [0, 2]
    cut = data[:-5]  # a fetch may end inside a batch
    assert [g[1] for g in _flatten(down_convert(cut, magic=1, fetch_offset=0))] == [0]
    assert down_convert(b"", magic=0, fetch_offset=0) == b""


def test_down_convert_zstd_and_bad_magic():
    from broker.protocol.legacy import down_convert

    with pytest.raises(KafkaError) as e:
        down_convert(_v2([b"z"], compression=Compression.ZSTD), magic=1, fetch_offset=0)
    assert e.value.error_code is ErrorCode.unsupported_compression_type
    with pytest.raises(ValueError):
        down_convert(b"", magic=2, fetch_offset=0)


def test_down_convert_magic0_lz4_uses_kafka_0_8_header_checksum():
    from broker.protocol.legacy import down_convert

    (wrapper,) = parse_message_set(down_convert(_v2([b"a", b"b"], compression=Compression.LZ4),
                                                magic=0, fetch_offset=0))
    frame = wrapper.value
    flg = frame[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    # the checksum a 0.8/0.9 consumer verifies: over magic and descriptor (KAFKA-3160)
    assert frame[4 + desc_len] == (_xxh32(bytes(frame[: 4 + desc_len])) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(bytes(frame))  # not the standard checksum
