"""Transaction control batches (Kafka's EndTransactionMarker): encode and read them.

A marker is a v2 batch with the control and transactional attributes set, the
producer's id and epoch, base sequence -1 and one record whose key is the control record
type (version i16 0, type i16: 0 ABORT, 1 COMMIT; kio's ControlRecordTypeSchema) and
whose value is the marker (version i16 0, coordinator epoch i32; kio's EndTxnMarker).
The bodies after the version prefix are written and read by kio.
"""

from __future__ import annotations

import enum
import io
import struct
from dataclasses import dataclass

from kio.schema.control_record_type_schema.v0.data import ControlRecordTypeSchema
from kio.schema.end_txn_marker.v0.data import EndTxnMarker
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from broker.errors import KafkaError
from broker.protocol.records import (
    BatchHeader,
    Record,
    TimestampType,
    build_batch,
    decode_records,
)

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_VERSION = struct.Struct(">h")
_write_type = entity_writer(ControlRecordTypeSchema)
_read_type = entity_reader(ControlRecordTypeSchema)
_write_marker = entity_writer(EndTxnMarker)
_read_marker = entity_reader(EndTxnMarker)


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    # 2 is KRaft's LeaderChange, 3/4 snapshot header/footer, 5+ KRaft voters: not markers.


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """What an end-transaction marker says: commit or abort, and the coordinator epoch."""

    committed: bool
    coordinator_epoch: int


def _prefixed(version: int, write: object, entity: object) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    write(buf, entity)  # type: ignore[operator]
    return buf.getvalue()


def marker_key(committed: bool) -> bytes:
    t = ControlType.COMMIT if committed else ControlType.ABORT
    return _prefixed(CONTROL_RECORD_KEY_VERSION, _write_type,
                     ControlRecordTypeSchema(type_=i16(int(t))))


def marker_value(coordinator_epoch: int) -> bytes:
    return _prefixed(END_TXN_MARKER_VERSION, _write_marker,
                     EndTxnMarker(coordinator_epoch=i32(coordinator_epoch)))


def encode_marker_batch(
    *, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
    timestamp_ms: int, base_offset: int = 0, partition_leader_epoch: int = -1,
) -> bytes:
    """One end-transaction control batch as Kafka's leader writes it."""
    record = Record(offset=base_offset, timestamp=timestamp_ms, key=marker_key(committed),
                    value=marker_value(coordinator_epoch))
    return build_batch(
        [record], base_offset=base_offset, timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch, is_transactional=True,
        is_control=True,
    )


def control_type(key: bytes | None) -> int | None:
    """The control record type of a control record key; None when unreadable."""
    if key is None or len(key) < 4:
        return None
    (version,) = _VERSION.unpack_from(key, 0)
    if version < 0:
        return None
    # Kafka reads the type of any key version (fields are only ever added).
    try:
        return int(_read_type(key, 2)[0].type_)
    except Exception:  # any malformed body: not a marker
        return None


def read_marker(batch: bytes | memoryview, header: BatchHeader) -> ControlMarker | None:
    """The marker a control batch holds; None for other control records (KRaft's) or a
    batch that is not a transactional control batch."""
    if not (header.is_control and header.is_transactional):
        return None
    try:
        records = decode_records(batch)
    except KafkaError:
        return None
    if not records:
        return None
    r = records[0]
    t = control_type(r.key)
    if t not in (ControlType.ABORT, ControlType.COMMIT) or r.value is None or len(r.value) < 6:
        return None
    try:
        marker, _ = _read_marker(r.value, 2)
    except Exception:  # any malformed body: not a marker
        return None
    return ControlMarker(t == ControlType.COMMIT, int(marker.coordinator_epoch))
