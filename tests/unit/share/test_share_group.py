"""Share group membership (broker/share/group.py) and share sessions
(broker/share/sessions.py), pure."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.share.group import (
    ShareGroupCoordinator,
    ShareGroupSettings,
    ShareHeartbeatRequest,
    simple_assignment,
)
from broker.share.sessions import ShareSessionCache

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"one": (T1, 1), "six": (T2, 6)}
SETTINGS = ShareGroupSettings(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=3)


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
