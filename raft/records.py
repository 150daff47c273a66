"""Raft log entries as Kafka v2 record batches (kio's record writers/readers).

A Batch's records become the values of the batch's records (keys empty); a
control batch (attributes bit 5) holds one LeaderChange control record whose
key is (version 0, type 2).  partitionLeaderEpoch carries the Raft epoch.
"""

from __future__ import annotations

import datetime
import io
import struct

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.serial.errors import BufferUnderflow
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from raft.control import CONTROL_KEY_LEADER_CHANGE
from raft.messages import Batch

CONTROL_ATTRIBUTE = 0x20
BATCH_HEADER_BYTES = 61
MAX_BATCH_BYTES = 8 * 1024 * 1024
_EPOCH = TZAwareMicros.parse(datetime.datetime.fromtimestamp(0, datetime.UTC))


class CorruptBatch(ValueError):
    pass


def encode_batch(batch: Batch) -> bytes:
    key = CONTROL_KEY_LEADER_CHANGE if batch.control else None
    records = tuple(
        Record(attributes=i8(0), timestamp=_EPOCH, offset=i64(batch.base_offset + i), key=key,
               value=value, headers=())
        for i, value in enumerate(batch.records)
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        partition_leader_epoch=i32(batch.epoch),
        base_sequence=i32(-1),
        records=records,
        attributes=i16(CONTROL_ATTRIBUTE if batch.control else 0),
    ))
    return buf.getvalue()


def encode_batches(batches: tuple[Batch, ...] | list[Batch]) -> bytes:
    return b"".join(encode_batch(b) for b in batches)


def decode_batches(data: bytes | memoryview, max_batch_bytes: int = MAX_BATCH_BYTES) -> list[Batch]:
    """Every whole batch in `data` (a trailing partial batch is ignored, as a
    Fetch answer may cut one); raises CorruptBatch on a bad length or CRC."""
    out: list[Batch] = []
    pos = 0
    view = memoryview(data)
    while len(view) - pos >= 12:
        _base, length = struct.unpack_from(">qi", view, pos)
        if length < BATCH_HEADER_BYTES - 12 or length > max_batch_bytes:
            raise CorruptBatch(f"batch at {pos}: bad length {length}")
        if pos + 12 + length > len(view):
            break
        try:
            rb, size = read_batch(view[pos : pos + 12 + length], 0)
        except (ValueError, BufferUnderflow, struct.error) as e:
            raise CorruptBatch(f"batch at {pos}: {e}") from e
        if size != 12 + length or len(rb.records) != rb.last_offset_delta + 1:
            raise CorruptBatch(f"batch at {pos}: inconsistent sizes")
        control = bool(rb.attributes & CONTROL_ATTRIBUTE)
        values = tuple(r.value or b"" for r in rb.records)
        out.append(Batch(int(rb.base_offset), int(rb.partition_leader_epoch), values, control))
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
