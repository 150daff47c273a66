"""Kafka's record formats in __share_group_state (the share coordinator's topic, KIP-932),
encoded by hand: kio has no schemas for coordinator records. Kafka 4.4's
share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json.

Keys (not flexible) start with an int16 record type, 0 ShareSnapshotKey and 1 ShareUpdateKey,
then GroupId (string), TopicId (uuid), Partition (int32), as Kafka's CoordinatorRecordSerde
writes them. Values start with an int16 version (0) and are flexible:

    ShareSnapshotValue v0: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
        StartOffset int64, CreateTimestamp int64, WriteTimestamp int64,
        StateBatches [FirstOffset int64, LastOffset int64, DeliveryState int8,
        DeliveryCount int16]; tagged DeliveryCompleteCount (tag 0, default -1, KIP-1226)
    ShareUpdateValue v0: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1: not
        changed), StateBatches (the same); tagged DeliveryCompleteCount (tag 0, default -1)

A null value under a ShareSnapshotKey is a tombstone: the share-partition's state was
deleted. Every length read is checked against the bytes present before anything is sliced.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.records import _Reader, _Writer
from broker.protocol.kafka_uuid import uuid_to_kafka

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT_KEY_TYPE = 0
SHARE_UPDATE_KEY_TYPE = 1
VALUE_VERSION = 0
_TAG_DELIVERY_COMPLETE_COUNT = 0

# Kafka's delivery states as persisted (RecordState: AVAILABLE 0, ACKNOWLEDGED 2, ARCHIVED 4)
PERSISTED_STATES = frozenset({0, 2, 4})


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """The key of one share-partition's state: Kafka's SharePartitionKey."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """What FindCoordinator key type 2 names and the share coordinator hashes to a
        partition: "groupId:topicId:partition" (Kafka's asCoordinatorKey)."""
        return f"{self.group_id}:{uuid_to_kafka(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


ShareValue = ShareSnapshotValue | ShareUpdateValue


def _corrupt(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"{SHARE_GROUP_STATE_TOPIC} record: {msg}")


# ---- keys ---------------------------------------------------------------------------------


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    w = _Writer()
    w.int16(record_type)
    w.string(key.group_id)
    w.out += key.topic_id.bytes
    w.int32(key.partition)
    return bytes(w.out)


def decode_key(buf: bytes) -> tuple[int, SharePartitionKey]:
    """(record type, key); CORRUPT_MESSAGE for another record type or a malformed key."""
    r = _Reader(bytes(buf))
    record_type = r.int16()
    if record_type not in (SHARE_SNAPSHOT_KEY_TYPE, SHARE_UPDATE_KEY_TYPE):
        raise _corrupt(f"unknown record type {record_type}")
    key = SharePartitionKey(r.str_(), uuid.UUID(bytes=r._take(16)), r.int32())
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return record_type, key


# ---- values -------------------------------------------------------------------------------


def _write_batches(w: _Writer, batches: tuple[StateBatch, ...]) -> None:
    w.array_len(len(batches))
    for b in batches:
        w.int64(b.first_offset)
        w.int64(b.last_offset)
        w.out += struct.pack(">b", b.delivery_state)
        w.int16(b.delivery_count)
        w.tags()


def _write_tags(w: _Writer, delivery_complete_count: int) -> None:
    if delivery_complete_count == -1:
        w.uvarint(0)
        return
    w.uvarint(1)
    w.uvarint(_TAG_DELIVERY_COMPLETE_COUNT)
    w.uvarint(4)
    w.int32(delivery_complete_count)


def encode_value(value: ShareValue) -> bytes:
    w = _Writer(flexible=True)
    w.int16(VALUE_VERSION)
    w.int32(value.snapshot_epoch)
    if isinstance(value, ShareSnapshotValue):
        w.int32(value.state_epoch)
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
        w.int64(value.create_timestamp)
        w.int64(value.write_timestamp)
    else:
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
    _write_batches(w, value.state_batches)
    _write_tags(w, value.delivery_complete_count)
    return bytes(w.out)


def _read_batches(r: _Reader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.array_len()):
        first, last = r.int64(), r.int64()
        state = struct.unpack(">b", r._take(1))[0]
        count = r.int16()
        r.skip_tags()
        out.append(StateBatch(first, last, int(state), count))
    return tuple(out)


def _read_tags(r: _Reader) -> int:
    """The tagged fields: DeliveryCompleteCount (-1 when absent); others are skipped."""
    count = -1
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r._take(size)
        if tag == _TAG_DELIVERY_COMPLETE_COUNT:
            if size != 4:
                raise _corrupt(f"DeliveryCompleteCount of {size} bytes")
            count = int(struct.unpack(">i", data)[0])
    return count


def decode_value(record_type: int, buf: bytes) -> ShareValue:
    r = _Reader(bytes(buf), flexible=True)
    version = r.int16()
    if version != VALUE_VERSION:
        raise _corrupt(f"unknown value version {version}")
    snapshot_epoch = r.int32()
    value: ShareValue
    if record_type == SHARE_SNAPSHOT_KEY_TYPE:
        state_epoch, leader_epoch, start = r.int32(), r.int32(), r.int64()
        created, written = r.int64(), r.int64()
        batches = _read_batches(r)
        value = ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start, created,
                                   written, batches, _read_tags(r))
    else:
        leader_epoch, start = r.int32(), r.int64()
        batches = _read_batches(r)
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, _read_tags(r))
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after value")
    return value
