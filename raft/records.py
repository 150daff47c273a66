"""Raft log entries as Kafka v2 record batches.

A Batch's records become the values of the batch's records (keys null); a
control batch (attributes bit 5) holds LeaderChange control records whose key
is (version 0, type 2).  partitionLeaderEpoch carries the Raft epoch.

This is the metadata log's hot path, so it has its own narrow codec for the
one shape Raft writes (no compression, no headers; the batch's append time as its
base and max timestamp, record timestamp deltas 0), tested
byte for byte against kio's record writers and readers
(tests/unit/raft/test_raft_records.py); decoding accepts any uncompressed v2
batch and checks every length against the bytes present.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from raft.control import CONTROL_KEY_LEADER_CHANGE
from raft.kafka_bytes import uvarint
from raft.messages import Batch

CONTROL_ATTRIBUTE = 0x20
COMPRESSION_MASK = 0x07
BATCH_HEADER_BYTES = 61
MAX_BATCH_BYTES = 8 * 1024 * 1024
_HEADER = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
_POST = struct.Struct(">hiqqqhii")  # attributes .. record count (40 bytes)
_PRE = struct.Struct(">qiibI")  # base offset .. crc (21 bytes)
_MIN_RECORD_BYTES = 7


class CorruptBatch(ValueError):
    pass


def _varint(n: int) -> bytes:
    """A zigzag varint (record fields): the unsigned varint of the zigzag of `n`."""
    return uvarint((n << 1) ^ (n >> 63))


def encode_batch(batch: Batch) -> bytes:
    if batch.raw is not None:
        return batch.raw
    if not batch.records:
        raise ValueError("empty batch")
    key = (_varint(len(CONTROL_KEY_LEADER_CHANGE)) + CONTROL_KEY_LEADER_CHANGE
           if batch.control else b"\x01")
    parts = []
    for i, value in enumerate(batch.records):
        body = b"\x00\x00" + _varint(i) + key + _varint(len(value)) + value + b"\x00"
        parts.append(_varint(len(body)))
        parts.append(body)
    attributes = CONTROL_ATTRIBUTE if batch.control else 0
    n = len(batch.records)
    ts = batch.timestamp
    post = _POST.pack(attributes, n - 1, ts, ts, -1, -1, -1, n) + b"".join(parts)
    return _PRE.pack(batch.base_offset, len(post) + 9, batch.epoch, 2, crc32c(post)) + post


def encode_batches(batches: tuple[Batch, ...] | list[Batch]) -> bytes:
    return b"".join(encode_batch(b) for b in batches)


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    shift = 0
    z = 0
    while True:
        if pos >= end or shift > 63:
            raise CorruptBatch("bad varint")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


def _decode_one(buf: bytes, pos: int, length: int) -> Batch:
    end = pos + 12 + length
    (base, _len, epoch, magic, crc, attributes, last_delta, bts, _mts, _pid, _pep, _seq,
     count) = _HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise CorruptBatch(f"magic {magic}")
    if crc32c(memoryview(buf)[pos + 21 : end]) != crc:
        raise CorruptBatch("CRC mismatch")
    if attributes & COMPRESSION_MASK:
        raise CorruptBatch("compressed batches are not used in the metadata log")
    if count < 0 or count * _MIN_RECORD_BYTES > length or count != last_delta + 1:
        raise CorruptBatch(f"record count {count}")
    p = pos + BATCH_HEADER_BYTES
    values = []
    for i in range(count):
        rlen, p = _read_varint(buf, p, end)
        rend = p + rlen
        if rlen < 0 or rend > end:
            raise CorruptBatch("record length past the batch")
        p += 1  # attributes
        _ts, p = _read_varint(buf, p, rend)
        delta, p = _read_varint(buf, p, rend)
        if delta != i:
            raise CorruptBatch("offset deltas out of order")
        klen, p = _read_varint(buf, p, rend)
        if klen > 0:
            p += klen
        vlen, p = _read_varint(buf, p, rend)
        if vlen < 0:
            value = b""
        else:
            if p + vlen > rend:
                raise CorruptBatch("value past the record")
            value = buf[p : p + vlen]
            p += vlen
        nh, p = _read_varint(buf, p, rend)
        for _ in range(nh):
            hk, p = _read_varint(buf, p, rend)
            p += max(hk, 0)
            hv, p = _read_varint(buf, p, rend)
            p += max(hv, 0)
        if p != rend:
            raise CorruptBatch("record length does not match its fields")
        values.append(value)
    if p != end:
        raise CorruptBatch("batch length does not match its records")
    return Batch(int(base), int(epoch), tuple(values), bool(attributes & CONTROL_ATTRIBUTE),
                 raw=buf[pos:end], timestamp=int(bts))


def decode_batches(data: bytes | memoryview, max_batch_bytes: int = MAX_BATCH_BYTES) -> list[Batch]:
    """Every whole batch in `data` (a trailing partial batch is ignored, as a
    Fetch answer may cut one); raises CorruptBatch on a bad length or CRC."""
    buf = bytes(data)
    out: list[Batch] = []
    pos = 0
    while len(buf) - pos >= 12:
        _base, length = struct.unpack_from(">qi", buf, pos)
        if length < BATCH_HEADER_BYTES - 12 or length > max_batch_bytes:
            raise CorruptBatch(f"batch at {pos}: bad length {length}")
        if pos + 12 + length > len(buf):
            break
        out.append(_decode_one(buf, pos, length))
        pos += 12 + length
    return out


def batch_length_at(data: bytes | memoryview, pos: int) -> int | None:
    """Total size of the batch starting at `pos`, or None if incomplete/invalid."""
    if len(data) - pos < 12:
        return None
    _base, length = struct.unpack_from(">qi", data, pos)
    if length < BATCH_HEADER_BYTES - 12 or length > MAX_BATCH_BYTES:
        return None
    if pos + 12 + length > len(data):
        return None
    return 12 + int(length)
