"""__consumer_offsets key/value formats against byte layouts written out from Kafka's schema JSON
(OffsetCommitKey/Value, GroupMetadataKey/Value in group-coordinator/src/main/resources)."""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.group import records as rec


def s16(s: str) -> bytes:
    return struct.pack(">h", len(s.encode())) + s.encode()


def test_offset_commit_key_layout() -> None:
    # int16 type 1, string group, string topic, int32 partition
    assert rec.encode_offset_commit_key("grp", "orders", 7) == (
        struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 7)
    )


def test_group_metadata_key_layout() -> None:
    assert rec.encode_group_metadata_key("grp") == struct.pack(">h", 2) + s16("grp")


def test_key_decoding_accepts_both_offset_key_versions_and_skips_new_types() -> None:
    body = s16("g") + s16("t") + struct.pack(">i", 3)
    for t in (0, 1):
        assert rec.decode_key(struct.pack(">h", t) + body) == rec.OffsetCommitKey("g", "t", 3)
    assert rec.decode_key(struct.pack(">h", 2) + s16("g")) == rec.GroupMetadataKey("g")
    assert rec.decode_key(struct.pack(">h", 3) + b"\x00\x01\x02") == rec.UnknownKey(3)
    with pytest.raises(KafkaError):
        rec.decode_key(struct.pack(">h", 2) + s16("g") + b"x")  # trailing garbage
    with pytest.raises(KafkaError):
        rec.decode_key(struct.pack(">h", 1) + struct.pack(">h", 50) + b"short")


def test_offset_commit_value_v3_layout() -> None:
    v = rec.OffsetCommitValue(offset=42, leader_epoch=9, metadata="m", commit_timestamp=1000)
    # version 3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    expected = (struct.pack(">hqi", 3, 42, 9) + s16("m") + struct.pack(">q", 1000))
    assert rec.encode_offset_commit_value(v) == expected
    assert rec.decode_offset_commit_value(expected) == v


def test_offset_commit_value_v1_carries_expire_timestamp() -> None:
    v = rec.OffsetCommitValue(42, -1, "", 1000, expire_timestamp=5000)
    expected = struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1000, 5000)
    assert rec.encode_offset_commit_value(v) == expected
    assert rec.decode_offset_commit_value(expected) == v


def test_offset_commit_value_v0_and_flexible_v4() -> None:
    v0 = struct.pack(">hq", 0, 5) + s16("md") + struct.pack(">q", 77)
    assert rec.decode_offset_commit_value(v0) == rec.OffsetCommitValue(5, -1, "md", 77)
    # v4: compact string (uvarint len+1), then an empty tagged-field section; plus one
    # unknown tagged field to prove it is skipped
    v4 = (struct.pack(">hqi", 4, 5, 2) + bytes([3]) + b"md" + struct.pack(">q", 77)
          + bytes([1, 0, 2]) + b"zz")
    assert rec.decode_offset_commit_value(v4) == rec.OffsetCommitValue(5, 2, "md", 77)
    with pytest.raises(KafkaError):
        rec.decode_offset_commit_value(struct.pack(">hq", 5, 1))
    with pytest.raises(KafkaError):
        rec.decode_offset_commit_value(v0[:-3])


def _member_v3(m: rec.MemberMetadata) -> bytes:
    inst = s16(m.group_instance_id) if m.group_instance_id is not None else struct.pack(">h", -1)
    return (s16(m.member_id) + inst + s16(m.client_id) + s16(m.client_host)
            + struct.pack(">ii", m.rebalance_timeout, m.session_timeout)
            + struct.pack(">i", len(m.subscription)) + m.subscription
            + struct.pack(">i", len(m.assignment)) + m.assignment)


def test_group_metadata_value_v3_layout() -> None:
    members = (
        rec.MemberMetadata("m1", None, "c1", "/h", 30000, 10000, b"sub", b"asg"),
        rec.MemberMetadata("m2", "inst-2", "c2", "/h2", 31000, 11000, b"", b"x"),
    )
    v = rec.GroupMetadataValue("consumer", 4, "range", "m1", 123, members)
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range")
                + s16("m1") + struct.pack(">q", 123) + struct.pack(">i", 2)
                + _member_v3(members[0]) + _member_v3(members[1]))
    assert rec.encode_group_metadata_value(v) == expected
    assert rec.decode_group_metadata_value(expected) == v


def test_group_metadata_value_empty_group_null_protocol() -> None:
    v = rec.GroupMetadataValue("consumer", 5, None, None, 9, ())
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5)
                + struct.pack(">hh", -1, -1) + struct.pack(">qi", 9, 0))
    assert rec.encode_group_metadata_value(v) == expected
    assert rec.decode_group_metadata_value(expected) == v


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_every_version_round_trips(version: int) -> None:
    m = rec.MemberMetadata("m", "i" if version >= 3 else None, "c", "/h",
                           20000 if version >= 1 else 10000, 10000, b"s", b"a")
    v = rec.GroupMetadataValue("consumer", 1, "range", "m", 55 if version >= 2 else -1, (m,))
    data = rec.encode_group_metadata_value(v, version)
    assert rec.decode_group_metadata_value(data) == v


def test_group_metadata_value_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    data = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range")
            + s16("m") + struct.pack(">i", 1) + s16("m") + s16("c") + s16("/h")
            + struct.pack(">i", 7000) + struct.pack(">i", 0) + struct.pack(">i", 0))
    v = rec.decode_group_metadata_value(data)
    assert v.members[0].rebalance_timeout == 7000 and v.members[0].session_timeout == 7000


def test_group_metadata_value_refuses_huge_array_and_truncation() -> None:
    head = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 1)
            + struct.pack(">hh", -1, -1))
    with pytest.raises(KafkaError):
        rec.decode_group_metadata_value(head + struct.pack(">qi", 0, 2**30))
    good = rec.encode_group_metadata_value(rec.GroupMetadataValue(
        "consumer", 1, "r", "m", 0, (rec.MemberMetadata("m", None, "c", "h", 1, 1, b"s", b"a"),)))
    for cut in range(len(good)):
        with pytest.raises(KafkaError):
            rec.decode_group_metadata_value(good[:cut])


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.text(max_size=40),
       st.integers(-(2**63), 2**63 - 1), st.one_of(st.just(-1), st.integers(0, 2**62)))
def test_offset_commit_value_round_trip(off: int, epoch: int, md: str, ts: int, exp: int) -> None:
    v = rec.OffsetCommitValue(off, epoch if exp < 0 else -1, md, ts, exp)
    assert rec.decode_offset_commit_value(rec.encode_offset_commit_value(v)) == v


@given(st.binary(max_size=64))
def test_decoders_never_crash_on_garbage(data: bytes) -> None:
    for fn in (rec.decode_key, rec.decode_offset_commit_value, rec.decode_group_metadata_value):
        with contextlib.suppress(KafkaError):
            fn(data)


def test_group_config_from_node_config_reads_kafka_keys_and_defaults() -> None:
    from broker.group.types import GroupConfig

    cfg = {"group.min.session.timeout.ms": 100, "group.max.session.timeout.ms": 200,
           "group.initial.rebalance.delay.ms": 0, "group.max.size": 5,
           "offsets.retention.minutes": 2, "offsets.retention.check.interval.ms": 1000,
           "offset.metadata.max.bytes": 10}
    c = GroupConfig.from_node_config(cfg)
    assert (c.min_session_timeout_ms, c.max_session_timeout_ms, c.max_size) == (100, 200, 5)
    assert c.offsets_retention_ms == 120_000 and c.offset_metadata_max_bytes == 10
    assert c.consumer_session_timeout_ms == 45_000  # not in the config: Kafka's default


def test_group_config_reads_kip848_keys_set_explicitly_on_a_node() -> None:
    from pathlib import Path

    import pytest

    from broker.config import load_config
    from broker.group.types import GroupConfig
    from broker.node import data_dir_overrides

    base = data_dir_overrides(Path("/nonexistent/skiff"), 19092, 19093)
    env = {"SKIFF_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "6000",
           "SKIFF_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "500"}
    c = GroupConfig.from_node_config(load_config(None, base, env, warn=lambda m: None))
    assert (c.consumer_session_timeout_ms, c.consumer_heartbeat_interval_ms) == (6000, 500)
    with pytest.raises(ValueError, match=r"group\.consumer\.session\.timeout\.ms"):
        load_config(None, {**base, "group.consumer.session.timeout.ms": "soon"}, {},
                    warn=lambda m: None)


# ---- KIP-932 share-group records (Kafka 4.4's ShareGroup*Key/Value, version 0) --------------

T1 = uuid.UUID(int=0x1234)


def uv(n: int) -> bytes:  # a small unsigned varint (compact lengths here are < 128)
    assert n < 128
    return bytes([n])


def cs(s: str) -> bytes:  # COMPACT_STRING
    return uv(len(s.encode()) + 1) + s.encode()


def test_share_group_keys_layout() -> None:
    assert rec.encode_share_group_key(rec.SHARE_GROUP_METADATA, "g") == \
        struct.pack(">h", 11) + s16("g")
    assert rec.encode_share_group_key(rec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m") == \
        struct.pack(">h", 14) + s16("g") + s16("m")
    for t in rec.SHARE_GROUP_RECORD_TYPES:
        member = "m" if t in (10, 13, 14) else None
        key = rec.encode_share_group_key(t, "grp", member)
        assert rec.decode_share_group_key(key) == rec.ShareGroupKey(t, "grp", member)
        assert rec.decode_key(key) == rec.UnknownKey(t)
    assert rec.decode_share_group_key(rec.encode_consumer_group_key(3, "g")) is None
    with pytest.raises(ValueError):
        rec.encode_share_group_key(rec.SHARE_GROUP_METADATA, "g", "m")
    with pytest.raises(ValueError):
        rec.encode_share_group_key(rec.SHARE_GROUP_MEMBER_METADATA, "g")
    with pytest.raises(KafkaError, match="trailing"):
        rec.decode_share_group_key(struct.pack(">h", 11) + s16("g") + b"x")


def test_share_group_values_layout() -> None:
    # ShareGroupMetadataValue: version, Epoch int32, MetadataHash int64, tags
    assert rec.encode_share_group_metadata_value(5, 9) == \
        struct.pack(">hiq", 0, 5, 9) + b"\x00"
    # ShareGroupMemberMetadataValue: RackId (nullable), ClientId, ClientHost, topic names
    assert rec.encode_share_group_member_metadata_value(
        rec.ShareGroupMemberMetadataValue(None, "c", "/h", ("t",))) == \
        struct.pack(">h", 0) + b"\x00" + cs("c") + cs("/h") + uv(2) + cs("t") + b"\x00"
    # ShareGroupCurrentMemberAssignmentValue: epochs, State int8, [TopicId, [Partitions]]
    assert rec.encode_share_group_current_member_assignment_value(
        rec.ShareGroupCurrentMemberAssignmentValue(3, 2, 0, ((T1, (1,)),))) == \
        struct.pack(">hiib", 0, 3, 2, 0) + uv(2) + T1.bytes + uv(2) + struct.pack(">i", 1) \
        + b"\x00" + b"\x00"
    # ShareGroupStatePartitionMetadataValue: Initializing, Initialized, Deleting topics
    assert rec.encode_share_group_state_partition_metadata_value(
        rec.ShareGroupStatePartitionMetadataValue((), ((T1, "t", (0, 2)),), ())) == \
        struct.pack(">h", 0) + uv(1) + uv(2) + T1.bytes + cs("t") + uv(3) \
        + struct.pack(">ii", 0, 2) + b"\x00" + uv(1) + b"\x00"


SHARE_VALUES = [
    (rec.encode_share_group_metadata_value(7, -1), rec.decode_share_group_metadata_value,
     (7, -1)),
    (rec.encode_share_group_member_metadata_value(
        rec.ShareGroupMemberMetadataValue("r", "c", "/h", ("a", "b"))),
     rec.decode_share_group_member_metadata_value,
     rec.ShareGroupMemberMetadataValue("r", "c", "/h", ("a", "b"))),
    (rec.encode_share_group_target_assignment_metadata_value(4),
     rec.decode_share_group_target_assignment_metadata_value, 4),
    (rec.encode_share_group_target_assignment_member_value(((T1, (0, 1)),)),
     rec.decode_share_group_target_assignment_member_value, ((T1, (0, 1)),)),
    (rec.encode_share_group_current_member_assignment_value(
        rec.ShareGroupCurrentMemberAssignmentValue(2, 1, 0, ((T1, (3,)),))),
     rec.decode_share_group_current_member_assignment_value,
     rec.ShareGroupCurrentMemberAssignmentValue(2, 1, 0, ((T1, (3,)),))),
    (rec.encode_share_group_state_partition_metadata_value(
        rec.ShareGroupStatePartitionMetadataValue(((T1, "x", (1,)),), ((T1, "t", (0,)),),
                                                  ((T1, "d"),))),
     rec.decode_share_group_state_partition_metadata_value,
     rec.ShareGroupStatePartitionMetadataValue(((T1, "x", (1,)),), ((T1, "t", (0,)),),
                                               ((T1, "d"),))),
]


_TASKS = rec.StreamsTasks((("0", (0, 1)),), (("1", (2,)),), ())
_TOPOLOGY = (3, (rec.StreamsSubtopology(
    "0", ("in",), (), (rec.StreamsTopicInfo("app-changelog", 3, -1, (("k", "v"),)),),
    ("app-rep",), (rec.StreamsTopicInfo("app-rep", 2, 1, ()),), (((0,), (), (0,)),)),))
_MEMBER = rec.StreamsGroupMemberMetadataValue("i", None, "c", "/h", 30000, 3, "p",
                                              ("host", 65000), (("k", "v"),))
STREAMS_VALUES = [
    (rec.encode_streams_group_metadata_value(7), rec.decode_streams_group_metadata_value, 7),
    (rec.encode_streams_group_member_metadata_value(_MEMBER),
     rec.decode_streams_group_member_metadata_value, _MEMBER),
    (rec.encode_streams_group_member_metadata_value(
        rec.StreamsGroupMemberMetadataValue(None, "r", "c", "/h", 1, 0, "p", None, ())),
     rec.decode_streams_group_member_metadata_value,
     rec.StreamsGroupMemberMetadataValue(None, "r", "c", "/h", 1, 0, "p", None, ())),
    (rec.encode_streams_group_target_assignment_metadata_value(4),
     rec.decode_streams_group_target_assignment_metadata_value, 4),
    (rec.encode_streams_group_target_assignment_member_value(_TASKS),
     rec.decode_streams_group_target_assignment_member_value, _TASKS),
    (rec.encode_streams_group_current_member_assignment_value(
        rec.StreamsGroupCurrentMemberAssignmentValue(5, 4, 2, _TASKS, rec.StreamsTasks())),
     rec.decode_streams_group_current_member_assignment_value,
     rec.StreamsGroupCurrentMemberAssignmentValue(5, 4, 2, _TASKS, rec.StreamsTasks())),
    (rec.encode_streams_group_topology_value(*_TOPOLOGY), rec.decode_streams_group_topology_value,
     _TOPOLOGY),
]


def test_streams_group_keys() -> None:
    for t in rec.STREAMS_GROUP_RECORD_TYPES:
        member = "m" if t in (19, 21, 22) else None
        key = rec.encode_streams_group_key(t, "grp", member)
        assert key[:2] == struct.pack(">h", t)
        assert rec.decode_streams_group_key(key) == rec.StreamsGroupKey(t, "grp", member)
        assert rec.decode_share_group_key(key) is None
    with pytest.raises(ValueError):
        rec.encode_streams_group_key(rec.STREAMS_GROUP_METADATA, "g", "m")


def test_streams_member_metadata_endpoint_is_a_nullable_struct() -> None:
    # ... ProcessId, then -1 for a null UserEndpoint (Kafka 4.4 writes the same 19 bytes)
    data = rec.encode_streams_group_member_metadata_value(
        rec.StreamsGroupMemberMetadataValue(None, None, "c", "h", 0, 0, "p", None, ()))
    assert data[2:] == b"\x00\x00" + cs("c") + cs("h") + bytes(8) + cs("p") + b"\xff\x01\x00"


@pytest.mark.parametrize(("data", "decode", "want"), SHARE_VALUES + STREAMS_VALUES)
def test_share_group_values_round_trip_and_reject_every_cut(
        data: bytes, decode: Callable[[bytes], object], want: object) -> None:
    assert decode(data) == want
    for n in range(len(data)):  # every truncation is a clear error, never a crash
        with pytest.raises(KafkaError, match="__consumer_offsets record"):
            decode(data[:n])
    with pytest.raises(KafkaError, match="trailing"):
        decode(data + b"\x00")
    with pytest.raises(KafkaError, match="version 1"):
        decode(struct.pack(">h", 1) + data[2:])


def test_share_group_value_refuses_array_longer_than_the_record() -> None:
    # AssignedPartitions claiming 1000 topics in a record of a few bytes
    data = struct.pack(">hiib", 0, 1, 0, 0) + bytes([0xE9, 0x07])
    with pytest.raises(KafkaError, match="bad array length"):
        rec.decode_share_group_current_member_assignment_value(data)


@given(st.binary(max_size=64))
def test_group_record_decoders_never_crash_on_garbage(data: bytes) -> None:
    for decode in (rec.decode_share_group_key, rec.decode_streams_group_key,
                   *(d for _, d, _ in SHARE_VALUES + STREAMS_VALUES)):
        with contextlib.suppress(KafkaError):
            decode(data)


def test_streams_group_metadata_description_epochs_are_tags_2_and_3() -> None:
    """KIP-1331's StoredDescriptionTopologyEpoch (tag 2) and FailedDescriptionTopologyEpoch
    (tag 3): int32 tagged fields, default -1, written only when set, in tag order."""
    plain = rec.encode_streams_group_metadata_value(7)
    assert plain[-1:] == b"\x00"  # no tagged fields
    assert rec.decode_streams_group_metadata(plain) == (7, -1, -1)
    both = rec.encode_streams_group_metadata_value(7, stored_description_epoch=3,
                                                   failed_description_epoch=4)
    assert both == plain[:-1] + b"\x02" + b"\x02\x04" + struct.pack(">i", 3) \
        + b"\x03\x04" + struct.pack(">i", 4)
    assert rec.decode_streams_group_metadata(both) == (7, 3, 4)
    assert rec.decode_streams_group_metadata_value(both) == 7
    failed = rec.encode_streams_group_metadata_value(7, failed_description_epoch=2)
    assert rec.decode_streams_group_metadata(failed) == (7, -1, 2)
    # Kafka's other tags (0 ValidatedTopologyEpoch, 1 LastAssignmentConfigs) are skipped
    other = plain[:-1] + b"\x02" + b"\x00\x04" + struct.pack(">i", 9) \
        + b"\x02\x04" + struct.pack(">i", 5)
    assert rec.decode_streams_group_metadata(other) == (7, 5, -1)
    with pytest.raises(KafkaError):
        rec.decode_streams_group_metadata(both + b"\x00")
