"""Legacy message sets (magic 0 and 1) converted to v2 record batches on append, and v2
batches down-converted to them for Fetch v0-v3 (`down_convert`).

A message set is a sequence of ``offset i64, message_size i32, message`` where a message is

    v0: crc u32, magic i8 (0), attributes i8, key bytes, value bytes
    v1: crc u32, magic i8 (1), attributes i8, timestamp i64, key bytes, value bytes

``bytes`` is an i32 length (-1 = null) and the data. The CRC is CRC-32 (zlib) of magic to
the end. attributes bits 0-2 are the codec (gzip, snappy, lz4); a compressed "wrapper"
message carries a whole inner message set as its value. v1 inner offsets are relative
(0..n-1). Inner messages may not themselves be compressed.

Magic 0 lz4 is Kafka's pre-0.10 framing, whose frame header checksum was computed over
the wrong bytes (KAFKA-3160); it is repaired before decoding.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.compression import DEFAULT_MAX_DECOMPRESSED, Compression, decompress
from broker.protocol.records import (
    NO_TIMESTAMP,
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batches,
    whole_batches_length,
)

_ENTRY = struct.Struct(">qi")
_V0 = struct.Struct(">Ibb")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MIN_MESSAGE_SIZE_V0 = 14
MIN_MESSAGE_SIZE_V1 = 22
MAX_MESSAGES = 1_000_000


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> Compression:
        code = self.attributes & 0x07
        if code > 3:
            raise KafkaError(ErrorCode.unsupported_compression_type, f"legacy codec {code}")
        return Compression(code)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return (
            TimestampType.LOG_APPEND_TIME if self.attributes & 0x08 else TimestampType.CREATE_TIME
        )


def _corrupt(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, msg)


def _read_bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise _corrupt("truncated length field")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise _corrupt(f"field length {n} exceeds the message")
    return bytes(buf[pos : pos + n]), pos + n


def parse_message_set(buf: bytes | bytearray | memoryview) -> list[LegacyMessage]:
    """Parse a legacy message set; CRCs are checked, every length bounded by the buffer."""
    mv = memoryview(buf)
    out: list[LegacyMessage] = []
    pos = 0
    end = len(mv)
    while pos < end:
        if end - pos < 12:
            raise _corrupt(f"{end - pos} trailing bytes in message set")
        offset, size = _ENTRY.unpack_from(mv, pos)
        pos += 12
        if size < MIN_MESSAGE_SIZE_V0 or pos + size > end:
            raise _corrupt(f"message size {size} with {end - pos} bytes left")
        msg_end = pos + size
        crc, magic, attributes = _V0.unpack_from(mv, pos)
        if magic not in (0, 1):
            raise _corrupt(f"magic {magic} in a legacy message set")
        if zlib.crc32(mv[pos + 4 : msg_end]) != crc:
            raise _corrupt(f"legacy message CRC mismatch at offset {offset}")
        p = pos + 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if size < MIN_MESSAGE_SIZE_V1:
                raise _corrupt(f"v1 message size {size}")
            (timestamp,) = _I64.unpack_from(mv, p)
            p += 8
        key, p = _read_bytes(mv, p, msg_end)
        value, p = _read_bytes(mv, p, msg_end)
        if p != msg_end:
            raise _corrupt("message fields do not fill message_size")
        out.append(LegacyMessage(offset, magic, attributes, timestamp, key, value))
        if len(out) > MAX_MESSAGES:
            raise _corrupt("too many messages")
        pos = msg_end
    return out


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 for the few bytes of an LZ4 frame descriptor (no library here has it)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while i + 16 <= n:
            for j in range(4):
                (lane,) = struct.unpack_from("<I", data, i + 4 * j)
                v[j] = (rotl((v[j] + lane * p2) & mask, 13) * p1) & mask
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = (rotl((h + lane * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def fix_kafka_v0_lz4_header(data: bytes) -> bytes:
    """Rewrite the frame header checksum the way the LZ4 spec defines it."""
    if len(data) < 7 or data[:4] != b"\x04\x22\x4d\x18":
        return data
    flg = data[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) < 4 + desc_len + 1:
        return data
    hc = (_xxh32(data[4 : 4 + desc_len]) >> 8) & 0xFF
    return data[: 4 + desc_len] + bytes([hc]) + data[4 + desc_len + 1 :]


def _inner_messages(wrapper: LegacyMessage, max_size: int) -> list[LegacyMessage]:
    data = wrapper.value or b""
    codec = wrapper.codec
    if codec == Compression.LZ4 and wrapper.magic == 0:
        data = fix_kafka_v0_lz4_header(data)
    inner = parse_message_set(decompress(codec, data, max_size))
    for m in inner:
        if m.attributes & 0x07:
            raise KafkaError(ErrorCode.invalid_record, "nested compressed legacy message")
        if m.magic != wrapper.magic:
            raise KafkaError(ErrorCode.invalid_record, "inner message magic differs from wrapper")
    return inner


def convert_to_v2(
    buf: bytes | bytearray | memoryview,
    *,
    now_ms: int,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Convert a legacy message set to v2 batches (offsets from 0, to be assigned later).

    Uncompressed messages become one uncompressed batch; each compressed wrapper becomes
    one batch with the same codec. v0 messages have no timestamp (-1); v1 LogAppendTime
    wrappers give their timestamp to the inner messages.
    """
    del now_ms
    messages = parse_message_set(buf)
    if not messages:
        raise _corrupt("empty legacy message set")
    out = bytearray()
    plain: list[Record] = []

    def flush_plain() -> None:
        if plain:
            out.extend(build_batch(plain))
            plain.clear()

    for m in messages:
        codec = m.codec
        if codec == Compression.NONE:
            plain.append(Record(timestamp=m.timestamp, key=m.key, value=m.value))
            continue
        flush_plain()
        inner = _inner_messages(m, max_decompressed)
        if not inner:
            continue
        log_append = m.timestamp_type == TimestampType.LOG_APPEND_TIME
        recs = [
            Record(timestamp=m.timestamp if log_append else i.timestamp, key=i.key, value=i.value)
            for i in inner
        ]
        out.extend(build_batch(recs, compression=codec))
    flush_plain()
    if not out:
        raise _corrupt("legacy message set holds no messages")
    return bytes(out)


def build_message_set(
    messages: list[tuple[bytes | None, bytes | None, int]],
    *,
    magic: int,
    codec: Compression = Compression.NONE,
    base_offset: int = 0,
    wrapper_timestamp: int | None = None,
) -> bytes:
    """Encode a legacy message set (tests, tools, down-conversion): (key, value, timestamp)."""

    def message(attributes: int, key: bytes | None, value: bytes | None, ts: int) -> bytes:
        body = bytearray(struct.pack(">bb", magic, attributes))
        if magic == 1:
            body += _I64.pack(ts)
        for field in (key, value):
            if field is None:
                body += _I32.pack(-1)
            else:
                body += _I32.pack(len(field)) + field
        return struct.pack(">I", zlib.crc32(body)) + bytes(body)

    def entry(offset: int, msg: bytes) -> bytes:
        return _ENTRY.pack(offset, len(msg)) + msg

    inner = b"".join(
        entry((i if magic == 1 and codec else base_offset + i), message(0, k, v, ts))
        for i, (k, v, ts) in enumerate(messages)
    )
    if codec == Compression.NONE:
        return inner
    from broker.protocol.compression import compress

    payload = compress(codec, inner)
    ts = wrapper_timestamp if wrapper_timestamp is not None else max(t for _, _, t in messages)
    return entry(base_offset + len(messages) - 1, message(int(codec), None, payload, ts))


def _break_lz4_header_for_v0(data: bytes) -> bytes:
    """Kafka's magic 0 lz4 framing: the frame header checksum over magic and descriptor
    (KAFKA-3160), the form pre-0.10 consumers check."""
    if len(data) < 7 or data[:4] != b"\x04\x22\x4d\x18":
        return data
    flg = data[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) < 4 + desc_len + 1:
        return data
    hc = (_xxh32(data[: 4 + desc_len]) >> 8) & 0xFF
    return data[: 4 + desc_len] + bytes([hc]) + data[4 + desc_len + 1 :]


def _legacy_message(magic: int, attributes: int, timestamp: int,
                    key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _I64.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(part)) + part
    return struct.pack(">I", zlib.crc32(body)) + bytes(body)


def down_convert(
    buf: bytes | bytearray | memoryview,
    *,
    magic: int,
    fetch_offset: int,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """v2 batches as a legacy message set of `magic` (0 for Fetch v0-v1, 1 for Fetch v2-v3),
    the way Kafka 3.9 down-converts for old consumers.

    Only whole batches are converted (a fetch may end mid-batch); control batches are
    dropped, and so are records before `fetch_offset`. An uncompressed batch becomes plain
    messages with their own offsets; a compressed one becomes one wrapper message of the
    same codec whose offset is the last inner offset (magic 1 inner offsets relative to the
    first, magic 0 absolute). Magic 1 keeps timestamps and the timestamp type (attribute bit
    3); magic 0 has none. Record headers cannot be expressed and are dropped. zstd has no
    legacy form: UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers.
    """
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not a legacy format")
    mv = memoryview(buf)
    mv = mv[: whole_batches_length(mv)]
    out = bytearray()
    for header, batch in iter_batches(mv):
        if header.is_control or header.last_offset < fetch_offset:
            continue
        codec = header.compression
        if codec == Compression.ZSTD:
            raise KafkaError(ErrorCode.unsupported_compression_type,
                             "zstd batches cannot be down-converted for Fetch v0-v3")
        records = [r for r in decode_records(batch, max_decompressed=max_decompressed)
                   if r.offset >= fetch_offset]
        if not records:
            continue
        ts_bit = 0
        if magic == 1 and header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            ts_bit = 0x08

        def ts(r: Record) -> int:
            return r.timestamp if magic == 1 else NO_TIMESTAMP

        if codec == Compression.NONE:
            for r in records:
                msg = _legacy_message(magic, ts_bit, ts(r), r.key, r.value)
                out += _ENTRY.pack(r.offset, len(msg)) + msg
            continue
        first = records[0].offset
        inner = bytearray()
        for r in records:
            msg = _legacy_message(magic, 0, ts(r), r.key, r.value)
            inner += _ENTRY.pack(r.offset - first if magic == 1 else r.offset, len(msg)) + msg
        from broker.protocol.compression import compress

        payload = compress(codec, bytes(inner))
        if codec == Compression.LZ4 and magic == 0:
            payload = _break_lz4_header_for_v0(payload)
        wrapper_ts = max(r.timestamp for r in records)
        wrapper = _legacy_message(magic, int(codec) | ts_bit, wrapper_ts, None, payload)
        out += _ENTRY.pack(records[-1].offset, len(wrapper)) + wrapper
    return bytes(out)
