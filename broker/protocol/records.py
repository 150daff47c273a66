"""Kafka v2 record batches (magic 2) without copying.

Layout of a batch header (61 bytes, big-endian)::

    0  baseOffset i64        8  batchLength i32       12 partitionLeaderEpoch i32
    16 magic i8              17 crc u32 (CRC32C of attributes..end)
    21 attributes i16        23 lastOffsetDelta i32   27 baseTimestamp i64
    35 maxTimestamp i64      43 producerId i64        51 producerEpoch i16
    53 baseSequence i32      57 recordsCount i32      61 records...

The append path only reads headers, checks the CRC and patches baseOffset and
partitionLeaderEpoch (both outside the CRC). Records are decoded only by callers that
must look inside (compaction, timestamp lookups, legacy conversion, tools).

kio.records is not used for the record codec: its reader rounds record timestamps
down to whole seconds and it has no compression support, and Kafka needs both exact.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, TypeVar

from crc32c import crc32c as _crc32c_function
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    Compression,
    compress,
    decompress,
)
from broker.protocol.wire import uvarint

# Module-level names the compiled hot paths use are Final: mypyc then keeps them in C
# statics (and inlines the numbers) where it would look each up in the module's dict per
# use (docs/benchmarks.md, "Server machinery per request").
crc32c: Final = _crc32c_function
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength, the part not counted in batchLength
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START: Final = 21
MAGIC_OFFSET: Final = 16
# length varint, attributes, timestamp delta, offset delta, key and value lengths,
# header count: one byte each at least.
MIN_RECORD_SIZE: Final = 7
# Hard cap on any single batch read from wire or disk, whatever the config says.
MAX_BATCH_SIZE: Final = 1 << 30

_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_I16: Final = struct.Struct(">h")
_LEN_AND_MAGIC: Final = struct.Struct(">qiib")

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_TIMESTAMP: Final = -1
LONG_MAX: Final = (1 << 63) - 1  # Java's Long.MAX_VALUE: Kafka's "no limit" for int64 settings


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record; `offset` -1 means "next in sequence" to build_batch."""

    offset: int = -1
    timestamp: int = NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())
    attributes: int = 0


# A batch header's fields in HEADER's order, unnamed: what the leader's append path reads by
# unpacking, where copying them into a RawHeader would cost more than its checks.
HeaderFields = tuple[int, ...]


class RawHeader(NamedTuple):
    """A batch header's fields in HEADER's order, for the append paths: a tuple (built by
    `_make` straight from struct's unpack) costs less than a BatchHeader, and the fields
    still have their names."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, base_offset: int, batch_length: int, partition_leader_epoch: int, magic: int,
        crc: int, attributes: int, last_offset_delta: int, base_timestamp: int, max_timestamp: int,
        producer_id: int, producer_epoch: int, base_sequence: int, records_count: int,
    ) -> None:
        object.__setattr__(self, "base_offset", base_offset)
        object.__setattr__(self, "batch_length", batch_length)
        object.__setattr__(self, "partition_leader_epoch", partition_leader_epoch)
        object.__setattr__(self, "magic", magic)
        object.__setattr__(self, "crc", crc)
        object.__setattr__(self, "attributes", attributes)
        object.__setattr__(self, "last_offset_delta", last_offset_delta)
        object.__setattr__(self, "base_timestamp", base_timestamp)
        object.__setattr__(self, "max_timestamp", max_timestamp)
        object.__setattr__(self, "producer_id", producer_id)
        object.__setattr__(self, "producer_epoch", producer_epoch)
        object.__setattr__(self, "base_sequence", base_sequence)
        object.__setattr__(self, "records_count", records_count)

    @property
    def compression(self) -> Compression:
        code = self.attributes & COMPRESSION_MASK
        try:
            return Compression(code)
        except ValueError:
            raise KafkaError(
                ErrorCode.unsupported_compression_type, f"compression codec {code}"
            ) from None

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at `pos`; the caller has checked the bytes are present."""
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def _corrupt(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, msg)


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, validate_crc: bool
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each v2 batch in `buf`.

    Raises KafkaError(CORRUPT_MESSAGE) at the first batch whose length fields do not fit
    the bytes present, whose magic is not 2, or (with validate_crc) whose CRC is wrong.
    """
    for pos, t in iter_raw_batch_headers(buf, validate_crc=validate_crc):
        yield pos, BatchHeader(*t)


def iter_raw_batch_headers(
    buf: bytes | bytearray | memoryview, *, validate_crc: bool
) -> Iterator[tuple[int, RawHeader]]:
    """iter_batch_headers with each header as its raw tuple (HEADER's fields in order), for
    the append paths: a BatchHeader costs more to build than the rest of a batch's checks."""
    mv = memoryview(buf)
    end = len(mv)
    pos = 0
    while pos < end:
        fields, size = framed_header(mv, pos, end)
        if validate_crc and crc32c(mv[pos + CRC_START : pos + size]) != fields[4]:
            raise _corrupt(f"CRC mismatch in batch at {pos} (base offset {fields[0]})")
        yield pos, _new_tuple(RawHeader, fields)
        pos += size


_unpack_header: Final = HEADER.unpack_from
_new_tuple = tuple.__new__  # RawHeader._make without its length check: unpack gives 13


def framed_header(mv: memoryview, pos: int, end: int) -> tuple[tuple[int, ...], int]:
    """The header fields (HEADER's, in order, as a plain tuple) of the batch at `pos` and
    the batch's size, after the framing checks (a whole header, a batch length within
    bounds and within `end`, magic 2); raises CORRUPT_MESSAGE. A plain function rather
    than the iterator, for the append path's loop: resuming a generator per batch cost
    more than the checks themselves. The caller makes the RawHeader: reading fields from
    a plain tuple is faster (CPython specialises unpacking and indexing for exact tuples
    only)."""
    if end - pos < HEADER_SIZE:
        raise _corrupt(f"{end - pos} trailing bytes at {pos}, less than a batch header")
    t = _unpack_header(mv, pos)
    length = t[1]
    if length < MIN_BATCH_LENGTH or length > MAX_BATCH_SIZE:
        raise _corrupt(f"batch length {length} at {pos}")
    size = length + LOG_OVERHEAD
    if pos + size > end:
        raise _corrupt(f"batch length {length} at {pos} exceeds the {end - pos} bytes left")
    if t[3] != 2:
        raise _corrupt(f"magic {t[3]} at {pos}")
    return t, size


def valid_prefix(buf: bytes | bytearray | memoryview) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Longest prefix of `buf` made of whole v2 batches with good lengths and CRCs.

    Returns (length of that prefix, its batches). Never raises: recovery truncates there.
    """
    mv = memoryview(buf)
    end = len(mv)
    pos = 0
    out: list[tuple[int, BatchHeader]] = []
    while end - pos >= HEADER_SIZE:
        _, length, _, magic = _LEN_AND_MAGIC.unpack_from(mv, pos)
        if length < MIN_BATCH_LENGTH or length > MAX_BATCH_SIZE or magic != 2:
            break
        size = length + LOG_OVERHEAD
        if pos + size > end:
            break
        header = BatchHeader(*HEADER.unpack_from(mv, pos))
        if crc32c(mv[pos + CRC_START : pos + size]) != header.crc:
            break
        if header.last_offset_delta < 0:
            break
        out.append((pos, header))
        pos += size
    return pos, out


def validate_raw(buf: memoryview, max_message_bytes: int) -> list[tuple[int, HeaderFields]]:
    """validate_batches for the append path: (position, raw header tuple) per batch, no
    objects built. Same checks and error codes."""
    return scan_batches(buf, max_message_bytes, LONG_MAX, None)[0]


def scan_batches(buf: memoryview, max_message_bytes: int, timestamp_limit: int,
                 codec: int | None
                 ) -> tuple[list[tuple[int, HeaderFields]], bool, int | None, bool]:
    """Every batch's header checks (framing, magic, max.message.bytes, CRC, codec, record
    count), in one pass: (position, raw header) per batch, whether any is a control batch,
    the max timestamp of the first data batch above `timestamp_limit` (None if none) and
    whether any batch's codec is not `codec` (when given). Raises KafkaError for the first
    batch that fails a check. The headers stay plain tuples: copying each into a RawHeader
    costs more on this path than the checks do."""
    end = len(buf)
    if end == 0:
        raise _corrupt("no record batches")
    out: list[tuple[int, HeaderFields]] = []
    late_timestamp = None
    has_control = other_codec = False
    pos = 0
    while pos < end:
        fields, size = framed_header(buf, pos, end)
        (_, _, _, _, crc, attributes, last_offset_delta, _, max_timestamp, _, _, _,
         count) = fields
        if size > max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}",
            )
        if crc32c(buf[pos + CRC_START : pos + size]) != crc:
            raise _corrupt(f"CRC mismatch in batch at {pos}")
        batch_codec = attributes & COMPRESSION_MASK
        if batch_codec > 4:
            raise KafkaError(ErrorCode.unsupported_compression_type,
                             f"compression codec {batch_codec}")
        if count <= 0:
            raise KafkaError(ErrorCode.invalid_record, f"batch with {count} records")
        if not batch_codec and count > (size - HEADER_SIZE) // MIN_RECORD_SIZE:
            # Uncompressed records take at least 7 bytes each: a larger count would claim
            # offsets the batch cannot hold.
            raise _corrupt(f"{count} records cannot fit in {size - HEADER_SIZE} bytes")
        if last_offset_delta != count - 1:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"lastOffsetDelta {last_offset_delta} with {count} records",
            )
        if attributes & CONTROL_MASK:
            has_control = True
        elif max_timestamp > timestamp_limit and late_timestamp is None:
            late_timestamp = max_timestamp
        if codec is not None and batch_codec != codec:
            other_codec = True
        out.append((pos, fields))
        pos += size
    return out, has_control, late_timestamp, other_codec


def validate_batches(
    buf: bytes | bytearray | memoryview, max_message_bytes: int
) -> list[BatchHeader]:
    """Validate a producer's records the way Kafka's LogValidator does, without decoding.

    Raises KafkaError with CORRUPT_MESSAGE (lengths, magic, CRC), MESSAGE_TOO_LARGE,
    INVALID_RECORD (record count vs lastOffsetDelta, empty batch),
    UNSUPPORTED_COMPRESSION_TYPE.
    """
    return [BatchHeader(*t) for _, t in validate_raw(memoryview(buf), max_message_bytes)]


def patch_offset_and_epoch(
    buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Assign offsets in place. Both fields precede the CRC'd region: no CRC update."""
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + 12, partition_leader_epoch)


def patch_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = now and recompute its CRC."""
    (attrs,) = _I16.unpack_from(buf, pos + 21)
    _I16.pack_into(buf, pos + 21, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + 35, now_ms)
    _U32.pack_into(buf, pos + 17, crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def patch_log_append_time_split(
    head: bytearray, body: bytes | bytearray | memoryview, now_ms: int
) -> None:
    """patch_log_append_time for a batch held as a private copy of its 61-byte header plus
    the caller's (read-only) record bytes; the CRC is continued across both parts."""
    (attrs,) = _I16.unpack_from(head, 21)
    _I16.pack_into(head, 21, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(head, 35, now_ms)
    _U32.pack_into(head, 17, crc32c(body, crc32c(memoryview(head)[CRC_START:HEADER_SIZE])))


# ---------------------------------------------------------------- varints (zigzag)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    out += uvarint(_zigzag(n) & 0xFFFFFFFFFFFFFFFF)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Return (value, next position); raises CORRUPT_MESSAGE on a truncated/overlong varint."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end or shift > 63:
            raise _corrupt("malformed varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def _write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(b))
        out += b


def _read_bytes(buf: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > limit:
        raise _corrupt(f"field length {n} exceeds record")
    return buf[pos : pos + n], pos + n


def encode_record(out: bytearray, r: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray()
    body.append(r.attributes & 0xFF)
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, r.key)
    _write_bytes(body, r.value)
    write_varint(body, len(r.headers))
    for hk, hv in r.headers:
        _write_bytes(body, hk.encode())
        _write_bytes(body, hv)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a v2 batch. Records with offset -1 get consecutive offsets from base_offset.

    `last_offset_delta`, `base_timestamp`, `max_timestamp` override the derived values
    (the cleaner keeps them when it drops records). `delete_horizon_ms` sets the
    delete-horizon flag and stores the horizon as baseTimestamp (KIP-534).
    """
    deltas: list[int] = []
    for i, r in enumerate(records):
        d = i if r.offset < 0 else r.offset - base_offset
        if d < 0 or (deltas and d <= deltas[-1]):
            raise ValueError(f"record offsets must increase from base_offset: delta {d}")
        deltas.append(d)
    stamps = [r.timestamp for r in records]
    if base_timestamp is None:
        base_timestamp = stamps[0] if stamps else NO_TIMESTAMP
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    if max_timestamp is None:
        max_timestamp = max(stamps) if stamps else NO_TIMESTAMP
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if deltas else 0
    # With a delete horizon baseTimestamp holds the horizon and record deltas are taken
    # against it, so record timestamps still decode to their original values (KIP-534).
    body = bytearray()
    for r, d in zip(records, deltas, strict=True):
        encode_record(body, r, d, r.timestamp - base_timestamp)
    payload: bytes | bytearray = body
    if compression != Compression.NONE:
        payload = compress(compression, bytes(body))
    attributes = int(compression) & COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(HEADER_SIZE)
    out += payload
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def decode_records(
    batch: bytes | bytearray | memoryview,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Decode (and decompress) the records of one v2 batch.

    Raises CORRUPT_MESSAGE when the batch or any record is malformed. Record timestamps
    of a LogAppendTime batch are the batch's maxTimestamp, as Kafka consumers see them.
    """
    mv = memoryview(batch)
    if len(mv) < HEADER_SIZE:
        raise _corrupt("batch shorter than its header")
    h = parse_header(mv)
    if h.magic != 2:
        raise _corrupt(f"magic {h.magic}")
    if h.size > len(mv) or h.batch_length < MIN_BATCH_LENGTH:
        raise _corrupt(f"batch length {h.batch_length} with {len(mv)} bytes present")
    if h.records_count < 0:
        raise _corrupt(f"records count {h.records_count}")
    payload = mv[HEADER_SIZE : h.size]
    codec = h.compression
    data: bytes = decompress(codec, payload, max_decompressed) if codec else bytes(payload)
    # Each record takes at least 7 bytes: refuse counts the data cannot hold.
    if h.records_count > len(data):
        raise _corrupt(f"records count {h.records_count} larger than data")
    log_append = h.timestamp_type == TimestampType.LOG_APPEND_TIME
    out: list[Record] = []
    pos = 0
    end = len(data)
    for _ in range(h.records_count):
        length, pos = read_varint(data, pos)
        if length <= 0 or pos + length > end:
            raise _corrupt(f"record length {length}")
        limit = pos + length
        attrs = data[pos]
        pos += 1
        ts_delta, pos = read_varint(data, pos)
        off_delta, pos = read_varint(data, pos)
        key, pos = _read_bytes(data, pos, limit)
        value, pos = _read_bytes(data, pos, limit)
        n_headers, pos = read_varint(data, pos)
        if n_headers < 0 or n_headers > length:
            raise _corrupt(f"header count {n_headers}")
        hdrs: list[tuple[str, bytes | None]] = []
        for _ in range(n_headers):
            hk, pos = _read_bytes(data, pos, limit)
            hv, pos = _read_bytes(data, pos, limit)
            if hk is None:
                raise _corrupt("null header key")
            try:
                hdrs.append((hk.decode(), hv))
            except UnicodeDecodeError:
                raise _corrupt("header key is not UTF-8") from None
        if pos != limit:
            raise _corrupt("record length does not match its fields")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, tuple(hdrs), attrs))
    if pos != end:
        raise _corrupt(f"{end - pos} bytes after the last record")
    return out


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, batch bytes) for each batch, CRC checked."""
    mv = memoryview(buf)
    for pos, h in iter_batch_headers(mv, validate_crc=True):
        yield h, mv[pos : pos + h.size]


def whole_batches_length(buf: bytes | bytearray | memoryview) -> int:
    """Length of the prefix of `buf` made of complete batches (a fetch may end mid-batch)."""
    mv = memoryview(buf)
    pos = 0
    end = len(mv)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(mv, pos + 8)
        if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
            break
        pos += LOG_OVERHEAD + length
    return pos


# ------------------------------------------- the narrow path: uncompressed batches of values
#
# The metadata log's hot path writes one shape only (no compression, no headers, the batch's
# append time as its base and max timestamp with record timestamp deltas 0, every record's
# key the same: null, or a control record's key), and reads back any
# uncompressed v2 batch, checking every length against the bytes present. raft's batches
# travel through these (raft/kafka_messages.py adapts raft's Batch); tests/unit/raft/
# test_raft_records.py checks them byte for byte against kio's record writers and readers.

_T = TypeVar("_T")
_PRE: Final = struct.Struct(">qiibI")  # base offset .. crc (21 bytes)
_POST: Final = struct.Struct(">hiqqqhii")  # attributes .. record count (40 bytes)
_BASE_AND_LENGTH: Final = struct.Struct(">qi")


class CorruptBatch(ValueError):
    """A batch the narrow decoder refuses: bad length, magic, CRC or record layout."""


def _zz(n: int) -> bytes:
    """A zigzag varint (record fields): the unsigned varint of the zigzag of `n`."""
    return uvarint(_zigzag(n))


def encode_value_batch(base_offset: int, leader_epoch: int, values: Sequence[bytes], *,
                       key: bytes | None = None, control: bool = False,
                       timestamp: int = 0) -> bytes:
    """One uncompressed v2 batch whose records carry `values` (each with `key`, no headers,
    no producer), stamped `timestamp` (the append time, ms); `control` sets the control
    attribute."""
    if not values:
        raise ValueError("empty batch")
    key_bytes = b"\x01" if key is None else _zz(len(key)) + key
    parts = []
    for i, value in enumerate(values):
        body = b"\x00\x00" + _zz(i) + key_bytes + _zz(len(value)) + value + b"\x00"
        parts.append(_zz(len(body)))
        parts.append(body)
    attributes = CONTROL_MASK if control else 0
    n = len(values)
    post = _POST.pack(attributes, n - 1, timestamp, timestamp, -1, -1, -1, n) + b"".join(parts)
    return _PRE.pack(base_offset, len(post) + 9, leader_epoch, 2, crc32c(post)) + post


def _read_zz(buf: bytes, pos: int, end: int) -> tuple[int, int]:
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


def _decode_value_batch(buf: bytes, pos: int, length: int,
                        make: Callable[[int, int, tuple[bytes, ...], bool, bytes, int], _T]
                        ) -> _T:
    end = pos + 12 + length
    (base, _len, epoch, magic, crc, attributes, last_delta, bts, _mts, _pid, _pep, _seq,
     count) = HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise CorruptBatch(f"magic {magic}")
    if crc32c(memoryview(buf)[pos + CRC_START : end]) != crc:
        raise CorruptBatch("CRC mismatch")
    if attributes & COMPRESSION_MASK:
        raise CorruptBatch("compressed batches are not used in the metadata log")
    if count < 0 or count * MIN_RECORD_SIZE > length or count != last_delta + 1:
        raise CorruptBatch(f"record count {count}")
    p = pos + HEADER_SIZE
    values = []
    for i in range(count):
        rlen, p = _read_zz(buf, p, end)
        rend = p + rlen
        if rlen < 0 or rend > end:
            raise CorruptBatch("record length past the batch")
        p += 1  # attributes
        _ts, p = _read_zz(buf, p, rend)
        delta, p = _read_zz(buf, p, rend)
        if delta != i:
            raise CorruptBatch("offset deltas out of order")
        klen, p = _read_zz(buf, p, rend)
        if klen > 0:
            p += klen
        vlen, p = _read_zz(buf, p, rend)
        if vlen < 0:
            value = b""
        else:
            if p + vlen > rend:
                raise CorruptBatch("value past the record")
            value = buf[p : p + vlen]
            p += vlen
        nh, p = _read_zz(buf, p, rend)
        for _ in range(nh):
            hk, p = _read_zz(buf, p, rend)
            p += max(hk, 0)
            hv, p = _read_zz(buf, p, rend)
            p += max(hv, 0)
        if p != rend:
            raise CorruptBatch("record length does not match its fields")
        values.append(value)
    if p != end:
        raise CorruptBatch("batch length does not match its records")
    return make(int(base), int(epoch), tuple(values), bool(attributes & CONTROL_MASK),
                buf[pos:end], int(bts))


def decode_value_batches(data: bytes | memoryview,
                         make: Callable[[int, int, tuple[bytes, ...], bool, bytes, int], _T],
                         max_batch_bytes: int) -> list[_T]:
    """`make(base offset, leader epoch, values, control, raw bytes, base timestamp)` of every
    whole batch in
    `data` (a trailing partial batch is ignored, as a Fetch answer may cut one); raises
    CorruptBatch on a bad length, CRC or record layout."""
    buf = bytes(data)
    out: list[_T] = []
    pos = 0
    while len(buf) - pos >= LOG_OVERHEAD:
        _base, length = _BASE_AND_LENGTH.unpack_from(buf, pos)
        if length < MIN_BATCH_LENGTH or length > max_batch_bytes:
            raise CorruptBatch(f"batch at {pos}: bad length {length}")
        if pos + LOG_OVERHEAD + length > len(buf):
            break
        out.append(_decode_value_batch(buf, pos, length, make))
        pos += LOG_OVERHEAD + length
    return out


def batch_length_at(data: bytes | memoryview, pos: int, max_batch_bytes: int) -> int | None:
    """Total size of the batch starting at `pos`, or None if incomplete/invalid."""
    if len(data) - pos < LOG_OVERHEAD:
        return None
    _base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
    if length < MIN_BATCH_LENGTH or length > max_batch_bytes:
        return None
    if pos + LOG_OVERHEAD + length > len(data):
        return None
    return LOG_OVERHEAD + int(length)
