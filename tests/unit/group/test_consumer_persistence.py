"""KIP-848 membership in __consumer_offsets: Kafka's record formats, what the coordinator
writes after each change, and a coordinator rebuilt by replaying those records."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from test_consumer_group import Consumers, image, no_double_ownership

from broker.errors import KafkaError
from broker.group import records as rec
from broker.group.consumer import MemberState, group_records
from broker.group.coordinator import GroupCoordinator
from broker.group.types import CommitPartition, OffsetCommitRequest, OffsetsRecord

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


# ---- formats --------------------------------------------------------------------------------


def test_keys_round_trip_with_kafka_record_types() -> None:
    for t in (3, 4, 6):
        k = rec.encode_consumer_group_key(t, "grp")
        assert k[:2] == t.to_bytes(2, "big")
        assert rec.decode_consumer_group_key(k) == rec.ConsumerGroupKey(t, "grp")
    for t in (5, 7, 8):
        k = rec.encode_consumer_group_key(t, "grp", "m-1")
        assert rec.decode_consumer_group_key(k) == rec.ConsumerGroupKey(t, "grp", "m-1")
    assert rec.decode_consumer_group_key(rec.encode_group_metadata_key("grp")) is None
    with pytest.raises(ValueError):
        rec.encode_consumer_group_key(5, "grp")  # a member record needs a member id
    with pytest.raises(KafkaError):
        rec.decode_consumer_group_key(rec.encode_consumer_group_key(3, "grp") + b"x")


def test_group_metadata_value_bytes_are_kafkas() -> None:
    # version 0, Epoch int32, empty tagged fields
    assert rec.encode_consumer_group_metadata_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    assert rec.decode_consumer_group_metadata_value(b"\x00\x00\x00\x00\x00\x07\x00") == 7
    # a tagged field Skiff does not use (MetadataHash, tag 0) is skipped
    tagged = b"\x00\x00\x00\x00\x00\x07" + b"\x01\x00\x08" + bytes(8)
    assert rec.decode_consumer_group_metadata_value(tagged) == 7


def test_member_metadata_round_trip() -> None:
    v = rec.ConsumerGroupMemberMetadataValue("inst", None, "client", "/127.0.0.1",
                                             ("a", "b"), "^x.*", 45000, "uniform")
    b = rec.encode_consumer_group_member_metadata_value(v)
    assert rec.decode_consumer_group_member_metadata_value(b) == v
    with pytest.raises(KafkaError):
        rec.decode_consumer_group_member_metadata_value(b[:-3])


def test_assignment_values_round_trip() -> None:
    cur = rec.ConsumerGroupCurrentMemberAssignmentValue(
        5, 4, 1, ((T1, (0, 2)), (T2, (1,))), ((T1, (1,)),))
    b = rec.encode_consumer_group_current_member_assignment_value(cur)
    assert b[:2] == b"\x00\x00" and b[2:6] == b"\x00\x00\x00\x05" and b[10] == 1
    assert rec.decode_consumer_group_current_member_assignment_value(b) == cur
    target = ((T1, (0, 1, 2)),)
    tb = rec.encode_consumer_group_target_assignment_member_value(target)
    assert rec.decode_consumer_group_target_assignment_member_value(tb) == target
    assert rec.decode_consumer_group_target_assignment_metadata_value(
        rec.encode_consumer_group_target_assignment_metadata_value(9)) == 9
    topics = (rec.ConsumerGroupTopicMetadata(T1, "a", 6),)
    pb = rec.encode_consumer_group_partition_metadata_value(topics)
    assert rec.decode_consumer_group_partition_metadata_value(pb) == topics


def test_corrupt_values_are_rejected_not_allocated() -> None:
    huge_array = b"\x00\x00" + b"\xff\xff\xff\x7f"  # ~268M topics claimed in a 6-byte value
    with pytest.raises(KafkaError):
        rec.decode_consumer_group_target_assignment_member_value(huge_array)
    with pytest.raises(KafkaError):
        rec.decode_consumer_group_metadata_value(b"\x00\x01\x00\x00\x00\x01\x00")  # version 1
    with pytest.raises(KafkaError):
        rec.decode_consumer_group_metadata_value(b"\x00\x00\x00\x00\x00\x01\x00\x00")


# ---- writes and replay -----------------------------------------------------------------------


class Journal:
    """Everything the coordinator asked to write, in order, as the log would hold it."""

    def __init__(self, c: Consumers) -> None:
        self.c = c
        self.records: list[OffsetsRecord] = []

    def drain(self) -> int:
        fx = self.c.coord.take_effects()
        n = 0
        for w in fx.writes:
            self.records.extend(w.records)
            n += len(w.records)
            self.c.coord.write_completed(w.write_id, E.none, self.c.now)
        return n

    def commit(self, member: str) -> ErrorCode:
        c = self.c
        fx = c.coord.commit_offsets(1, OffsetCommitRequest(
            group_id="g", generation_id=c.epoch[member], member_id=member,
            group_instance_id=None, partitions=(CommitPartition("a", 0, 10),)), c.now)
        for w in fx.writes:
            self.records.extend(w.records)
            fx.extend(c.coord.write_completed(w.write_id, E.none, c.now))
        return fx.replies[0].result.errors()[("a", 0)]  # type: ignore[no-any-return]

    def tick(self) -> None:
        fx = self.c.coord.tick(self.c.now)
        for w in fx.writes:
            self.records.extend(w.records)
            self.c.coord.write_completed(w.write_id, E.none, self.c.now)

    def reload(self, now_ms: int) -> GroupCoordinator:
        fresh = GroupCoordinator(self.c.config, random.Random(9), now_ms)
        for r in self.records:
            fresh.replay(r.key, r.value)
        fresh.finish_loading(now_ms)
        return fresh


def _state(coord: GroupCoordinator, gid: str = "g") -> tuple[object, ...]:
    g = coord.consumer_groups[gid]
    members = {mid: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned,
                     m.pending_revocation, m.instance_id, m.subscribed_names, m.client_id,
                     m.rebalance_timeout_ms, m.left_temporarily)
               for mid, m in g.members.items()}
    return (g.group_epoch, g.assignment_epoch, g.target, g.metadata_fingerprint, members,
            g.static_members, g.assignor if g.members else None)


def test_replay_rebuilds_members_epochs_and_assignments_mid_reconciliation() -> None:
    c = Consumers(image(a=6))
    j = Journal(c)
    a = c.join(instance="i-a")
    b = c.join()
    c.settle([a, b])
    x = c.join()
    c.hb(a)  # a must revoke: UnrevokedPartitions, not yet acknowledged
    j.drain()
    assert c.group().members[a].state is MemberState.UNREVOKED_PARTITIONS
    fresh = j.reload(c.now + 50)
    c.coord.consumer_groups["g"].assignor = fresh.consumer_groups["g"].assignor
    assert _state(fresh) == _state(c.coord)
    # the members carry on against the reloaded coordinator with the epochs they hold
    c.coord = fresh
    j.c = c
    c.settle([a, b, x])
    for m in (a, b, x):
        assert c.hb(m).error is E.none
    assert c.group().group_epoch == c.group().assignment_epoch
    no_double_ownership(c)
    assert sum(len(ps) for o in c.owned.values() for ps in o.values()) == 6


def test_an_unchanged_heartbeat_writes_nothing_and_a_change_writes_only_what_changed() -> None:
    c = Consumers(image(a=2))
    j = Journal(c)
    a = c.join()
    c.settle([a])
    j.drain()
    c.hb(a)
    assert j.drain() == 0
    b = c.join()
    assert b
    written = j.records[-10:]
    types = {int.from_bytes(r.key[:2], "big") for r in written}
    assert {3, 5} <= types  # the group epoch moved and b's metadata is new


def test_leave_and_expiry_write_tombstones_that_replay_removes() -> None:
    c = Consumers(image(a=4))
    j = Journal(c)
    a = c.join()
    b = c.join()
    c.settle([a, b])
    c.hb(b, -1)
    j.drain()
    member_keys = [r.key for r in j.records[-8:] if r.value is None]
    assert {int.from_bytes(k[:2], "big") for k in member_keys} == {5, 7, 8}
    fresh = j.reload(c.now)
    assert set(fresh.consumer_groups["g"].members) == {a}
    c.now += 10_000  # a's session ends
    j.tick()
    fresh = j.reload(c.now)
    assert fresh.consumer_groups["g"].members == {}


def test_delete_group_tombstones_everything() -> None:
    c = Consumers(image(a=1))
    j = Journal(c)
    a = c.join()
    assert j.commit(a) is E.none
    c.hb(a, -1)
    j.drain()
    assert "g" in j.reload(c.now).consumer_groups
    assert j.reload(c.now).consumer_groups["g"].offsets
    fx = c.coord.delete_groups(1, ["g"], c.now)
    for w in fx.writes:
        j.records.extend(w.records)
    fresh = j.reload(c.now)
    assert "g" not in fresh.consumer_groups and "g" not in fresh.groups


def test_offsets_replayed_before_the_group_records_belong_to_the_consumer_group() -> None:
    c = Consumers(image(a=1))
    j = Journal(c)
    a = c.join()
    assert j.commit(a) is E.none
    j.drain()
    offsets = [r for r in j.records if r.key[:2] == b"\x00\x01"]
    assert offsets, "the commit was not journalled"
    others = [r for r in j.records if r.key[:2] != b"\x00\x01"]
    j.records = offsets + others
    fresh = j.reload(c.now)
    assert "g" not in fresh.groups
    assert set(fresh.consumer_groups["g"].offsets) == {("a", 0)}


def test_reloaded_members_get_a_full_session_from_the_load() -> None:
    c = Consumers(image(a=2))
    j = Journal(c)
    a = c.join()
    j.drain()
    load_at = c.now + 9_000  # a would have had 1 s left on the old coordinator
    fresh = j.reload(load_at)
    fresh.tick(load_at + 9_999)
    assert a in fresh.consumer_groups["g"].members
    fresh.tick(load_at + 10_000)
    assert a not in fresh.consumer_groups["g"].members


def test_static_member_temporary_leave_survives_reload() -> None:
    c = Consumers(image(a=4))
    j = Journal(c)
    a = c.join(instance="i-a")
    b = c.join(instance="i-b")
    c.settle([a, b])
    before = c.owned[a]
    c.hb(a, -2, instance="i-a")
    j.drain()
    fresh = j.reload(c.now)
    assert fresh.consumer_groups["g"].members[a].left_temporarily
    c.coord = fresh
    r = c.hb("a-again", 0, topics=("a",), instance="i-a")
    assert r.error is E.none and dict(r.assignment or ()) == before


def test_group_records_describe_the_whole_group() -> None:
    c = Consumers(image(a=3))
    a = c.join()
    c.settle([a])
    recs = group_records(c.group())
    types = sorted(int.from_bytes(k[:2], "big") for k in recs)
    assert types == [3, 4, 5, 6, 7, 8]


def test_a_stable_group_reloaded_keeps_its_epochs_on_the_next_heartbeats() -> None:
    c = Consumers(image(a=4, b=2))
    j = Journal(c)
    a = c.join(topics=("a", "b"))
    b = c.join(topics=("a", "b"))
    c.settle([a, b])
    j.drain()
    g = c.group()
    epochs = (g.group_epoch, g.assignment_epoch, c.epoch[a], c.epoch[b])
    owned = dict(c.owned)
    c.coord = j.reload(c.now)
    for m in (a, b):
        r = c.hb(m)
        assert r.error is E.none and r.member_epoch == c.epoch[m]
    g = c.group()
    # the topic metadata fingerprint came back too: no epoch bump, no new assignment
    assert (g.group_epoch, g.assignment_epoch, c.epoch[a], c.epoch[b]) == epochs
    assert c.owned == owned


def test_conversions_between_protocols_survive_a_reload() -> None:
    from broker.group.coordinator import GroupState
    from broker.group.types import JoinGroupRequest

    c = Consumers(image(a=1))
    j = Journal(c)
    # a classic group with a GroupMetadataValue (it had a generation), then empty
    fx = c.coord.join_group(1, JoinGroupRequest(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),),
        require_known_member_id=False), c.now)
    assert not fx.writes
    for _ in range(3):  # the initial delay, the join, then the member's session runs out
        c.now += 10_000
        j.tick()
    classic = c.coord.groups["g"]
    assert classic.state is GroupState.EMPTY and classic.generation_id > 0
    assert any(r.key == rec.encode_group_metadata_key("g") and r.value for r in j.records)
    # a KIP-848 member takes the group over: the classic record is tombstoned
    a = c.join()
    j.drain()
    assert any(r.key == rec.encode_group_metadata_key("g") and r.value is None
               for r in j.records)
    fresh = j.reload(c.now)
    assert "g" not in fresh.groups and a in fresh.consumer_groups["g"].members
    # it leaves; a classic member takes it back: the KIP-848 records are tombstoned
    c.hb(a, -1)
    j.drain()
    fx = c.coord.join_group(2, JoinGroupRequest(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),),
        require_known_member_id=False), c.now)
    for w in fx.writes:
        j.records.extend(w.records)
    j.drain()
    fresh = j.reload(c.now)
    assert "g" not in fresh.consumer_groups


def test_a_target_record_alone_does_not_make_a_member() -> None:
    coord = GroupCoordinator(Consumers(image(a=1)).config, random.Random(1), 0)
    coord.replay(rec.encode_consumer_group_key(3, "g"), rec.encode_consumer_group_metadata_value(4))
    coord.replay(rec.encode_consumer_group_key(7, "g", "ghost"),
                 rec.encode_consumer_group_target_assignment_member_value(((T1, (0,)),)))
    coord.finish_loading(0)
    g = coord.consumer_groups["g"]
    assert g.members == {} and g.target == {"ghost": {T1: frozenset({0})}}
    assert g.group_epoch == 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "static", "hb", "hb", "hb", "nack", "leave",
                                           "static-leave", "tick", "grow"]),
                          st.integers(0, 4)), max_size=50))
def test_random_histories_reload_into_the_same_state(ops: list[tuple[str, int]]) -> None:
    c = Consumers(image(a=6))
    j = Journal(c)
    members: list[str] = []
    n_static = 0
    for op, k in ops:
        live = [m for m in members if m in c.group().members] if "g" in \
            c.coord.consumer_groups else []
        if op == "join" and len(live) < 5:
            members.append(c.join())
        elif op == "static" and len(live) < 5:
            n_static += 1
            members.append(c.join(instance=f"i{n_static}"))
        elif op in ("hb", "nack") and live:
            c.hb(live[k % len(live)], owned=op == "hb")
        elif op == "leave" and live:
            c.hb(live[k % len(live)], -1)
        elif op == "static-leave" and live:
            m = c.group().members[live[k % len(live)]]
            if m.instance_id is not None:
                c.hb(m.member_id, -2, instance=m.instance_id)
        elif op == "tick":
            c.now += 3000
            j.tick()
        elif op == "grow":
            c.img = image(a=6 + k)
        j.drain()
        if "g" in c.coord.consumer_groups:
            fresh = j.reload(c.now)
            c.group().assignor = fresh.consumer_groups["g"].assignor
            assert _state(fresh) == _state(c.coord)


def test_a_failed_write_is_written_again_by_the_next_diff() -> None:
    c = Consumers(image(a=2))
    j = Journal(c)
    a = c.join()
    b = c.join()
    c.settle([a, b])
    j.drain()
    c.hb(b, -1)  # b leaves: its tombstones and the new group epoch ...
    fx = c.coord.take_effects()
    lost = [r for w in fx.writes for r in w.records]
    assert any(r.value is None for r in lost)
    for w in fx.writes:  # ... never reach the log
        c.coord.write_completed(w.write_id, E.not_enough_replicas, c.now)
    c.settle([a])  # a's heartbeats: new target, a full diff rewrites what was lost
    j.drain()
    fresh = j.reload(c.now)
    assert set(fresh.consumer_groups["g"].members) == {a}
    c.group().assignor = fresh.consumer_groups["g"].assignor
    assert _state(fresh) == _state(c.coord)
