"""KIP-1071 streams groups in the pure coordinator: topology configuration, the sticky task
assignor, epochs, reconciliation (revoke before another member gets a task), timers."""

from __future__ import annotations

from dataclasses import replace

from grouphelpers import START_MS, Driver
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.group.streams import (
    ASSIGNMENT_DELAYED,
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    STALE_TOPOLOGY,
    AssignorMember,
    MemberState,
    StreamsGroupState,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
    Subtopology,
    Tasks,
    TopicInfo,
    Topology,
    configure,
    sticky_assign,
)

E = ErrorCode
# the word-count shape of tests/java StreamsApp: input -> repartition -> counts (changelog)
TOPOLOGY = Topology(1, (
    Subtopology("0", source_topics=("input",), repartition_sink_topics=("app-rep",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("app-rep"),),
                state_changelog_topics=(TopicInfo("app-changelog",
                                                  configs=(("cleanup.policy", "compact"),)),)),
))
ALL_TASKS = {("0", p) for p in range(3)} | {("1", p) for p in range(3)}


class Streams:
    """The coordinator and well-behaved clients: each member revokes what it is told to
    drop and reports what it owns on its next heartbeat."""

    def __init__(self, topics: dict[str, int] | None = None, **config: object) -> None:
        config.setdefault("streams_initial_rebalance_delay_ms", 0)
        # assignment batching off, as Kafka runs most of its own group tests; the tests of
        # streams.assignment.interval.ms set it
        config.setdefault("streams_assignment_interval_ms", 0)
        self.d = Driver(streams_session_timeout_ms=10_000, streams_heartbeat_interval_ms=1000,
                        **config)
        self.topics = dict(topics if topics is not None else
                           {"input": 3, "app-rep": 3, "app-changelog": 3})
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, Tasks] = {}

    @property
    def coord(self):  # type: ignore[no-untyped-def]
        return self.d.coord

    def group(self):  # type: ignore[no-untyped-def]
        return self.coord.streams_groups["g"]

    def hb(self, member: str, epoch: int | None = None, *, process: str | None = None,
           topology: Topology | None = TOPOLOGY, report: bool = True,
           shutdown: bool = False, instance: str | None = None,
           offsets: tuple[tuple[str, int, int], ...] | None = None,
           end_offsets: tuple[tuple[str, int, int], ...] | None = None,
           tags: tuple[tuple[str, str], ...] | None = None) -> StreamsHeartbeatResult:
        ep = self.epoch.get(member, 0) if epoch is None else epoch
        joining = ep == 0
        r = self.coord.streams_heartbeat(StreamsHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=ep,
            rebalance_timeout_ms=30_000 if joining else -1,
            topology=topology if joining else None,
            process_id=(process or f"p-{member}") if joining else None,
            owned=self.owned.get(member, Tasks()) if report and not joining else None,
            shutdown_application=shutdown, instance_id=instance,
            task_offsets=offsets, task_end_offsets=end_offsets,
            client_tags=tags if joining else None,
        ), lambda n: self.topics.get(n), self.d.now)
        if r.error is E.none and r.member_epoch >= 0:
            self.epoch[member] = r.member_epoch
            if r.assignment is not None:
                self.owned[member] = r.assignment
        return r

    def settle(self, *members: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in members:
                self.hb(m)

    def active(self, member: str) -> set[tuple[str, int]]:
        return set(self.owned.get(member, Tasks()).active)


def test_configure_infers_partition_counts_and_missing_topics() -> None:
    c = configure(TOPOLOGY, {"input": 4}.get)
    assert c.tasks == {"0": 4, "1": 4}
    assert c.status[0][0] == MISSING_INTERNAL_TOPICS
    assert {(t.name, t.partitions) for t in c.to_create} == {("app-rep", 4),
                                                             ("app-changelog", 4)}
    assert dict(next(t for t in c.to_create if t.name == "app-changelog").configs) == {
        "cleanup.policy": "compact"}
    assert configure(TOPOLOGY, {}.get).status[0][0] == MISSING_SOURCE_TOPICS
    wrong = configure(TOPOLOGY, {"input": 4, "app-rep": 4, "app-changelog": 2}.get)
    assert wrong.status[0][0] == INCORRECTLY_PARTITIONED_TOPICS
    ok = configure(TOPOLOGY, {"input": 4, "app-rep": 4, "app-changelog": 4}.get)
    assert ok.ready and ok.tasks == {"0": 4, "1": 4}


def test_copartitioned_source_topics_must_match() -> None:
    t = Topology(1, (Subtopology("0", source_topics=("a", "b"),
                                 copartition_groups=(((0, 1), ()),)),))
    assert configure(t, {"a": 2, "b": 2}.get).ready
    assert configure(t, {"a": 2, "b": 3}.get).status[0][0] == INCORRECTLY_PARTITIONED_TOPICS


def test_missing_internal_topics_then_assignment_once_created() -> None:
    s = Streams({"input": 3})
    r = s.hb("a")
    assert r.error is E.none and r.member_epoch == 1
    assert [c for c, _ in r.status or ()] == [MISSING_INTERNAL_TOPICS]
    assert {t.name for t in r.to_create} == {"app-rep", "app-changelog"}
    assert r.assignment == Tasks() and s.group().state is StreamsGroupState.NOT_READY
    s.topics.update({"app-rep": 3, "app-changelog": 3})
    r = s.hb("a")
    assert r.status == () and r.member_epoch == 2
    assert r.assignment is not None and set(r.assignment.active) == ALL_TASKS
    assert s.group().state is StreamsGroupState.STABLE


def test_second_member_gets_tasks_only_after_revocation() -> None:
    s = Streams()
    s.hb("a")
    assert s.active("a") == ALL_TASKS
    b = s.hb("b")
    assert b.member_epoch == 2 and b.assignment == Tasks()
    g = s.group()
    assert len(g.target["a"].active) == 3 and len(g.target["b"].active) == 3
    # a has not revoked yet: b's tasks are unreleased
    assert g.members["b"].state is MemberState.UNRELEASED_TASKS
    a = s.hb("a", report=False)  # told to revoke, epoch unchanged
    assert a.member_epoch == 1 and len(a.assignment.active) == 3  # type: ignore[union-attr]
    assert g.members["a"].state is MemberState.UNREVOKED_TASKS
    assert s.hb("b").assignment is None or s.active("b") == set()
    a = s.hb("a")  # reports the 3 it kept: revocation done
    assert a.member_epoch == 2 and g.members["a"].state is MemberState.STABLE
    s.hb("b")
    assert s.active("a") | s.active("b") == ALL_TASKS and not s.active("a") & s.active("b")
    assert g.state is StreamsGroupState.STABLE


def test_killed_member_tasks_move_after_session_timeout_and_stay_sticky() -> None:
    s = Streams()
    for m in "abc":
        s.hb(m)
    s.settle("a", "b", "c")
    before = {m: s.active(m) for m in "abc"}
    assert all(len(v) == 2 for v in before.values())
    for _ in range(12):  # c is gone: only a and b heartbeat
        s.d.advance(1000)
        s.hb("a")
        s.hb("b")
    assert "c" not in s.group().members
    s.settle("a", "b")
    assert s.active("a") >= before["a"] and s.active("b") >= before["b"]
    assert s.active("a") | s.active("b") == ALL_TASKS
    assert {len(s.active("a")), len(s.active("b"))} == {3}


def test_leave_moves_tasks_at_once() -> None:
    s = Streams()
    s.hb("a")
    s.hb("b")
    s.settle("a", "b")
    r = s.hb("b", -1)
    assert r.member_epoch == -1
    s.settle("a")
    assert s.active("a") == ALL_TASKS


def test_standby_tasks_on_other_processes() -> None:
    s = Streams()
    s.d.coord.group_configs = lambda gid: {"streams.num.standby.replicas": "1"}
    s.hb("a")
    s.hb("b")
    s.hb("c", process="p-b")  # a second thread of b's process
    s.settle("a", "b", "c")
    g = s.group()
    procs = {m: g.members[m].process_id for m in "abc"}
    for m, t in g.target.items():
        for task in t.standby:
            owner = next(o for o, ot in g.target.items() if task in ot.active)
            assert procs[owner] != procs[m]
    assert sum(len(t.standby) for t in g.target.values()) == 6


def test_fencing_unknown_member_and_stale_topology() -> None:
    s = Streams()
    s.hb("a")
    assert s.hb("a", 7).error is E.fenced_member_epoch
    assert s.hb("zz", 3).error is E.unknown_member_id
    r = s.hb("b", topology=replace(TOPOLOGY, epoch=0))
    assert STALE_TOPOLOGY in [c for c, _ in r.status or ()]
    bad = Topology(1, (Subtopology("0"),))
    assert s.hb("c", topology=bad).error is E.streams_invalid_topology
    r = s.coord.streams_heartbeat(StreamsHeartbeatRequest("g", "d", 0), lambda n: 3, s.d.now)
    assert r.error is E.invalid_request and r.error_message


def test_initial_rebalance_delay_and_shutdown() -> None:
    s = Streams(streams_initial_rebalance_delay_ms=3000)
    r = s.hb("a")
    assert ASSIGNMENT_DELAYED in [c for c, _ in r.status or ()]
    assert s.group().state is StreamsGroupState.ASSIGNING
    s.d.advance(3000)
    r = s.hb("a")
    assert r.status == () and s.active("a") == ALL_TASKS
    r = s.hb("a", shutdown=True)
    assert [c for c, _ in r.status or ()] == [4]


def test_offsets_commit_with_member_epoch_and_list_groups() -> None:
    s = Streams()
    s.hb("a")
    tok = s.d.commit(("input", 0, 5), generation=1, member_id="a")
    assert s.d.replies[tok].partitions[0][1] is E.none
    tok = s.d.commit(("input", 0, 6), generation=9, member_id="a")
    assert s.d.replies[tok].partitions[0][1] is E.stale_member_epoch
    tok = s.d.commit(("input", 0, 6), generation=1, member_id="nobody")
    assert s.d.replies[tok].partitions[0][1] is E.unknown_member_id
    [listed] = s.coord.list_groups(types=["streams"])
    assert (listed.group_type, listed.state) == ("streams", "Stable")
    assert s.coord.list_groups(types=["consumer"]) == []
    tok = s.d.token()
    s.d.run(s.coord.delete_groups(tok, ["g"], s.d.now))
    assert dict(s.d.replies[tok])["g"] is E.non_empty_group
    s.hb("a", -1)
    tok = s.d.token()
    s.d.run(s.coord.delete_groups(tok, ["g"], s.d.now))
    assert dict(s.d.replies[tok])["g"] is E.none and "g" not in s.coord.streams_groups


def test_a_consumer_group_id_is_not_a_streams_group() -> None:
    s = Streams()
    d = s.d
    from broker.group.consumer import ConsumerHeartbeatRequest

    d.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
        "g", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("input",)),
        _Image(), d.now)
    assert s.hb("a").error is E.group_id_not_found


class _Image:
    topics_by_name: dict[str, object] = {}

    def topic(self, name: str) -> None:
        return None

    def topic_by_id(self, topic_id: object) -> None:
        return None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "lazy", "tick"]),
                          st.sampled_from(["a", "b", "c", "d"])), max_size=40))
def test_no_active_task_is_ever_held_by_two_members(ops: list[tuple[str, str]]) -> None:
    """Whatever members do, an active task is never assigned to two members at once, and a
    group whose members all heartbeat reaches a balanced assignment of every task."""
    s = Streams()
    live: set[str] = set()
    for op, m in ops:
        if op == "join" and m not in live:
            s.epoch.pop(m, None)
            s.owned.pop(m, None)
            if s.hb(m).error is E.none:
                live.add(m)
        elif op == "leave" and m in live:
            s.hb(m, -1)
            live.discard(m)
            s.owned.pop(m, None)
        elif op in ("beat", "lazy") and m in live:
            s.hb(m, report=op == "beat")
        elif op == "tick":
            s.d.advance(500)
        g = s.coord.streams_groups.get("g")
        if g is not None:
            seen: set[tuple[str, int]] = set()
            for mem in g.members.values():
                held = mem.assigned.active | mem.pending_revocation.active
                assert not held & seen
                seen |= held
            live &= set(g.members)
    if live:
        s.settle(*sorted(live), rounds=8)
        g = s.group()
        assert g.state is StreamsGroupState.STABLE
        loads = [len(s.active(m)) for m in live]
        assert sum(loads) == 6 and max(loads) - min(loads) <= 1


def test_sticky_assign_is_balanced_and_sticky() -> None:
    tasks = {"0": 4, "1": 4}
    first = sticky_assign([AssignorMember("a", "p1", frozenset(), frozenset()),
                           AssignorMember("b", "p2", frozenset(), frozenset())], tasks, 0)
    assert sorted(len(t.active) for t in first.values()) == [4, 4]
    second = sticky_assign([AssignorMember(m, f"p{m}", first[m].active, frozenset())
                            for m in ("a", "b")] + [AssignorMember("c", "pc", frozenset(),
                                                                   frozenset())], tasks, 0)
    assert sorted(len(t.active) for t in second.values()) == [2, 3, 3]
    assert second["a"].active <= first["a"].active and second["b"].active <= first["b"].active


def test_start_ms_is_the_drivers() -> None:
    assert Streams().d.now == START_MS


def test_classic_join_and_consumer_heartbeat_on_a_streams_group_id() -> None:
    from broker.group.consumer import ConsumerHeartbeatRequest
    from broker.group.types import JoinGroupRequest

    s = Streams()
    s.hb("a")
    r = s.coord.consumer_heartbeat(ConsumerHeartbeatRequest(
        "g", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("input",)),
        _Image(), s.d.now)
    assert r.error is E.group_id_not_found
    tok = s.d.token()
    join = JoinGroupRequest(group_id="g", member_id="", group_instance_id=None,
                            protocol_type="consumer", protocols=(("range", b""),),
                            session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            client_id="c", client_host="h", require_known_member_id=False)
    s.d.run(s.coord.join_group(tok, join, s.d.now))
    assert s.d.replies[tok].error is E.inconsistent_group_protocol
    s.d.commit(("input", 0, 5), generation=1, member_id="a")
    s.hb("a", -1)
    tok = s.d.token()
    s.d.run(s.coord.join_group(tok, join, s.d.now))
    assert "g" not in s.coord.streams_groups
    assert s.coord.groups["g"].offsets[("input", 0)].offset == 5


def test_empty_streams_group_without_offsets_is_dropped_by_the_cleanup() -> None:
    s = Streams()
    s.hb("a")
    s.hb("a", -1)
    s.d.advance(s.d.config.offsets_retention_check_interval_ms + 1)
    assert "g" not in s.coord.streams_groups


def test_static_member_comes_back_to_its_tasks() -> None:
    s = Streams()
    s.hb("a", instance="i-a")
    s.hb("b", instance="i-b")
    s.settle("a", "b")
    before = s.active("b")
    assert len(before) == 3
    assert s.hb("b", -2, instance="i-b").member_epoch == -2
    assert s.hb("b2", 0, instance="i-a").error is E.unreleased_instance_id
    r = s.hb("b2", 0, instance="i-b")
    assert r.error is E.none and r.assignment is not None and set(r.assignment.active) == before
    assert "b" not in s.group().members and s.group().static_members["i-b"] == "b2"
    # a static member that does not come back is removed after its session timeout
    s.hb("b2", -2, instance="i-b")
    for _ in range(12):
        s.d.advance(1000)
        s.hb("a")
    s.settle("a")
    assert "b2" not in s.group().members and s.active("a") == ALL_TASKS


# ---- Kafka 4.4's other streams group configs ------------------------------------------------


def test_heartbeat_tells_the_groups_task_offset_interval_and_recovery_lag() -> None:
    s = Streams()
    r = s.hb("a")
    assert (r.task_offset_interval_ms, r.acceptable_recovery_lag) == (60000, 10000)
    s.coord.group_configs = lambda gid: {"streams.task.offset.interval.ms": "20000",
                                         "streams.acceptable.recovery.lag": "500"}
    r = s.hb("a")
    assert (r.task_offset_interval_ms, r.acceptable_recovery_lag) == (20000, 500)


def test_task_offsets_are_kept_until_reported_again_and_checked() -> None:
    s = Streams()
    s.hb("a", offsets=(("1", 0, 40), ("1", 1, 7)), end_offsets=(("1", 0, 90),))
    m = s.group().members["a"]
    assert (m.task_offsets, m.task_end_offsets) == ({("1", 0): 40, ("1", 1): 7},
                                                    {("1", 0): 90})
    s.hb("a")  # null: unchanged
    assert m.task_offsets == {("1", 0): 40, ("1", 1): 7}
    s.hb("a", offsets=(("1", 2, 3),))
    assert (m.task_offsets, m.task_end_offsets) == ({("1", 2): 3}, {("1", 0): 90})
    r = s.hb("a", offsets=(("1", 2, 3), ("1", 2, 4)))
    assert (r.error, r.error_message) == (
        E.invalid_request,
        "Task offsets contain a duplicate entry for subtopology 1 and partition 2.")


T0, T1 = ("0", 0), ("0", 1)


def test_standby_ranking_previous_active_then_reported_task_offsets() -> None:
    """Kafka 4.4's StickyTaskAssignor: a moved task's previous active owner keeps it as
    standby; otherwise a member that reported offsets for the task (the highest first) is
    preferred over one without its state."""
    members = [AssignorMember("a", "pa", frozenset({T0, T1}), frozenset()),
               AssignorMember("b", "pb", frozenset(), frozenset()),
               AssignorMember("c", "pc", frozenset(), frozenset(), {T1: 1000, T0: 10})]
    out = sticky_assign(members, {"0": 2}, 1)
    assert (out["a"].active, out["b"].active, out["c"].active) == (
        {T0}, {T1}, frozenset())
    # T1 moved from a to b: a keeps its state as standby although c reported more
    assert out["a"].standby == {T1}
    assert out["c"].standby == {T0} and out["b"].standby == frozenset()
    for offsets_b, offsets_c, holder in (({T0: 50}, {T0: 900}, "c"), ({T0: 900}, {T0: 50}, "b"),
                                         ({T0: 0}, {}, "b"), ({}, {}, "b")):
        out = sticky_assign([AssignorMember("a", "pa", frozenset({T0}), frozenset()),
                             AssignorMember("b", "pb", frozenset(), frozenset(), offsets_b),
                             AssignorMember("c", "pc", frozenset(), frozenset(), offsets_c)],
                            {"0": 1}, 1)
        assert out[holder].standby == {T0}, (offsets_b, offsets_c)


def test_standby_ranking_stops_at_a_members_share() -> None:
    """A member that reported every task's state takes standbys only within its share of
    all tasks (active and standby); the rest go to the least loaded."""
    tasks = [("0", p) for p in range(4)]
    members = [AssignorMember("a", "pa", frozenset(tasks[:2]), frozenset()),
               AssignorMember("b", "pb", frozenset(tasks[2:]), frozenset()),
               AssignorMember("c", "pc", frozenset(), frozenset(), {t: 99 for t in tasks})]
    out = sticky_assign(members, {"0": 4}, 1)
    loads = {m: len(t.active) + len(t.standby) for m, t in out.items()}
    assert max(loads.values()) - min(loads.values()) <= 1, out


def test_no_warmup_tasks_as_kafka_4_4() -> None:
    """Kafka 4.4 takes streams.num.warmup.replicas and streams.acceptable.recovery.lag but
    its AssignmentRefiner returns the target as is: a member far behind on a task's state
    gets it as active at once, and nobody gets a warm-up task."""
    s = Streams()
    s.coord.group_configs = lambda gid: {"streams.num.warmup.replicas": "2",
                                         "streams.acceptable.recovery.lag": "0"}
    s.hb("a")
    s.settle("a")
    assert s.active("a") == ALL_TASKS
    lagging = tuple((sub, p, 0) for sub, p in sorted(ALL_TASKS))
    s.hb("b", offsets=lagging, end_offsets=tuple((sub, p, 10**6) for sub, p, _ in lagging))
    s.settle("a", "b")
    g = s.group()
    assert len(s.active("b")) == 3 and s.active("a") | s.active("b") == ALL_TASKS
    assert all(not t.warmup for t in g.target.values())
    assert all(not m.assigned.warmup for m in g.members.values())


def test_rack_aware_tags_do_not_move_standbys_as_kafka_4_4() -> None:
    """Kafka 4.4's sticky assignor ignores streams.rack.aware.assignment.tags: the same
    members with and without client tags get the same target."""
    targets = []
    for tagged in (False, True):
        s = Streams()
        configs = {"streams.num.standby.replicas": "1"}
        if tagged:
            configs["streams.rack.aware.assignment.tags"] = "zone"
        s.coord.group_configs = lambda gid, c=configs: c  # type: ignore[misc]
        for m, zone in (("a", "z1"), ("b", "z1"), ("c", "z2")):
            s.hb(m, tags=(("zone", zone),) if tagged else None)
        s.settle("a", "b", "c")
        targets.append(dict(s.group().target))
    assert targets[0] == targets[1]
    assert sum(len(t.standby) for t in targets[0].values()) == 6


def test_the_assignor_is_chosen_by_name(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from broker.group import streams

    def nothing(members: list[AssignorMember], tasks: object, standbys: int,
                ) -> dict[str, Tasks]:
        return {m.member_id: Tasks() for m in members}

    monkeypatch.setitem(streams.TASK_ASSIGNORS, "mock", nothing)
    s = Streams(streams_assignors=("sticky", "mock"))
    assert s.coord.streams_assignor_name("g") == "sticky"  # the node's first
    s.coord.group_configs = lambda gid: {"streams.assignor.name": " mock"}
    assert s.coord.streams_assignor_name("g") == "mock"
    s.hb("a")
    s.settle("a")
    assert s.active("a") == set()
    # a name the node no longer lists: the node's default, as Kafka 4.4 falls back
    s.coord.group_configs = lambda gid: {"streams.assignor.name": "gone"}
    assert s.coord.streams_assignor_name("g") == "sticky"
    assert Streams(streams_assignors=("mock", "sticky")).coord.streams_assignor_name(
        "g") == "mock"
