"""KIP-848 consumer groups in the pure coordinator: assignors, epochs, reconciliation, timers."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest
from grouphelpers import START_MS
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.group.consumer import (
    AssignorMember,
    ConsumerGroupState,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    MemberState,
    range_assign,
    uniform_assign,
)
from broker.group.coordinator import GroupCoordinator, GroupState
from broker.group.types import CommitPartition, GroupConfig, JoinGroupRequest, OffsetCommitRequest
from broker.metadata.image import MetadataImage, PartitionRegistration, TopicImage

E = ErrorCode
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def image(**topics: int) -> MetadataImage:
    by_id, by_name = {}, {}
    for n, (name, count) in enumerate(sorted(topics.items()), start=1):
        t = TopicImage(name, uuid.UUID(int=n), {
            i: PartitionRegistration(replicas=(1,), isr=(1,), leader=1) for i in range(count)})
        by_id[t.topic_id] = t
        by_name[name] = t
    return MetadataImage(topics_by_id=by_id, topics_by_name=by_name)


class Consumers:
    def __init__(self, img: MetadataImage, **config: object) -> None:
        self.img = img
        self.now = START_MS
        # assignment batching off, as Kafka runs most of its own group tests; the tests of
        # consumer.assignment.interval.ms set it
        self.config = replace(GroupConfig(consumer_session_timeout_ms=10_000,
                                          consumer_heartbeat_interval_ms=1000,
                                          consumer_assignment_interval_ms=0), **config)
        self.coord = GroupCoordinator(self.config, random.Random(5), self.now)
        # the client side: member id -> (epoch, owned assignment)
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {}

    def hb(self, member: str = "", epoch: int | None = None, *, group: str = "g",
           topics: tuple[str, ...] | None = None, regex: str | None = None,
           instance: str | None = None, assignor: str | None = None,
           owned: bool = True, rebalance_ms: int = 5000) -> ConsumerHeartbeatResult:
        ep = self.epoch.get(member, 0) if epoch is None else epoch
        own = None
        if owned and member in self.owned:
            own = tuple(self.owned[member].items())
        if ep == 0:
            own = ()
        r = self.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=ep, instance_id=instance,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor=assignor,
            owned_partitions=own, client_id="c", client_host="/h",
        ), self.img, self.now)
        if r.error is E.none and r.member_id:
            self.epoch[r.member_id] = r.member_epoch
            if r.assignment is not None:
                self.owned[r.member_id] = dict(r.assignment)
        return r

    def join(self, topics: tuple[str, ...] = ("a",), **kw: object) -> str:
        r = self.hb("", 0, topics=topics, **kw)  # type: ignore[arg-type]
        assert r.error is E.none, r
        assert r.member_id
        return r.member_id

    def owned_sets(self) -> dict[str, set[tuple[uuid.UUID, int]]]:
        return {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in self.owned.items()}

    def settle(self, members: list[str], rounds: int = 10) -> None:
        for _ in range(rounds):
            for m in members:
                self.hb(m)

    def group(self, gid: str = "g"):  # type: ignore[no-untyped-def]
        return self.coord.consumer_groups[gid]


def no_double_ownership(c: Consumers) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m, parts in c.owned_sets().items():
        if m not in c.group().members:
            continue
        for tp in parts:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m}"
            seen[tp] = m


# ---- assignors -------------------------------------------------------------------------------


def test_range_assignor_contiguous_ranges_per_topic() -> None:
    members = [AssignorMember(m, frozenset({T1, T2}), {}) for m in ("b", "a", "c")]
    out = range_assign(members, {T1: 7, T2: 2})
    assert out["a"][T1] == frozenset({0, 1, 2})
    assert out["b"][T1] == frozenset({3, 4})
    assert out["c"][T1] == frozenset({5, 6})
    assert out["a"][T2] == frozenset({0}) and out["b"][T2] == frozenset({1})
    assert T2 not in out["c"]


def test_uniform_assignor_is_balanced_and_sticky() -> None:
    first = uniform_assign([AssignorMember(m, frozenset({T1}), {}) for m in "ab"], {T1: 6})
    assert sorted(len(a[T1]) for a in first.values()) == [3, 3]
    # a third member joins: each old member gives up exactly one partition
    second = uniform_assign([AssignorMember("a", frozenset({T1}), first["a"]),
                             AssignorMember("b", frozenset({T1}), first["b"]),
                             AssignorMember("c", frozenset({T1}), {})], {T1: 6})
    assert all(len(second[m][T1]) == 2 for m in "abc")
    assert second["a"][T1] <= first["a"][T1] and second["b"][T1] <= first["b"][T1]


def test_uniform_assignor_heterogeneous_subscriptions() -> None:
    members = [AssignorMember("a", frozenset({T1}), {}),
               AssignorMember("b", frozenset({T1, T2}), {})]
    out = uniform_assign(members, {T1: 2, T2: 2})
    assert out["b"].get(T2) == frozenset({0, 1})
    assert T2 not in out["a"]
    total = sum(len(ps) for a in out.values() for ps in a.values())
    assert total == 4 and len(out["a"].get(T1, ())) >= 1


@given(st.lists(st.frozensets(st.sampled_from([T1, T2]), min_size=1), min_size=1, max_size=6),
       st.integers(0, 12), st.integers(0, 12), st.sampled_from(["uniform", "range"]))
def test_assignors_cover_each_subscribed_partition_exactly_once(
        subs: list[frozenset[uuid.UUID]], n1: int, n2: int, name: str) -> None:
    members = [AssignorMember(f"m{i}", s, {}) for i, s in enumerate(subs)]
    counts = {T1: n1, T2: n2}
    out = (uniform_assign if name == "uniform" else range_assign)(members, counts)
    owned: dict[tuple[uuid.UUID, int], str] = {}
    for m in members:
        for t, ps in out[m.member_id].items():
            assert t in m.topics
            for p in ps:
                assert (t, p) not in owned
                owned[(t, p)] = m.member_id
    wanted = {(t, p) for t in (T1, T2) if any(t in s for s in subs) for p in range(counts[t])}
    assert set(owned) == wanted
    if name == "uniform" and len({m.topics for m in members}) == 1:
        sizes = [sum(len(ps) for ps in out[m.member_id].values()) for m in members]
        assert max(sizes) - min(sizes) <= 1


# ---- heartbeat validation --------------------------------------------------------------------


def test_first_heartbeat_validation() -> None:
    c = Consumers(image(a=2))
    assert c.hb("", 0, group="").error is E.invalid_request
    r = c.coord.consumer_heartbeat(ConsumerHeartbeatRequest("g", "", 0, rebalance_timeout_ms=1),
                                   c.img, c.now)
    assert r.error is E.invalid_request  # no subscription in the first request
    assert c.hb("", 0, topics=("a",), assignor="sticky").error is E.unsupported_assignor
    assert c.hb("x", 3).error is E.unknown_member_id  # unknown group, not a join


def test_single_member_gets_everything_with_epoch_1() -> None:
    c = Consumers(image(a=3))
    r = c.hb("", 0, topics=("a",))
    assert r.error is E.none and r.member_epoch == 1 and r.heartbeat_interval_ms == 1000
    assert r.assignment == ((uuid.UUID(int=1), (0, 1, 2)),)
    assert c.group().state is ConsumerGroupState.STABLE
    # until the member reports owning it, the assignment is repeated (an answer may be lost)
    assert c.hb(r.member_id or "", owned=False).assignment == r.assignment
    c.hb(r.member_id or "")  # reports its owned partitions
    again = c.hb(r.member_id or "", owned=False)
    assert again.assignment is None  # unchanged and acknowledged: not repeated


def test_client_chosen_member_id_v1_is_kept() -> None:
    c = Consumers(image(a=1))
    r = c.hb("my-uuid", 0, topics=("a",))
    assert r.member_id == "my-uuid"


def test_second_member_gets_partitions_only_after_first_revokes() -> None:
    c = Consumers(image(a=4))
    a = c.join()
    b = c.join()
    # b is at the new epoch but its partitions are still owned by a
    gb = c.group().members[b]
    assert gb.state is MemberState.UNRELEASED_PARTITIONS and c.owned[b] == {}
    assert c.epoch[b] == 2
    # a learns it must give up two partitions; epoch unchanged until it acknowledges
    r = c.hb(a, owned=False)
    assert c.group().members[a].state is MemberState.UNREVOKED_PARTITIONS
    assert r.member_epoch == 1 and r.assignment is not None
    assert sum(len(ps) for _, ps in r.assignment) == 2
    no_double_ownership(c)
    c.hb(a)  # reports owned partitions without the revoked ones
    assert c.epoch[a] == 2
    c.hb(b)
    assert sum(len(ps) for ps in c.owned[b].values()) == 2
    assert c.group().state is ConsumerGroupState.STABLE
    no_double_ownership(c)
    # two group epochs, two target assignments: Kafka's consumer-group-rebalance-count
    assert c.coord.consumer_rebalances == 2
    c.hb(a)
    assert c.coord.consumer_rebalances == 2  # a heartbeat without change: no rebalance


def test_member_epoch_fencing() -> None:
    c = Consumers(image(a=2))
    a = c.join()
    assert c.hb(a, 5).error is E.fenced_member_epoch
    c.join()
    c.settle([a], 3)
    cur = c.epoch[a]
    prev = c.group().members[a].previous_member_epoch
    # a lost response: the previous epoch with owned ⊆ assigned is accepted
    ok = c.hb(a, prev)
    assert ok.error is E.none and ok.member_epoch == cur
    assert c.hb(a, prev, owned=False).error is E.fenced_member_epoch
    assert c.hb(a, 0, topics=("a",)).error is E.none  # rejoin resets it


def test_leave_and_session_timeout_free_partitions() -> None:
    c = Consumers(image(a=4))
    a, b = c.join(), c.join()
    c.settle([a, b])
    r = c.hb(a, -1)
    assert r.member_epoch == -1 and a not in c.group().members
    c.settle([b])
    assert sum(len(ps) for ps in c.owned[b].values()) == 4
    c.now += 9_999
    c.coord.tick(c.now)
    assert b in c.group().members
    c.now += 1
    c.coord.tick(c.now)
    assert c.group().members == {} and c.group().state is ConsumerGroupState.EMPTY


def test_revocation_timeout_removes_member() -> None:
    c = Consumers(image(a=4))
    a = c.join(rebalance_ms=3000)
    b = c.join()
    c.hb(a, owned=False, rebalance_ms=3000)  # told to revoke, never acknowledges
    assert c.group().members[a].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):
        c.now += 1000
        c.hb(b)
        c.coord.tick(c.now)
    assert a not in c.group().members
    c.hb(b)
    assert sum(len(ps) for ps in c.owned[b].values()) == 4


def test_subscription_change_and_new_topic_bump_group_epoch() -> None:
    c = Consumers(image(a=1))
    a = c.join(topics=("a", "later"))
    epoch = c.group().group_epoch
    c.img = image(a=1, later=2)
    r = c.hb(a)
    assert c.group().group_epoch == epoch + 1
    assert r.assignment is not None and len(r.assignment) == 2
    c.hb(a, topics=("later",))
    c.hb(a)
    c.hb(a)
    assert {t for t in c.owned[a]} == {uuid.UUID(int=2)}


def test_regex_subscription() -> None:
    c = Consumers(image(**{"orders-1": 1, "orders-2": 1, "other": 1, "__internal": 1}))
    a = c.hb("", 0, regex="orders-.*").member_id or ""
    assert {t.int for t in c.owned[a]} == {2, 3}  # sorted names: __internal, orders-1, ...
    assert c.hb("", 0, regex="orders-(").error is E.invalid_regular_expression
    assert c.hb("", 0, regex="a" * 1001).error is E.invalid_regular_expression


def test_static_member_temporary_leave_and_rejoin_keeps_assignment() -> None:
    c = Consumers(image(a=4))
    a = c.join(instance="i-a")
    b = c.join(instance="i-b")
    c.settle([a, b])
    epoch = c.group().group_epoch
    before = c.owned[a]
    assert c.hb(a, -2, instance="i-a").member_epoch == -2
    assert c.hb("", 0, topics=("a",), instance="i-b").error is E.unreleased_instance_id
    r = c.hb("new-a", 0, topics=("a",), instance="i-a")
    assert r.error is E.none and r.member_id == "new-a"
    assert c.group().group_epoch == epoch  # no rebalance
    assert dict(r.assignment or ()) == before


def test_static_member_that_does_not_return_is_removed_after_session_timeout() -> None:
    c = Consumers(image(a=2))
    a = c.join(instance="i-a")
    c.hb(a, -2, instance="i-a")
    c.now += 10_000
    c.coord.tick(c.now)
    assert c.group().members == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "hb", "hb", "hb", "leave", "tick"]),
                          st.integers(0, 4)), max_size=60),
       st.sampled_from(["uniform", "range"]))
def test_random_heartbeat_orders_never_double_assign(
        ops: list[tuple[str, int]], assignor: str) -> None:
    c = Consumers(image(a=6))
    members: list[str] = []
    for op, k in ops:
        if op == "join" and len(members) < 5:
            members.append(c.join(assignor=assignor))
        elif op == "hb" and members:
            m = members[k % len(members)]
            if m in c.group().members:
                c.hb(m)
        elif op == "leave" and members:
            m = members.pop(k % len(members))
            c.hb(m, -1)
            c.owned.pop(m, None)
        elif op == "tick":
            c.now += 2000
            c.coord.tick(c.now)
            for m in list(members):
                if m not in c.group().members:
                    members.remove(m)
                    c.owned.pop(m, None)
        no_double_ownership(c)
    live = [m for m in members if m in c.group().members]
    c.settle(live, rounds=8)
    no_double_ownership(c)
    if live:
        assert sum(len(ps) for m in live for ps in c.owned[m].values()) == 6
        assert c.group().state is ConsumerGroupState.STABLE


# ---- offsets, listing and protocol conversion ------------------------------------------------


def _commit(c: Consumers, member: str, epoch: int, group: str = "g") -> ErrorCode:
    replies = []
    fx = c.coord.commit_offsets(1, OffsetCommitRequest(
        group_id=group, generation_id=epoch, member_id=member, group_instance_id=None,
        partitions=(CommitPartition("a", 0, 10),)), c.now)
    for w in fx.writes:
        fx.extend(c.coord.write_completed(w.write_id, E.none, c.now))
    replies = [r.result for r in fx.replies]
    return replies[0].errors()[("a", 0)]


def test_offset_commit_and_fetch_check_member_epoch() -> None:
    c = Consumers(image(a=1))
    a = c.join()
    assert _commit(c, a, c.epoch[a] + 1) is E.stale_member_epoch
    assert _commit(c, "ghost", 1) is E.unknown_member_id
    assert _commit(c, "", -1) is E.unknown_member_id  # group has members
    assert _commit(c, a, c.epoch[a]) is E.none
    assert c.coord.fetch_offsets("g", [("a", 0)]).partitions[0].offset == 10
    assert c.coord.fetch_offsets("g", [("a", 0)], a, 99).error is E.stale_member_epoch
    assert c.coord.fetch_offsets("g", [("a", 0)], "x", 1).error is E.unknown_member_id
    assert c.coord.fetch_offsets("g", [("a", 0)], a, c.epoch[a]).error is E.none


def test_list_and_describe_consumer_group() -> None:
    c = Consumers(image(a=2))
    a = c.join()
    [listed] = c.coord.list_groups()
    assert (listed.group_id, listed.group_type, listed.state, listed.protocol_type) == (
        "g", "consumer", "Stable", "consumer")
    assert c.coord.list_groups(types=["classic"]) == []
    d = c.coord.describe_consumer_group("g", c.img)
    assert d is not None and d.state == "Stable" and d.group_epoch == 1
    assert d.assignor_name == "uniform"
    [m] = d.members
    assert m.member_id == a and m.assignment == ((uuid.UUID(int=1), "a", (0, 1)),)
    assert m.target_assignment == m.assignment
    assert c.coord.describe_group("g") is None  # not a classic group


def test_empty_classic_group_with_offsets_becomes_consumer_group_and_back() -> None:
    c = Consumers(image(a=1))
    assert _commit(c, "", -1, group="g") is E.none  # a classic (manual) group with offsets
    assert c.coord.groups["g"].state is GroupState.EMPTY
    a = c.join()
    assert "g" not in c.coord.groups
    assert c.coord.fetch_offsets("g", [("a", 0)]).partitions[0].offset == 10
    fx = c.coord.join_group(7, JoinGroupRequest(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),)), c.now)
    assert fx.replies[0].result.error is E.inconsistent_group_protocol
    c.hb(a, -1)
    fx = c.coord.join_group(8, JoinGroupRequest(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),)), c.now)
    assert fx.replies[0].result.error is E.member_id_required
    assert c.coord.fetch_offsets("g", [("a", 0)]).partitions[0].offset == 10


def test_consumer_heartbeat_on_active_classic_group_is_refused() -> None:
    c = Consumers(image(a=1))
    c.coord.join_group(1, JoinGroupRequest("g", "", None, "c", "/h", 10_000, 10_000,
                                           "consumer", (("range", b""),), False), c.now)
    assert c.hb("", 0, topics=("a",)).error is E.group_id_not_found


def test_delete_and_expire_consumer_group() -> None:
    c = Consumers(image(a=1), offsets_retention_ms=50_000,
                  offsets_retention_check_interval_ms=1000)
    a = c.join()
    _commit(c, a, c.epoch[a])
    fx = c.coord.delete_groups(3, ["g"], c.now)
    assert dict(fx.replies[0].result) == {"g": E.non_empty_group}
    c.hb(a, -1)
    c.now += 49_000
    c.coord.tick(c.now)
    assert "g" in c.coord.consumer_groups
    c.now += 1_000
    fx = c.coord.tick(c.now)
    assert "g" not in c.coord.consumer_groups
    assert any(r.value is None for w in fx.writes for r in w.records)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_three_members_six_partitions_settle_balanced(assignor: str) -> None:
    c = Consumers(image(a=6))
    ms = [c.join(assignor=assignor) for _ in range(3)]
    c.settle(ms)
    assert sorted(sum(len(ps) for ps in c.owned[m].values()) for m in ms) == [2, 2, 2]
    assert c.group().state is ConsumerGroupState.STABLE
    d = c.coord.describe_consumer_group("g", c.img)
    assert d is not None and d.assignor_name == assignor


def _delete_offsets(c: Consumers, *tps: tuple[str, int]) -> dict[tuple[str, int], ErrorCode]:
    fx = c.coord.delete_offsets(9, "g", list(tps), c.now)
    for w in fx.writes:
        fx.extend(c.coord.write_completed(w.write_id, E.none, c.now))
    [reply] = fx.replies
    assert reply.result.error is E.none, reply.result
    return dict(reply.result.partitions)


def test_offset_delete_checks_only_the_current_members_subscriptions() -> None:
    """Kafka answers GROUP_SUBSCRIBED_TO_TOPIC only for a topic a current member subscribes
    to: once the last member left, the group's remembered metadata is no subscription."""
    c = Consumers(image(a=1, b=1, ra=1))
    a = c.join(("a",))
    r = c.join(("b",))
    assert _commit(c, a, c.epoch[a]) is E.none
    assert _delete_offsets(c, ("a", 0)) == {("a", 0): E.group_subscribed_to_topic}
    c.hb(r, -1)  # the member on "b" leaves: "b" is still in the metadata fingerprint
    assert _delete_offsets(c, ("b", 0)) == {("b", 0): E.none}
    c.hb(a, -1)  # the group is empty now
    assert c.group().state is ConsumerGroupState.EMPTY
    assert _delete_offsets(c, ("a", 0)) == {("a", 0): E.none}
    assert c.coord.fetch_offsets("g", [("a", 0)]).partitions[0].offset == -1
    # a regex member subscribes to the topics its pattern resolved to
    x = c.hb("", 0, topics=(), regex="r.*")
    assert x.error is E.none
    assert _delete_offsets(c, ("ra", 0), ("a", 0)) == {
        ("ra", 0): E.group_subscribed_to_topic, ("a", 0): E.none}


def test_a_groups_own_session_timeout_and_heartbeat_interval() -> None:
    """GROUP config resources (consumer.session.timeout.ms, consumer.heartbeat.interval.ms)
    override the broker's for that group only; an unreadable value falls back."""
    c = Consumers(image(a=2))
    overrides = {"short": {"consumer.session.timeout.ms": "2000",
                           "consumer.heartbeat.interval.ms": "700"},
                 "odd": {"consumer.session.timeout.ms": "x"}}
    c.coord.group_configs = lambda gid: overrides.get(gid, {})
    short = c.hb("", 0, group="short", topics=("a",))
    plain = c.hb("", 0, group="g", topics=("a",))
    odd = c.hb("", 0, group="odd", topics=("a",))
    assert (short.heartbeat_interval_ms, plain.heartbeat_interval_ms) == (700, 1000)
    c.now += 2_001
    c.coord.tick(c.now)
    assert c.coord.consumer_groups["short"].members == {}
    assert plain.member_id in c.group("g").members
    assert odd.member_id in c.group("odd").members  # the broker's 10 s


# ---- lost answers, as librdkafka (group.protocol=consumer) behaves ----------------------------


def _parts(a: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None) -> set[int]:
    return {p for _, ps in a or () for p in ps}


def test_a_revocation_whose_answer_was_lost_is_repeated() -> None:
    """The CI failure of test_groups_confluent_kip848::test_join_leave_kill, replayed: c owns
    0-2 (it revoked 3-5 for a), b joins, c's next heartbeat tells it to revoke one more
    partition and that answer is lost (librdkafka timed the request out after one heartbeat
    interval). librdkafka sends the heartbeat again as it was, without owned partitions, and
    sends owned partitions only to acknowledge an assignment it reconciled: unless the
    coordinator repeats the assignment, c never hears of the revocation, keeps the partition
    b's target holds, and the group stays unbalanced until c's rebalance timeout."""
    c = Consumers(image(a=6))
    c.hb("c", 0, topics=("a",))
    c.hb("c")  # acknowledges 0-5
    c.hb("a", 0, topics=("a",))
    r = c.hb("c", owned=False)
    assert _parts(r.assignment) == {0, 1, 2}
    c.hb("c")  # acknowledges 0-2: at the group epoch now
    assert c.group().members["c"].state is MemberState.STABLE and c.epoch["c"] == 2
    c.hb("b", 0, topics=("a",))
    target_c = {p for ps in c.group().target["c"].values() for p in ps}
    assert len(target_c) == 2
    # the answer that tells c to revoke is lost: the client state does not move
    lost = c.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
        group_id="g", member_id="c", member_epoch=c.epoch["c"]), c.img, c.now)
    assert lost.error is E.none and _parts(lost.assignment) == target_c
    assert c.group().members["c"].state is MemberState.UNREVOKED_PARTITIONS
    # librdkafka's retry: same epoch, no owned partitions
    again = c.hb("c", owned=False)
    assert again.error is E.none and _parts(again.assignment) == target_c
    c.hb("c")  # revokes and acknowledges
    c.settle(["a", "b", "c"])
    assert sorted(len(_parts(tuple(c.owned[m].items()))) for m in "abc") == [2, 2, 2]
    assert c.group().state is ConsumerGroupState.STABLE
    no_double_ownership(c)


def test_released_partitions_whose_answer_was_lost_are_repeated() -> None:
    """A member waiting for unreleased partitions gets them at the same epoch: if that answer
    is lost, nothing else would ever tell it (no epoch moved, no timer runs)."""
    c = Consumers(image(a=4))
    a = c.join()
    c.hb(a)
    b = c.join()
    c.hb(b)  # acknowledges its empty assignment: all of its target is still a's
    c.hb(a, owned=False)
    c.hb(a)  # a revokes
    lost = c.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
        group_id="g", member_id=b, member_epoch=c.epoch[b]), c.img, c.now)
    assert len(_parts(lost.assignment)) == 2 and lost.member_epoch == c.epoch[b]
    assert c.owned[b] == {}
    again = c.hb(b, owned=False)
    assert _parts(again.assignment) == _parts(lost.assignment)
    c.hb(b)
    assert c.hb(b, owned=False).assignment is None  # acknowledged: no longer repeated


def test_a_member_that_reports_not_owning_what_it_would_revoke_moves_on() -> None:
    """Kafka's ownsRevokedPartitions on a new revocation: owned partitions reported without
    those the new target takes away mean there is nothing to wait for."""
    c = Consumers(image(a=4))
    a = c.join()
    c.hb(a)
    b = c.join()
    keep = {p for ps in c.group().target[a].values() for p in ps}
    c.owned[a] = {T1: tuple(sorted(keep))}  # the client already gave the others up
    r = c.hb(a)
    m = c.group().members[a]
    assert m.state is MemberState.STABLE and r.member_epoch == c.group().assignment_epoch
    assert _parts(r.assignment) == keep and m.pending_revocation == {}
    c.hb(b)
    assert len(_parts(tuple(c.owned[b].items()))) == 2
    no_double_ownership(c)


class RdkafkaMember:
    """librdkafka's KIP-848 member, reduced to what the coordinator sees: owned partitions go
    out only to acknowledge a reconciled assignment (and on a join); an answer with an
    assignment different from the one held or being reconciled is reconciled at once; a lost
    answer leaves the state alone and the same request goes out again; FENCED_MEMBER_EPOCH or
    UNKNOWN_MEMBER_ID drop everything (lost) and rejoin with epoch 0."""

    def __init__(self, c: Consumers, member_id: str) -> None:
        self.c, self.member_id = c, member_id
        self.epoch = 0
        self.current: dict[uuid.UUID, tuple[int, ...]] = {}
        self.to_ack: dict[uuid.UUID, tuple[int, ...]] | None = None
        self.retry: ConsumerHeartbeatRequest | None = None

    def owns(self) -> dict[uuid.UUID, tuple[int, ...]]:
        return self.current if self.to_ack is None else self.to_ack

    def heartbeat(self, lose_answer: bool = False) -> None:
        req = self.retry
        if req is None:
            joining = self.epoch == 0
            owned = () if joining else (None if self.to_ack is None
                                         else tuple(self.to_ack.items()))
            req = ConsumerHeartbeatRequest(
                group_id="g", member_id=self.member_id, member_epoch=self.epoch,
                rebalance_timeout_ms=300_000 if joining else -1,
                subscribed_topic_names=("a",) if joining else None, owned_partitions=owned)
        r = self.c.coord.consumer_heartbeat(req, self.c.img, self.c.now)
        if lose_answer:
            self.retry = req
            return
        self.retry = None
        if r.error in (E.fenced_member_epoch, E.unknown_member_id):
            self.epoch, self.current, self.to_ack = 0, {}, None
            return
        assert r.error is E.none, r
        self.epoch = r.member_epoch
        if req.owned_partitions and self.to_ack is not None \
                and tuple(self.to_ack.items()) == req.owned_partitions:
            self.current, self.to_ack = self.to_ack, None  # acknowledged
        if r.assignment is not None and dict(r.assignment) != self.owns():
            self.to_ack = dict(r.assignment)  # revoke, then assign, then acknowledge


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "hb", "hb", "hb", "lost", "leave"]),
                          st.integers(0, 4)), max_size=60))
# the answer that tells m0 to revoke for m1 is lost
@example([("join", 0), ("hb", 0), ("join", 1), ("lost", 0)])
# the answer that gives m1 its released partitions is lost
@example([("join", 0), ("hb", 0), ("join", 1), ("hb", 1), ("hb", 0), ("hb", 0), ("lost", 1)])
def test_librdkafka_members_converge_after_lost_answers(ops: list[tuple[str, int]]) -> None:
    """Whatever answers are lost on the way, once they get through again the group settles
    balanced within a few heartbeats, no partition owned twice, with no timer needed."""
    c = Consumers(image(a=6))
    members: list[RdkafkaMember] = []
    joined = 0

    def check() -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for m in members:
            for t, ps in m.owns().items():
                for p in ps:
                    assert (t, p) not in seen, f"{p} owned by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id

    for op, k in ops:
        if op == "join" and len(members) < 4:
            joined += 1
            members.append(RdkafkaMember(c, f"m{joined}"))
            members[-1].heartbeat()
        elif op in ("hb", "lost") and members:
            members[k % len(members)].heartbeat(lose_answer=op == "lost")
        elif op == "leave" and members:
            m = members.pop(k % len(members))
            c.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
                group_id="g", member_id=m.member_id, member_epoch=-1), c.img, c.now)
        check()
    for _ in range(8):
        for m in members:
            m.heartbeat()
        check()
    if members:
        counts = sorted(sum(len(ps) for ps in m.owns().values()) for m in members)
        assert sum(counts) == 6 and counts[-1] - counts[0] <= 1, counts
        assert c.group().state is ConsumerGroupState.STABLE
