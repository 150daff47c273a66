"""Kafka's record formats in __consumer_offsets, encoded by hand (kio has no schemas for them).

Keys start with an int16 record type: 0 and 1 are OffsetCommitKey (Kafka wrote both key
versions with the same body), 2 is GroupMetadataKey; 3 and up are KIP-848 consumer-group
(3-8), KIP-932 share-group (10-15), KIP-1071 streams-group (17-23) and other records, which
`decode_key` leaves to the caller (`UnknownKey`). Values start with an int16 version.
OffsetCommitValue v0-4 and GroupMetadataValue v0-4 are read; v4 is flexible (compact
strings, tagged fields). Skiff writes OffsetCommitValue v3 (v1 when an expire timestamp is
set, as Kafka does) and GroupMetadataValue v3, the versions Kafka 3.x brokers write.

Every length read is checked against the bytes present before anything is sliced.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol import wire

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_MAX_ARRAY = 1 << 20


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    record_type: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


def _corrupt(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"__consumer_offsets record: {msg}")


# ---- writer ---------------------------------------------------------------------------


class _Writer:
    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self.out += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.out += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.out += struct.pack(">q", v)

    def uvarint(self, v: int) -> None:
        self.out += wire.uvarint(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        b = s.encode()
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            if len(b) > 0x7FFF:
                raise ValueError("string longer than 32767 bytes")
            self.int16(len(b))
        self.out += b

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


# ---- reader ---------------------------------------------------------------------------


class _Reader:
    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise _corrupt(f"needs {n} bytes at {self.pos}, has {len(self.buf) - self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise _corrupt("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if not nullable:
                raise _corrupt("null in a non-nullable string")
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise _corrupt("string is not UTF-8") from exc

    def str_(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise _corrupt("null bytes")
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0 or n > _MAX_ARRAY or n > len(self.buf) - self.pos:
            raise _corrupt(f"bad array length {n}")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


# ---- keys -------------------------------------------------------------------------------


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer()
    w.int16(OFFSET_COMMIT_KEY_TYPE)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.out)


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_KEY_TYPE)
    w.string(group)
    return bytes(w.out)


def decode_key(buf: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = _Reader(bytes(buf))
    record_type = r.int16()
    if record_type in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.str_(), r.str_(), r.int32())
    elif record_type == 2:
        key = GroupMetadataKey(r.str_())
    else:
        return UnknownKey(record_type)
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return key


# ---- values -------------------------------------------------------------------------------


def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    version = (OFFSET_COMMIT_VALUE_VERSION if v.expire_timestamp < 0
               else OFFSET_COMMIT_VALUE_VERSION_EXPIRE)
    w = _Writer()
    w.int16(version)
    w.int64(v.offset)
    if version >= 3:
        w.int32(v.leader_epoch)
    w.string(v.metadata)
    w.int64(v.commit_timestamp)
    if version == 1:
        w.int64(v.expire_timestamp)
    return bytes(w.out)


def decode_offset_commit_value(buf: bytes) -> OffsetCommitValue:
    r = _Reader(bytes(buf))
    version = r.int16()
    if not 0 <= version <= 4:
        raise _corrupt(f"OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.str_()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def encode_group_metadata_value(
    v: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION,
) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue version {version}")
    w = _Writer()
    w.int16(version)
    w.flexible = version >= 4
    w.string(v.protocol_type)
    w.int32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.int64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    r = _Reader(bytes(buf))
    version = r.int16()
    if not 0 <= version <= 4:
        raise _corrupt(f"GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.str_()
    generation = r.int32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.str_()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.str_()
        client_host = r.str_()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host,
                                      rebalance_timeout, session_timeout, subscription,
                                      assignment))
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts,
                              tuple(members))


# ---- KIP-848 consumer-group records -------------------------------------------------------
#
# Key record types (the key's int16 prefix; key bodies are not flexible) and their values
# (value version 0, flexible: compact strings and arrays, tagged fields):
#   3 ConsumerGroupMetadata                  GroupId -> Epoch
#   4 ConsumerGroupPartitionMetadata         GroupId -> Topics[TopicId, TopicName,
#                                            NumPartitions, PartitionMetadata[Partition, Racks]]
#   5 ConsumerGroupMemberMetadata            GroupId, MemberId -> InstanceId, RackId, ClientId,
#                                            ClientHost, SubscribedTopicNames,
#                                            SubscribedTopicRegex, RebalanceTimeoutMs,
#                                            ServerAssignor
#   6 ConsumerGroupTargetAssignmentMetadata  GroupId -> AssignmentEpoch
#   7 ConsumerGroupTargetAssignmentMember    GroupId, MemberId -> TopicPartitions[TopicId,
#                                            Partitions]
#   8 ConsumerGroupCurrentMemberAssignment   GroupId, MemberId -> MemberEpoch,
#                                            PreviousMemberEpoch, State (int8),
#                                            AssignedPartitions, PartitionsPendingRevocation
# Tagged fields Skiff does not use (MetadataHash, ClassicMemberMetadata, AssignmentEpochs) are
# skipped when read and never written.

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
_GROUP_ONLY_KEYS = frozenset({CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA,
                              CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA})
_MEMBER_KEYS = frozenset({CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                          CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT})

TopicAssignment = tuple[tuple["uuid.UUID", tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int
    group: str
    member_id: str | None = None  # for the member record types


@dataclass(frozen=True, slots=True)
class ConsumerGroupTopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 Stable, 1 UnrevokedPartitions, 2 UnreleasedPartitions
    assigned: TopicAssignment
    pending_revocation: TopicAssignment


def encode_consumer_group_key(record_type: int, group: str, member_id: str | None = None,
                              ) -> bytes:
    if record_type not in _GROUP_ONLY_KEYS | _MEMBER_KEYS:
        raise ValueError(f"not a consumer-group record type: {record_type}")
    if (record_type in _MEMBER_KEYS) != (member_id is not None):
        raise ValueError(f"record type {record_type}: member id {member_id!r}")
    w = _Writer()
    w.int16(record_type)
    w.string(group)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.out)


def decode_consumer_group_key(buf: bytes) -> ConsumerGroupKey | None:
    """The key of a KIP-848 record, or None for any other record type."""
    r = _Reader(bytes(buf))
    record_type = r.int16()
    if record_type not in _GROUP_ONLY_KEYS | _MEMBER_KEYS:
        return None
    group = r.str_()
    member_id = r.str_() if record_type in _MEMBER_KEYS else None
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return ConsumerGroupKey(record_type, group, member_id)


def _value_writer() -> _Writer:
    w = _Writer()
    w.int16(0)
    w.flexible = True
    return w


def _value_reader(buf: bytes, name: str) -> _Reader:
    r = _Reader(bytes(buf))
    version = r.int16()
    if version != 0:
        raise _corrupt(f"{name} version {version}")
    r.flexible = True
    return r


def _done(r: _Reader, name: str) -> None:
    r.skip_tags()
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after {name}")


def _write_uuid(w: _Writer, u: uuid.UUID) -> None:
    w.out += u.bytes


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=r._take(16))


def _write_topic_partitions(w: _Writer, items: TopicAssignment) -> None:
    w.array_len(len(items))
    for topic_id, partitions in items:
        _write_uuid(w, topic_id)
        w.array_len(len(partitions))
        for p in partitions:
            w.int32(p)
        w.tags()


def _read_topic_partitions(r: _Reader) -> TopicAssignment:
    out = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        partitions = tuple(r.int32() for _ in range(r.array_len()))
        r.skip_tags()
        out.append((topic_id, partitions))
    return tuple(out)


def encode_consumer_group_metadata_value(epoch: int) -> bytes:
    w = _value_writer()
    w.int32(epoch)
    w.tags()
    return bytes(w.out)


def decode_consumer_group_metadata_value(buf: bytes) -> int:
    r = _value_reader(buf, "ConsumerGroupMetadataValue")
    epoch = r.int32()
    _done(r, "ConsumerGroupMetadataValue")
    return epoch


def encode_consumer_group_partition_metadata_value(
    topics: tuple[ConsumerGroupTopicMetadata, ...],
) -> bytes:
    w = _value_writer()
    w.array_len(len(topics))
    for t in topics:
        _write_uuid(w, t.topic_id)
        w.string(t.name)
        w.int32(t.num_partitions)
        w.array_len(0)  # PartitionMetadata: no racks known to the assignors here
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_consumer_group_partition_metadata_value(
    buf: bytes,
) -> tuple[ConsumerGroupTopicMetadata, ...]:
    r = _value_reader(buf, "ConsumerGroupPartitionMetadataValue")
    out = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        name = r.str_()
        n = r.int32()
        for _ in range(r.array_len()):
            r.int32()
            for _ in range(r.array_len()):
                r.str_()
            r.skip_tags()
        r.skip_tags()
        out.append(ConsumerGroupTopicMetadata(topic_id, name, n))
    _done(r, "ConsumerGroupPartitionMetadataValue")
    return tuple(out)


def encode_consumer_group_member_metadata_value(v: ConsumerGroupMemberMetadataValue) -> bytes:
    w = _value_writer()
    w.string(v.instance_id)
    w.string(v.rack_id)
    w.string(v.client_id)
    w.string(v.client_host)
    w.array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.string(name)
    w.string(v.subscribed_topic_regex)
    w.int32(v.rebalance_timeout_ms)
    w.string(v.server_assignor)
    w.tags()
    return bytes(w.out)


def decode_consumer_group_member_metadata_value(buf: bytes) -> ConsumerGroupMemberMetadataValue:
    r = _value_reader(buf, "ConsumerGroupMemberMetadataValue")
    instance_id = r.string(nullable=True)
    rack_id = r.string(nullable=True)
    client_id = r.str_()
    client_host = r.str_()
    names = tuple(r.str_() for _ in range(r.array_len()))
    regex = r.string(nullable=True)
    rebalance_timeout = r.int32()
    assignor = r.string(nullable=True)
    _done(r, "ConsumerGroupMemberMetadataValue")
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names,
                                            regex, rebalance_timeout, assignor)


def encode_consumer_group_target_assignment_metadata_value(assignment_epoch: int,
                                                          assignment_timestamp: int = 0) -> bytes:
    """AssignmentEpoch, and AssignmentTimestamp (when the target was computed, Kafka 4.3's
    tagged field 0, left out when 0) that the assignment interval counts from."""
    w = _value_writer()
    w.int32(assignment_epoch)
    if assignment_timestamp:
        w.uvarint(1)
        w.uvarint(0)  # tag
        w.uvarint(8)
        w.int64(assignment_timestamp)
    else:
        w.tags()
    return bytes(w.out)


def decode_target_assignment_metadata(buf: bytes, name: str) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp) of a consumer, share or streams group's
    TargetAssignmentMetadataValue (`name`: which, for errors)."""
    r = _value_reader(buf, name)
    epoch = r.int32()
    timestamp = 0
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag == 0:
            if size != 8:
                raise _corrupt(f"{name} AssignmentTimestamp of {size} bytes")
            timestamp = r.int64()
        else:
            r._take(size)
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after {name}")
    return epoch, timestamp


def decode_consumer_group_target_assignment_metadata_value(buf: bytes) -> int:
    return decode_target_assignment_metadata(buf, "ConsumerGroupTargetAssignmentMetadataValue")[0]


def encode_consumer_group_target_assignment_member_value(items: TopicAssignment) -> bytes:
    w = _value_writer()
    _write_topic_partitions(w, items)
    w.tags()
    return bytes(w.out)


def decode_consumer_group_target_assignment_member_value(buf: bytes) -> TopicAssignment:
    return _decode_topic_assignment(buf, "ConsumerGroupTargetAssignmentMemberValue")


def _decode_topic_assignment(buf: bytes, name: str) -> TopicAssignment:
    """A value that is one array of topic partitions (consumer and share groups' target
    assignment member records); `name` is the record named in a corrupt-record error."""
    r = _value_reader(buf, name)
    items = _read_topic_partitions(r)
    _done(r, name)
    return items


def encode_consumer_group_current_member_assignment_value(
    v: ConsumerGroupCurrentMemberAssignmentValue,
) -> bytes:
    w = _value_writer()
    w.int32(v.member_epoch)
    w.int32(v.previous_member_epoch)
    w.out += struct.pack(">b", v.state)
    _write_topic_partitions(w, v.assigned)
    _write_topic_partitions(w, v.pending_revocation)
    w.tags()
    return bytes(w.out)


def decode_consumer_group_current_member_assignment_value(
    buf: bytes,
) -> ConsumerGroupCurrentMemberAssignmentValue:
    r = _value_reader(buf, "ConsumerGroupCurrentMemberAssignmentValue")
    epoch = r.int32()
    previous = r.int32()
    state = int(struct.unpack(">b", r._take(1))[0])
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    _done(r, "ConsumerGroupCurrentMemberAssignmentValue")
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)


# ---- KIP-932 share-group records ------------------------------------------------------------
#
# Key record types (Kafka 4.4's CoordinatorRecordType) and their values (value version 0,
# flexible; keys not flexible, as above):
#   10 ShareGroupMemberMetadata             GroupId, MemberId -> RackId, ClientId, ClientHost,
#                                           SubscribedTopicNames
#   11 ShareGroupMetadata                   GroupId -> Epoch, MetadataHash (int64)
#   12 ShareGroupTargetAssignmentMetadata   GroupId -> AssignmentEpoch
#   13 ShareGroupTargetAssignmentMember     GroupId, MemberId -> TopicPartitions[TopicId,
#                                           Partitions]
#   14 ShareGroupCurrentMemberAssignment    GroupId, MemberId -> MemberEpoch,
#                                           PreviousMemberEpoch, State (int8),
#                                           AssignedPartitions
#   15 ShareGroupStatePartitionMetadata     GroupId -> InitializingTopics[TopicId, TopicName,
#                                           Partitions], InitializedTopics[same],
#                                           DeletingTopics[TopicId, TopicName]
# (9, ShareGroupPartitionMetadata, was Kafka 4.0's and is no longer written.)

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
_SHARE_GROUP_ONLY_KEYS = frozenset({SHARE_GROUP_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                                    SHARE_GROUP_STATE_PARTITION_METADATA})
_SHARE_MEMBER_KEYS = frozenset({SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT})
SHARE_GROUP_RECORD_TYPES = _SHARE_GROUP_ONLY_KEYS | _SHARE_MEMBER_KEYS

# (topic id, topic name, partitions)
StateTopics = tuple[tuple["uuid.UUID", str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    record_type: int
    group: str
    member_id: str | None = None  # for the member record types


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState; share members are always 0, Stable
    assigned: TopicAssignment


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing: StateTopics
    initialized: StateTopics
    deleting: tuple[tuple[uuid.UUID, str], ...]


def encode_share_group_key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    if record_type not in SHARE_GROUP_RECORD_TYPES:
        raise ValueError(f"not a share-group record type: {record_type}")
    if (record_type in _SHARE_MEMBER_KEYS) != (member_id is not None):
        raise ValueError(f"record type {record_type}: member id {member_id!r}")
    w = _Writer()
    w.int16(record_type)
    w.string(group)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.out)


def decode_share_group_key(buf: bytes) -> ShareGroupKey | None:
    """The key of a KIP-932 share-group record, or None for any other record type."""
    r = _Reader(bytes(buf))
    record_type = r.int16()
    if record_type not in SHARE_GROUP_RECORD_TYPES:
        return None
    group = r.str_()
    member_id = r.str_() if record_type in _SHARE_MEMBER_KEYS else None
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return ShareGroupKey(record_type, group, member_id)


def encode_share_group_member_metadata_value(v: ShareGroupMemberMetadataValue) -> bytes:
    w = _value_writer()
    w.string(v.rack_id)
    w.string(v.client_id)
    w.string(v.client_host)
    w.array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.string(name)
    w.tags()
    return bytes(w.out)


def decode_share_group_member_metadata_value(buf: bytes) -> ShareGroupMemberMetadataValue:
    r = _value_reader(buf, "ShareGroupMemberMetadataValue")
    rack_id = r.string(nullable=True)
    client_id = r.str_()
    client_host = r.str_()
    names = tuple(r.str_() for _ in range(r.array_len()))
    _done(r, "ShareGroupMemberMetadataValue")
    return ShareGroupMemberMetadataValue(rack_id, client_id, client_host, names)


def encode_share_group_metadata_value(epoch: int, metadata_hash: int = 0) -> bytes:
    w = _value_writer()
    w.int32(epoch)
    w.int64(metadata_hash)
    w.tags()
    return bytes(w.out)


def decode_share_group_metadata_value(buf: bytes) -> tuple[int, int]:
    """(epoch, metadata hash)."""
    r = _value_reader(buf, "ShareGroupMetadataValue")
    epoch = r.int32()
    metadata_hash = r.int64()
    _done(r, "ShareGroupMetadataValue")
    return epoch, metadata_hash


def encode_share_group_target_assignment_metadata_value(assignment_epoch: int,
                                                         assignment_timestamp: int = 0) -> bytes:
    # the same layout
    return encode_consumer_group_target_assignment_metadata_value(assignment_epoch,
                                                                  assignment_timestamp)


def decode_share_group_target_assignment_metadata_value(buf: bytes) -> int:
    return decode_target_assignment_metadata(buf, "ShareGroupTargetAssignmentMetadataValue")[0]


def encode_share_group_target_assignment_member_value(items: TopicAssignment) -> bytes:
    return encode_consumer_group_target_assignment_member_value(items)  # the same layout


def decode_share_group_target_assignment_member_value(buf: bytes) -> TopicAssignment:
    return _decode_topic_assignment(buf, "ShareGroupTargetAssignmentMemberValue")


def encode_share_group_current_member_assignment_value(
    v: ShareGroupCurrentMemberAssignmentValue,
) -> bytes:
    w = _value_writer()
    w.int32(v.member_epoch)
    w.int32(v.previous_member_epoch)
    w.out += struct.pack(">b", v.state)
    _write_topic_partitions(w, v.assigned)
    w.tags()
    return bytes(w.out)


def decode_share_group_current_member_assignment_value(
    buf: bytes,
) -> ShareGroupCurrentMemberAssignmentValue:
    r = _value_reader(buf, "ShareGroupCurrentMemberAssignmentValue")
    epoch = r.int32()
    previous = r.int32()
    state = int(struct.unpack(">b", r._take(1))[0])
    assigned = _read_topic_partitions(r)
    _done(r, "ShareGroupCurrentMemberAssignmentValue")
    return ShareGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned)


def _write_state_topics(w: _Writer, topics: StateTopics) -> None:
    w.array_len(len(topics))
    for topic_id, name, partitions in topics:
        _write_uuid(w, topic_id)
        w.string(name)
        w.array_len(len(partitions))
        for p in partitions:
            w.int32(p)
        w.tags()


def _read_state_topics(r: _Reader) -> StateTopics:
    out = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        name = r.str_()
        partitions = tuple(r.int32() for _ in range(r.array_len()))
        r.skip_tags()
        out.append((topic_id, name, partitions))
    return tuple(out)


def encode_share_group_state_partition_metadata_value(
    v: ShareGroupStatePartitionMetadataValue,
) -> bytes:
    w = _value_writer()
    _write_state_topics(w, v.initializing)
    _write_state_topics(w, v.initialized)
    w.array_len(len(v.deleting))
    for topic_id, name in v.deleting:
        _write_uuid(w, topic_id)
        w.string(name)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_share_group_state_partition_metadata_value(
    buf: bytes,
) -> ShareGroupStatePartitionMetadataValue:
    r = _value_reader(buf, "ShareGroupStatePartitionMetadataValue")
    initializing = _read_state_topics(r)
    initialized = _read_state_topics(r)
    deleting = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        name = r.str_()
        r.skip_tags()
        deleting.append((topic_id, name))
    _done(r, "ShareGroupStatePartitionMetadataValue")
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))


# ---- KIP-1071 streams-group records --------------------------------------------------------
#
# Key record types (Kafka 4.4's CoordinatorRecordType) and their values (value version 0,
# flexible):
#   17 StreamsGroupMetadata                 GroupId -> Epoch, MetadataHash (int64); tags 2
#                                           and 3: Stored/FailedDescriptionTopologyEpoch
#                                           (KIP-1331)
#   19 StreamsGroupMemberMetadata           GroupId, MemberId -> InstanceId, RackId, ClientId,
#                                           ClientHost, RebalanceTimeoutMs, TopologyEpoch,
#                                           ProcessId, UserEndpoint (nullable struct: Host,
#                                           Port uint16), ClientTags[Key, Value]
#   20 StreamsGroupTargetAssignmentMetadata GroupId -> AssignmentEpoch
#   21 StreamsGroupTargetAssignmentMember   GroupId, MemberId -> ActiveTasks, StandbyTasks,
#                                           WarmupTasks (each [SubtopologyId, Partitions])
#   22 StreamsGroupCurrentMemberAssignment  GroupId, MemberId -> MemberEpoch,
#                                           PreviousMemberEpoch, State (int8: 1 Stable,
#                                           2 UnrevokedTasks, 3 UnreleasedTasks), the three
#                                           task lists, then the three pending revocation
#   23 StreamsGroupTopology                 GroupId -> Epoch, Subtopologies[SubtopologyId,
#                                           SourceTopics, SourceTopicRegex,
#                                           StateChangelogTopics, RepartitionSinkTopics,
#                                           RepartitionSourceTopics, CopartitionGroups]
# Tagged fields Skiff does not use (ValidatedTopologyEpoch, LastAssignmentConfigs,
# AssignmentTimestamp, AssignmentEpochs, ...) are skipped when read and never written.

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
_STREAMS_GROUP_ONLY_KEYS = frozenset({STREAMS_GROUP_METADATA,
                                      STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
                                      STREAMS_GROUP_TOPOLOGY})
_STREAMS_MEMBER_KEYS = frozenset({STREAMS_GROUP_MEMBER_METADATA,
                                  STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                  STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT})
STREAMS_GROUP_RECORD_TYPES = _STREAMS_GROUP_ONLY_KEYS | _STREAMS_MEMBER_KEYS

# (subtopology id, partitions)
TaskList = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupKey:
    record_type: int
    group: str
    member_id: str | None = None  # for the member record types


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StreamsTasks:
    active: TaskList = ()
    standby: TaskList = ()
    warmup: TaskList = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: StreamsTasks
    pending_revocation: StreamsTasks


@dataclass(frozen=True, slots=True)
class StreamsTopicInfo:
    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StreamsSubtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[StreamsTopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[StreamsTopicInfo, ...]
    # each group: indexes into source_topics, source_topic_regex, repartition_source_topics
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]


def encode_streams_group_key(record_type: int, group: str, member_id: str | None = None,
                             ) -> bytes:
    if record_type not in STREAMS_GROUP_RECORD_TYPES:
        raise ValueError(f"not a streams-group record type: {record_type}")
    if (record_type in _STREAMS_MEMBER_KEYS) != (member_id is not None):
        raise ValueError(f"record type {record_type}: member id {member_id!r}")
    w = _Writer()
    w.int16(record_type)
    w.string(group)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.out)


def decode_streams_group_key(buf: bytes) -> StreamsGroupKey | None:
    """The key of a KIP-1071 streams-group record, or None for any other record type."""
    r = _Reader(bytes(buf))
    record_type = r.int16()
    if record_type not in STREAMS_GROUP_RECORD_TYPES:
        return None
    group = r.str_()
    member_id = r.str_() if record_type in _STREAMS_MEMBER_KEYS else None
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return StreamsGroupKey(record_type, group, member_id)


# StreamsGroupMetadataValue's tagged fields for KIP-1331 (int32, default -1, written only
# when set): the topology epoch whose description the topology description plugin holds
# (StoredDescriptionTopologyEpoch) and the one whose push it refused for good
# (FailedDescriptionTopologyEpoch)
_STORED_DESCRIPTION_EPOCH_TAG = 2
_FAILED_DESCRIPTION_EPOCH_TAG = 3


def encode_streams_group_metadata_value(epoch: int, metadata_hash: int = 0,
                                        stored_description_epoch: int = -1,
                                        failed_description_epoch: int = -1) -> bytes:
    tagged = [(tag, v) for tag, v in ((_STORED_DESCRIPTION_EPOCH_TAG, stored_description_epoch),
                                      (_FAILED_DESCRIPTION_EPOCH_TAG, failed_description_epoch))
              if v != -1]
    if not tagged:
        return encode_share_group_metadata_value(epoch, metadata_hash)  # the same layout
    w = _value_writer()
    w.int32(epoch)
    w.int64(metadata_hash)
    w.uvarint(len(tagged))
    for tag, v in tagged:
        w.uvarint(tag)
        w.uvarint(4)
        w.int32(v)
    return bytes(w.out)


def decode_streams_group_metadata_value(buf: bytes) -> int:
    return decode_streams_group_metadata(buf)[0]


def decode_streams_group_metadata(buf: bytes) -> tuple[int, int, int]:
    """(epoch, StoredDescriptionTopologyEpoch, FailedDescriptionTopologyEpoch); the other
    tagged fields are skipped."""
    r = _value_reader(buf, "StreamsGroupMetadataValue")
    epoch = r.int32()
    r.int64()  # MetadataHash
    stored = failed = -1
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag in (_STORED_DESCRIPTION_EPOCH_TAG, _FAILED_DESCRIPTION_EPOCH_TAG) and size == 4:
            v = r.int32()
            if tag == _STORED_DESCRIPTION_EPOCH_TAG:
                stored = v
            else:
                failed = v
        else:
            r._take(size)
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after StreamsGroupMetadataValue")
    return epoch, stored, failed


def _write_strings(w: _Writer, items: tuple[str, ...]) -> None:
    w.array_len(len(items))
    for s in items:
        w.string(s)


def _read_strings(r: _Reader) -> tuple[str, ...]:
    return tuple(r.str_() for _ in range(r.array_len()))


def _write_pairs(w: _Writer, pairs: tuple[tuple[str, str], ...]) -> None:
    w.array_len(len(pairs))
    for k, v in pairs:
        w.string(k)
        w.string(v)
        w.tags()


def _read_pairs(r: _Reader) -> tuple[tuple[str, str], ...]:
    out = []
    for _ in range(r.array_len()):
        k, v = r.str_(), r.str_()
        r.skip_tags()
        out.append((k, v))
    return tuple(out)


def encode_streams_group_member_metadata_value(v: StreamsGroupMemberMetadataValue) -> bytes:
    w = _value_writer()
    w.string(v.instance_id)
    w.string(v.rack_id)
    w.string(v.client_id)
    w.string(v.client_host)
    w.int32(v.rebalance_timeout_ms)
    w.int32(v.topology_epoch)
    w.string(v.process_id)
    if v.user_endpoint is None:
        w.out += b"\xff"  # a null struct
    else:
        host, port = v.user_endpoint
        w.out += b"\x01"
        w.string(host)
        w.out += struct.pack(">H", port)
        w.tags()
    _write_pairs(w, v.client_tags)
    w.tags()
    return bytes(w.out)


def decode_streams_group_member_metadata_value(buf: bytes) -> StreamsGroupMemberMetadataValue:
    r = _value_reader(buf, "StreamsGroupMemberMetadataValue")
    instance_id = r.string(nullable=True)
    rack_id = r.string(nullable=True)
    client_id = r.str_()
    client_host = r.str_()
    rebalance_timeout = r.int32()
    topology_epoch = r.int32()
    process_id = r.str_()
    present = struct.unpack(">b", r._take(1))[0]
    endpoint: tuple[str, int] | None = None
    if present >= 0:
        host = r.str_()
        port = int(struct.unpack(">H", r._take(2))[0])
        r.skip_tags()
        endpoint = (host, port)
    tags = _read_pairs(r)
    _done(r, "StreamsGroupMemberMetadataValue")
    return StreamsGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host,
                                           rebalance_timeout, topology_epoch, process_id,
                                           endpoint, tags)


def encode_streams_group_target_assignment_metadata_value(assignment_epoch: int,
                                                         assignment_timestamp: int = 0) -> bytes:
    # the same layout
    return encode_consumer_group_target_assignment_metadata_value(assignment_epoch,
                                                                  assignment_timestamp)


def decode_streams_group_target_assignment_metadata_value(buf: bytes) -> int:
    return decode_target_assignment_metadata(buf, "StreamsGroupTargetAssignmentMetadataValue")[0]


def _write_tasks(w: _Writer, tasks: TaskList) -> None:
    w.array_len(len(tasks))
    for subtopology, partitions in tasks:
        w.string(subtopology)
        w.array_len(len(partitions))
        for p in partitions:
            w.int32(p)
        w.tags()


def _read_tasks(r: _Reader) -> TaskList:
    out = []
    for _ in range(r.array_len()):
        subtopology = r.str_()
        partitions = tuple(r.int32() for _ in range(r.array_len()))
        r.skip_tags()
        out.append((subtopology, partitions))
    return tuple(out)


def encode_streams_group_target_assignment_member_value(t: StreamsTasks) -> bytes:
    w = _value_writer()
    for tasks in (t.active, t.standby, t.warmup):
        _write_tasks(w, tasks)
    w.tags()
    return bytes(w.out)


def decode_streams_group_target_assignment_member_value(buf: bytes) -> StreamsTasks:
    r = _value_reader(buf, "StreamsGroupTargetAssignmentMemberValue")
    t = StreamsTasks(_read_tasks(r), _read_tasks(r), _read_tasks(r))
    _done(r, "StreamsGroupTargetAssignmentMemberValue")
    return t


def encode_streams_group_current_member_assignment_value(
    v: StreamsGroupCurrentMemberAssignmentValue,
) -> bytes:
    w = _value_writer()
    w.int32(v.member_epoch)
    w.int32(v.previous_member_epoch)
    w.out += struct.pack(">b", v.state)
    for t in (v.assigned, v.pending_revocation):
        for tasks in (t.active, t.standby, t.warmup):
            _write_tasks(w, tasks)
    w.tags()
    return bytes(w.out)


def decode_streams_group_current_member_assignment_value(
    buf: bytes,
) -> StreamsGroupCurrentMemberAssignmentValue:
    r = _value_reader(buf, "StreamsGroupCurrentMemberAssignmentValue")
    epoch = r.int32()
    previous = r.int32()
    state = int(struct.unpack(">b", r._take(1))[0])
    assigned = StreamsTasks(_read_tasks(r), _read_tasks(r), _read_tasks(r))
    pending = StreamsTasks(_read_tasks(r), _read_tasks(r), _read_tasks(r))
    _done(r, "StreamsGroupCurrentMemberAssignmentValue")
    return StreamsGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)


def _write_topic_infos(w: _Writer, infos: tuple[StreamsTopicInfo, ...]) -> None:
    w.array_len(len(infos))
    for t in infos:
        w.string(t.name)
        w.int32(t.partitions)
        w.int16(t.replication_factor)
        _write_pairs(w, t.configs)
        w.tags()


def _read_topic_infos(r: _Reader) -> tuple[StreamsTopicInfo, ...]:
    out = []
    for _ in range(r.array_len()):
        name = r.str_()
        partitions = r.int32()
        rf = r.int16()
        configs = _read_pairs(r)
        r.skip_tags()
        out.append(StreamsTopicInfo(name, partitions, rf, configs))
    return tuple(out)


def _write_int16s(w: _Writer, items: tuple[int, ...]) -> None:
    w.array_len(len(items))
    for i in items:
        w.int16(i)


def _read_int16s(r: _Reader) -> tuple[int, ...]:
    return tuple(r.int16() for _ in range(r.array_len()))


def encode_streams_group_topology_value(epoch: int,
                                        subtopologies: tuple[StreamsSubtopology, ...]) -> bytes:
    w = _value_writer()
    w.int32(epoch)
    w.array_len(len(subtopologies))
    for s in subtopologies:
        w.string(s.subtopology_id)
        _write_strings(w, s.source_topics)
        _write_strings(w, s.source_topic_regex)
        _write_topic_infos(w, s.state_changelog_topics)
        _write_strings(w, s.repartition_sink_topics)
        _write_topic_infos(w, s.repartition_source_topics)
        w.array_len(len(s.copartition_groups))
        for sources, regexes, repartitions in s.copartition_groups:
            _write_int16s(w, sources)
            _write_int16s(w, regexes)
            _write_int16s(w, repartitions)
            w.tags()
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_streams_group_topology_value(buf: bytes,
                                        ) -> tuple[int, tuple[StreamsSubtopology, ...]]:
    """(topology epoch, subtopologies)."""
    r = _value_reader(buf, "StreamsGroupTopologyValue")
    epoch = r.int32()
    subtopologies = []
    for _ in range(r.array_len()):
        sid = r.str_()
        sources = _read_strings(r)
        regexes = _read_strings(r)
        changelogs = _read_topic_infos(r)
        sinks = _read_strings(r)
        repartitions = _read_topic_infos(r)
        groups = []
        for _ in range(r.array_len()):
            group = (_read_int16s(r), _read_int16s(r), _read_int16s(r))
            r.skip_tags()
            groups.append(group)
        r.skip_tags()
        subtopologies.append(StreamsSubtopology(sid, sources, regexes, changelogs, sinks,
                                                repartitions, tuple(groups)))
    _done(r, "StreamsGroupTopologyValue")
    return epoch, tuple(subtopologies)
