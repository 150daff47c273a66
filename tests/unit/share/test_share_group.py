"""Share group membership (broker/share/group.py) with its records in __consumer_offsets, and
share sessions (broker/share/sessions.py), pure."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group import records as rec
from broker.group.types import OffsetsRecord
from broker.share.group import (
    ShareGroup,
    ShareGroupCoordinator,
    ShareGroupSettings,
    ShareHeartbeatRequest,
    simple_assignment,
)
from broker.share.sessions import ShareSessionCache

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"one": (T1, 1), "six": (T2, 6)}
# assignment batching off (test_assignment_interval.py tests share.assignment.interval.ms)
SETTINGS = ShareGroupSettings(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=3,
                              assignment_interval_ms=0)


def hb(member: str, epoch: int, names: tuple[str, ...] | None = ("one",)) -> ShareHeartbeatRequest:
    return ShareHeartbeatRequest("g", member, epoch, None, names)


def test_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    got = simple_assignment({m: ("one",) for m in "abcd"}, TOPICS)
    assert got == {m: {T1: [0]} for m in "abcd"}
    got = simple_assignment({"a": ("six",), "b": ("six",)}, TOPICS)
    assert got == {"a": {T2: [0, 2, 4]}, "b": {T2: [1, 3, 5]}}
    got = simple_assignment({"a": ("one", "six"), "b": ("six",), "c": ("missing",)}, TOPICS)
    assert got == {"a": {T1: [0], T2: [0, 2, 4]}, "b": {T2: [1, 3, 5]}, "c": {}}


def test_join_heartbeat_leave() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    r, left = g.heartbeat(hb("a", 0), TOPICS, 0)
    assert r.error is ErrorCode.none and r.member_epoch == 1 and left == []
    assert r.assignment == ((T1, (0,)),) and r.heartbeat_interval_ms == 100
    # a heartbeat without changes carries no assignment
    r, _ = g.heartbeat(hb("a", 1, None), TOPICS, 10)
    assert r.error is ErrorCode.none and r.member_epoch == 1 and r.assignment is None
    # a second member: both get partition 0 at the new epoch
    r, _ = g.heartbeat(hb("b", 0), TOPICS, 20)
    assert r.member_epoch == 2 and r.assignment == ((T1, (0,)),)
    r, _ = g.heartbeat(hb("a", 1, None), TOPICS, 30)
    assert r.member_epoch == 2 and r.assignment == ((T1, (0,)),)
    assert g.rebalances == 2  # a target assignment per new group epoch (the metric)
    desc = g.describe("g", {T1: "one"})
    assert desc is not None and desc.state == "Stable" and len(desc.members) == 2
    assert desc.members[0].assignment == ((T1, "one", (0,)),)
    r, left = g.heartbeat(hb("b", -1, None), TOPICS, 40)
    assert r.error is ErrorCode.none and r.member_epoch == -1 and left == ["b"]


def test_heartbeat_errors() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    assert g.heartbeat(hb("", 0), TOPICS, 0)[0].error is ErrorCode.invalid_request
    assert g.heartbeat(hb("a", 0, None), TOPICS, 0)[0].error is ErrorCode.invalid_request
    assert g.heartbeat(hb("a", 5), TOPICS, 0)[0].error is ErrorCode.unknown_member_id
    g.heartbeat(hb("a", 0), TOPICS, 0)
    assert g.heartbeat(hb("a", 7), TOPICS, 0)[0].error is ErrorCode.fenced_member_epoch
    g.heartbeat(hb("b", 0), TOPICS, 0)
    g.heartbeat(hb("c", 0), TOPICS, 0)
    assert g.heartbeat(hb("d", 0), TOPICS, 0)[0].error is ErrorCode.group_max_size_reached


def test_session_timeout_removes_members() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    g.heartbeat(hb("a", 0), TOPICS, 0)
    r, _ = g.heartbeat(hb("b", 0), TOPICS, 500)
    r, left = g.heartbeat(hb("b", r.member_epoch, None), TOPICS, 1200)
    assert left == ["a"] and r.error is ErrorCode.none
    assert g.heartbeat(hb("a", 2, None), TOPICS, 1300)[0].error is ErrorCode.unknown_member_id


def test_new_partitions_are_assigned() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    r, _ = g.heartbeat(hb("a", 0, ("six",)), TOPICS, 0)
    grown = {"six": (T2, 8)}
    r, _ = g.heartbeat(hb("a", r.member_epoch, None), grown, 10)
    assert r.assignment == ((T2, tuple(range(8))),)


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=2)
    p = (T1, 0)
    err, _, _ = cache.fetch_update("g", "a", 0, [p], [], has_acks=True)
    assert err is ErrorCode.invalid_request
    err, s, _ = cache.fetch_update("g", "a", 0, [p], [], has_acks=False)
    assert err is ErrorCode.none and s is not None and s.epoch == 1 and list(s.partitions) == [p]
    wrong = cache.fetch_update("g", "a", 2, [], [], False)[0]
    assert wrong is ErrorCode.invalid_share_session_epoch
    assert cache.fetch_update("g", "a", 1, [], [p], False)[0] is ErrorCode.none
    assert s.epoch == 2 and not s.partitions
    assert cache.acknowledge_update("g", "a", 2)[0] is ErrorCode.none and s.epoch == 3
    assert cache.acknowledge_update("g", "a", 0)[0] is ErrorCode.invalid_share_session_epoch
    assert cache.fetch_update("g", "b", 1, [], [], False)[0] is ErrorCode.share_session_not_found
    assert cache.acknowledge_update("g", "b", -1)[0] is ErrorCode.share_session_not_found
    assert cache.fetch_update("g", "b", 0, [], [], False)[0] is ErrorCode.none
    full = cache.fetch_update("g", "c", 0, [], [], False)[0]
    assert full is ErrorCode.share_session_limit_reached
    assert cache.fetch_update("g", "a", -1, [], [], False)[0] is ErrorCode.none


# ---- records and replay ------------------------------------------------------------------------

NAMES = {T1: "one", T2: "six"}


def key_of(r: OffsetsRecord) -> rec.ShareGroupKey:
    key = rec.decode_share_group_key(r.key)
    assert key is not None
    return key


def replayed(records: list[OffsetsRecord], now_ms: int = 500) -> ShareGroupCoordinator:
    """A new coordinator that loaded these records (in log order)."""
    g = ShareGroupCoordinator(SETTINGS)
    for r in records:
        g.replay(key_of(r), r.value, r.key)
    g.finish_loading({key_of(r).group for r in records}, TOPICS, now_ms)
    return g


def state(group: ShareGroup) -> tuple[object, ...]:
    return (group.group_epoch, group.assignment_epoch, group.initialized, group.persisted,
            group.topics_seen,
            {m.member_id: (m.member_epoch, m.previous_member_epoch, m.subscribed, m.rack_id,
                           m.client_id, m.client_host, m.assignment)
             for m in group.members.values()})


def test_records_replay_to_the_same_group() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    log: list[OffsetsRecord] = []
    g.heartbeat(ShareHeartbeatRequest("g", "a", 0, "rack1", ("six",), "cli", "/h"), TOPICS, 0)
    log += g.take_records(NAMES)["g"]
    g.heartbeat(hb("b", 0, ("one", "six")), TOPICS, 10)
    g.heartbeat(hb("a", 1, None), TOPICS, 20)
    log += g.take_records(NAMES)["g"]
    g.heartbeat(hb("b", 2, None), TOPICS, 30)  # nothing changed: nothing to write
    assert g.take_records(NAMES) == {}
    g.offsets_altered("other", {T2: [5]})  # an empty group with altered start offsets
    log += g.take_records(NAMES)["other"]
    loaded = replayed(log)
    assert set(loaded.groups) == {"g", "other"}
    assert state(loaded.groups["g"]) == state(g.groups["g"])
    assert state(loaded.groups["other"]) == state(g.groups["other"])
    assert loaded.initialized_partitions("g") == {T1: (0,), T2: tuple(range(6))}
    # members get a session from the load on, and their assignment again
    assert loaded.expire(500 + 999) == []
    r, _ = loaded.heartbeat(hb("b", 2, None), TOPICS, 600)
    assert r.error is ErrorCode.none and r.assignment is not None


def test_leave_and_delete_write_tombstones_and_replay_forgets() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    g.heartbeat(hb("a", 0), TOPICS, 0)
    g.heartbeat(hb("b", 0), TOPICS, 0)
    log = g.take_records(NAMES)["g"]
    g.heartbeat(hb("b", -1), TOPICS, 5)
    out = g.take_records(NAMES)["g"]
    member_b = {rec.encode_share_group_key(t, "g", "b") for t in (10, 13, 14)}
    assert {r.key for r in out if r.value is None} == member_b
    log += out
    g.delete("g")
    out = g.take_records(NAMES)["g"]
    assert all(r.value is None for r in out)
    assert [key_of(r).record_type for r in out] == [
        14, 13, 10, 12, 15, 11]  # members first, ShareGroupMetadata last, as Kafka does
    assert replayed(log).groups["g"].members.keys() == {"a"}
    assert replayed(log + out).groups == {}


def test_failed_write_is_written_again() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    g.heartbeat(hb("a", 0), TOPICS, 0)
    first = g.take_records(NAMES)["g"]
    g.write_failed("g", first)
    assert {r.key: r.value for r in g.take_records(NAMES)["g"]} == \
        {r.key: r.value for r in first}
    g.delete("g")
    tombstones = g.take_records(NAMES)["g"]
    g.write_failed("g", tombstones)
    assert g.take_records(NAMES)["g"] == tombstones


def test_unload_forgets_without_records() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    g.heartbeat(hb("a", 0), TOPICS, 0)
    g.unload(["g"])
    assert g.groups == {} and g.take_records(NAMES) == {}


def test_replay_refuses_a_corrupt_value() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    key = rec.encode_share_group_key(rec.SHARE_GROUP_METADATA, "g")
    with pytest.raises(KafkaError, match="needs 8 bytes"):
        g.replay(rec.ShareGroupKey(rec.SHARE_GROUP_METADATA, "g"), b"\x00\x00\x00\x00\x00\x01", key)


def test_a_load_keeps_the_assignment_unless_the_topics_changed() -> None:
    g = ShareGroupCoordinator(SETTINGS)
    g.heartbeat(hb("a", 0), TOPICS, 0)
    log = g.take_records(NAMES)["g"]
    same = replayed(log)
    assert same.heartbeat(hb("a", 1, None), TOPICS, 600)[0].member_epoch == 1
    changed = ShareGroupCoordinator(SETTINGS)
    for r in log:
        changed.replay(key_of(r), r.value, r.key)
    grown = {**TOPICS, "one": (T1, 2)}  # a partition added while nobody coordinated
    changed.finish_loading(["g"], grown, 500)
    r, _ = changed.heartbeat(hb("a", 1, None), grown, 600)
    assert (r.member_epoch, r.assignment) == (2, ((T1, (0, 1)),))
