"""The classic-protocol state machine: every transition and timer of broker/group/coordinator.py."""

from __future__ import annotations

import random

import pytest
from grouphelpers import START_MS, Driver, subscription
from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.group.coordinator import (
    TRANSITIONS,
    ClassicGroup,
    GroupCoordinator,
    GroupState,
    IllegalTransition,
)
from broker.group.types import (
    JoinGroupResult,
    LeaveMember,
    OffsetCommitResult,
    OffsetDeleteResult,
    SyncGroupResult,
)

S = GroupState
E = ErrorCode


def jr(d: Driver, tok: int) -> JoinGroupResult:
    r = d.replies[tok]
    assert isinstance(r, JoinGroupResult)
    return r


def sr(d: Driver, tok: int) -> SyncGroupResult:
    r = d.replies[tok]
    assert isinstance(r, SyncGroupResult)
    return r


# ---- JoinGroup validation --------------------------------------------------------------------


def test_join_rejects_empty_group_id_and_bad_session_timeouts() -> None:
    d = Driver(min_session_timeout_ms=6000, max_session_timeout_ms=60000)
    assert jr(d, d.join(group="")).error is E.invalid_group_id
    assert jr(d, d.join(session=5999)).error is E.invalid_session_timeout
    assert jr(d, d.join(session=60001)).error is E.invalid_session_timeout
    assert "g" not in d.coord.groups  # rejected joins leave no group behind
    assert jr(d, d.join(session=6000)).error is E.member_id_required


def test_join_with_member_id_of_unknown_group_is_unknown_member() -> None:
    d = Driver()
    assert jr(d, d.join("ghost")).error is E.unknown_member_id
    assert "g" not in d.coord.groups


def test_member_id_required_then_join_completes_first_generation() -> None:
    d = Driver()
    first = jr(d, d.join(client="app"))
    assert first.error is E.member_id_required
    assert first.member_id.startswith("app-")
    assert d.state() is S.EMPTY  # only a pending member so far
    tok = d.join(first.member_id)
    res = jr(d, tok)
    assert res.error is E.none and res.generation_id == 1
    assert res.leader == first.member_id and res.protocol_name == "range"
    assert [m.member_id for m in res.members] == [first.member_id]
    assert res.members[0].metadata == b"r"
    assert d.state() is S.COMPLETING_REBALANCE


def test_join_before_v4_needs_no_member_id_round_trip() -> None:
    d = Driver()
    res = jr(d, d.join(require_known=False))
    assert res.error is E.none and res.generation_id == 1 and res.member_id


def test_pending_member_expires_after_session_timeout() -> None:
    d = Driver()
    mid = jr(d, d.join(session=8000)).member_id
    d.advance(7999)
    assert mid in d.group().pending_members
    d.advance(1)
    assert mid not in d.group().pending_members
    assert jr(d, d.join(mid)).error is E.unknown_member_id


def test_inconsistent_protocols_are_refused() -> None:
    d = Driver()
    d.stable_group(1)
    assert jr(d, d.join(protocol_type="connect")).error is E.inconsistent_group_protocol
    assert jr(d, d.join(protocols=(("sticky", b""),))).error is E.inconsistent_group_protocol
    assert jr(d, d.join(protocol_type="", group="other")).error is E.inconsistent_group_protocol
    assert jr(d, d.join(protocols=(), group="other2")).error is E.inconsistent_group_protocol


def test_protocol_selection_votes_among_protocols_all_members_support() -> None:
    d = Driver()
    both = (("roundrobin", b"rr"), ("range", b"ra"))
    prefer_range = (("range", b"ra"), ("roundrobin", b"rr"), ("sticky", b"s"))
    a, _ = d.join_new(protocols=both)
    b, _ = d.join_new(protocols=prefer_range)
    c, tok_c = d.join_new(protocols=prefer_range)
    d.join(a, protocols=both)
    d.join(b, protocols=prefer_range)
    res = jr(d, tok_c)
    assert res.protocol_name == "range"  # 2 votes to 1; sticky is not common
    leader = d.group().leader_id
    assert leader == a
    lead = [r for r in d.replies.values()
            if isinstance(r, JoinGroupResult) and r.member_id == a and r.generation_id == 2]
    assert {m.member_id: m.metadata for m in lead[0].members} == {a: b"ra", b: b"ra", c: b"ra"}


def test_group_max_size() -> None:
    d = Driver(max_size=2)
    d.stable_group(2)
    assert jr(d, d.join()).error is E.group_max_size_reached
    # a pending member id counts towards the limit too
    d2 = Driver(max_size=1)
    mid = jr(d2, d2.join()).member_id
    assert jr(d2, d2.join()).error is E.group_max_size_reached
    assert jr(d2, d2.join(mid)).error is E.none


# ---- rebalances ------------------------------------------------------------------------------


def test_new_member_triggers_rebalance_and_old_member_must_rejoin() -> None:
    d = Driver()
    (a,), gen = d.stable_group(1)
    _b, tok_b = d.join_new()
    assert d.state() is S.PREPARING_REBALANCE
    assert tok_b not in d.replies
    assert d.heartbeat(a, gen) is E.rebalance_in_progress
    tok_a = d.join(a)
    assert d.state() is S.COMPLETING_REBALANCE
    ra, rb = jr(d, tok_a), jr(d, tok_b)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert ra.leader == a and len(ra.members) == 2 and rb.members == ()


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2, rebalance=20_000, session=60_000)
    if d.group().leader_id != a:
        a, b = b, a
    tok = d.join(a, rebalance=20_000, session=60_000)  # the leader rejoining -> rebalance
    assert d.state() is S.PREPARING_REBALANCE
    d.advance(19_999)
    assert d.state() is S.PREPARING_REBALANCE and tok not in d.replies
    d.advance(1)
    assert d.state() is S.COMPLETING_REBALANCE
    assert b not in d.group().members
    res = jr(d, tok)
    assert res.generation_id == gen + 1 and [m.member_id for m in res.members] == [a]


def test_follower_rejoin_with_same_metadata_in_stable_returns_current_generation() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2)
    follower = b if d.group().leader_id == a else a
    res = jr(d, d.join(follower))
    assert res.error is E.none and res.generation_id == gen and res.members == ()
    assert d.state() is S.STABLE


def test_member_changing_protocols_in_stable_triggers_rebalance() -> None:
    d = Driver()
    (a, b), _gen = d.stable_group(2)
    follower = b if d.group().leader_id == a else a
    d.join(follower, protocols=(("range", b"new"),))
    assert d.state() is S.PREPARING_REBALANCE


def test_completing_rebalance_retried_join_gets_same_generation() -> None:
    d = Driver()
    a, tok = d.join_new()
    gen = jr(d, tok).generation_id
    res = jr(d, d.join(a))
    assert res.generation_id == gen and d.state() is S.COMPLETING_REBALANCE
    assert res.members and res.leader == a


def test_completing_rebalance_changed_join_restarts_and_answers_waiting_syncs() -> None:
    d = Driver()
    a, _ = d.join_new()
    b, tok_b = d.join_new()
    d.join(a)
    gen = jr(d, tok_b).generation_id
    follower = b if d.group().leader_id == a else a
    sync_tok = d.sync(follower, gen)
    assert sync_tok not in d.replies
    d.join(follower, protocols=(("range", b"changed"),))
    assert d.state() is S.PREPARING_REBALANCE
    assert sr(d, sync_tok).error is E.rebalance_in_progress


def test_duplicate_join_while_awaiting_answers_the_older_request() -> None:
    d = Driver()
    (a, _b), _ = d.stable_group(2)
    t1 = d.join(a)
    t2 = d.join(a)
    assert jr(d, t1).error is E.rebalance_in_progress
    assert t2 not in d.replies


def test_initial_rebalance_delay_waits_and_extends_while_members_arrive() -> None:
    d = Driver(initial_rebalance_delay_ms=3000)
    _a, tok_a = d.join_new(rebalance=10_000)
    assert d.state() is S.PREPARING_REBALANCE
    d.advance(2000)
    _b, tok_b = d.join_new(rebalance=10_000)
    d.advance(1000)  # first delay over, but a member arrived: wait another delay
    assert d.state() is S.PREPARING_REBALANCE
    d.advance(2999)
    assert d.state() is S.PREPARING_REBALANCE
    d.advance(1)
    assert d.state() is S.COMPLETING_REBALANCE
    assert jr(d, tok_a).generation_id == jr(d, tok_b).generation_id == 1


def test_initial_delay_is_capped_by_rebalance_timeout() -> None:
    d = Driver(initial_rebalance_delay_ms=3000)
    d.join_new(rebalance=4000)
    for _ in range(3):
        d.advance(1000)
        d.join_new(rebalance=4000)
    # delays: 3000 then min(3000, remaining 1000) -> done at 4000 whatever arrives
    d.advance(999)
    assert d.state() is S.PREPARING_REBALANCE
    d.advance(1)
    assert d.state() is S.COMPLETING_REBALANCE
    assert len(d.group().members) == 4


def test_join_completes_with_no_members_goes_empty_and_writes_group() -> None:
    d = Driver()
    a, _ = d.join_new()
    gen = d.group().generation_id
    d.leave(LeaveMember(a))  # the rebalance has nobody to wait for: it completes at once
    assert d.state() is S.EMPTY and d.group().generation_id == gen + 1
    assert d.log[-1].key == rec.encode_group_metadata_key("g")
    v = rec.decode_group_metadata_value(d.log[-1].value or b"")
    assert v.members == () and v.generation == gen + 1 and v.protocol is None


# ---- SyncGroup -------------------------------------------------------------------------------


def test_sync_leader_assignment_written_then_everyone_answered() -> None:
    d = Driver()
    a, _ = d.join_new()
    b, tok = d.join_new()
    d.join(a)
    gen = jr(d, tok).generation_id
    leader = d.group().leader_id
    follower = b if leader == a else a
    f_tok = d.sync(follower, gen)
    d.auto_complete = False
    l_tok = d.sync(leader or "", gen, assignments=((a, b"A"), (b, b"B")))
    assert l_tok not in d.replies and f_tok not in d.replies
    assert d.state() is S.COMPLETING_REBALANCE  # not Stable until written
    d.release()
    assert d.state() is S.STABLE
    assert sr(d, l_tok).assignment == (b"A" if leader == a else b"B")
    assert sr(d, f_tok).assignment == (b"B" if leader == a else b"A")
    v = rec.decode_group_metadata_value(d.log[-1].value or b"")
    assert {m.member_id: m.assignment for m in v.members} == {a: b"A", b: b"B"}
    assert v.generation == gen and v.protocol == "range" and v.leader == leader


def test_sync_missing_assignment_is_a_valid_empty_one_and_late_sync_in_stable_gets_it(
) -> None:
    d = Driver()
    a, _ = d.join_new()
    b, tok = d.join_new()
    d.join(a)
    gen = jr(d, tok).generation_id
    leader = d.group().leader_id or ""
    follower = b if leader == a else a
    d.sync(leader, gen, assignments=((leader, b"L"),))
    res = sr(d, d.sync(follower, gen))
    # a valid, empty ConsumerProtocolAssignment: version 0, no topics, null user data
    assert res.error is E.none and res.assignment == bytes.fromhex("0000" "00000000" "ffffffff")
    assert res.protocol_type == "consumer" and res.protocol_name == "range"


def test_sync_errors() -> None:
    d = Driver()
    (a, _b), gen = d.stable_group(2)
    assert sr(d, d.sync("nobody", gen)).error is E.unknown_member_id
    assert sr(d, d.sync(a, gen, group="nogroup")).error is E.unknown_member_id
    assert sr(d, d.sync(a, gen + 1)).error is E.illegal_generation
    assert sr(d, d.sync(a, gen, protocol_type="connect")).error is E.inconsistent_group_protocol
    assert sr(d, d.sync(a, gen, protocol_name="rr")).error is E.inconsistent_group_protocol
    d.join_new()
    assert sr(d, d.sync(a, gen)).error is E.rebalance_in_progress


def test_sync_write_failure_maps_error_and_restarts_rebalance() -> None:
    d = Driver()
    a, tok = d.join_new()
    gen = jr(d, tok).generation_id
    d.fail_with = E.not_enough_replicas
    res = sr(d, d.sync(a, gen, assignments=((a, b"x"),)))
    assert res.error is E.coordinator_not_available
    assert d.state() is S.PREPARING_REBALANCE
    assert d.group().members[a].assignment == b""


def test_sync_timeout_removes_members_that_never_sync() -> None:
    d = Driver()
    a, _ = d.join_new(rebalance=15_000, session=60_000)
    b, tok = d.join_new(rebalance=15_000, session=60_000)
    d.join(a, rebalance=15_000, session=60_000)
    gen = jr(d, tok).generation_id
    leader = d.group().leader_id or ""
    follower = b if leader == a else a
    d.sync(leader, gen, assignments=())
    assert d.state() is S.STABLE
    d.advance(14_999)
    assert follower in d.group().members
    d.advance(1)
    assert follower not in d.group().members
    assert d.state() is S.PREPARING_REBALANCE


def test_sync_timeout_when_nobody_syncs_empties_group() -> None:
    d = Driver()
    _a, _ = d.join_new(rebalance=15_000, session=30_000)
    d.advance(15_000)
    assert d.state() is S.EMPTY and not d.group().members


# ---- Heartbeat and session timeouts ----------------------------------------------------------


def test_heartbeat_errors_by_state() -> None:
    d = Driver()
    assert d.heartbeat("x", 0, group="none") is E.unknown_member_id
    (a, b), gen = d.stable_group(2)
    assert d.heartbeat(a, gen) is E.none
    assert d.heartbeat("nobody", gen) is E.unknown_member_id
    assert d.heartbeat(a, gen - 1) is E.illegal_generation
    d.join_new()
    assert d.heartbeat(a, gen) is E.rebalance_in_progress
    d.join(a)
    d.join(b)
    assert d.state() is S.COMPLETING_REBALANCE
    assert d.heartbeat(a, gen + 1) is E.none


def test_session_timeout_expires_member_and_rebalances() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2, session=10_000)
    d.advance(6000)
    assert d.heartbeat(a, gen) is E.none
    d.advance(4000)  # b silent for 10s
    assert b not in d.group().members and a in d.group().members
    assert d.state() is S.PREPARING_REBALANCE
    tok = d.join(a)
    assert jr(d, tok).generation_id == gen + 1


def test_members_awaiting_join_are_not_expired_but_new_ones_are_after_5_minutes() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2, session=10_000, rebalance=600_000)
    tok_a = d.join(a, session=10_000, rebalance=600_000)
    d.advance(20_000)  # a waits for b's rejoin: a is alive, b is not
    assert a in d.group().members and b not in d.group().members
    assert jr(d, tok_a).generation_id == gen + 1
    # a new member stuck in a rebalance that never completes expires after 5 minutes
    d2 = Driver()
    (x,), _ = d2.stable_group(1, session=10_000, rebalance=900_000)
    y, tok_y = d2.join_new(session=10_000, rebalance=900_000)
    for _ in range(59):
        d2.advance(5_000)
        assert d2.heartbeat(x, 1) is E.rebalance_in_progress
    assert y in d2.group().members and tok_y not in d2.replies
    d2.advance(5_000)
    assert y not in d2.group().members
    assert jr(d2, tok_y).error is E.unknown_member_id


def _follower_waiting_20s_for_its_leader() -> tuple[Driver, str, str, str, str, int, int]:
    """Two members (session 10 s) of a completed join; the follower has sent its SyncGroup
    and waited 20 s for the leader's, while the leader heartbeated. (driver, a, b, leader,
    follower, generation, the follower's SyncGroup token)"""
    d = Driver()
    a, _ = d.join_new(session=10_000, rebalance=60_000)
    b, tok = d.join_new(session=10_000, rebalance=60_000)
    d.join(a, session=10_000, rebalance=60_000)
    gen = jr(d, tok).generation_id
    leader = d.group().leader_id or ""
    follower = b if leader == a else a
    f_tok = d.sync(follower, gen)
    for _ in range(4):
        d.advance(5_000)
        assert d.heartbeat(leader, gen) is E.none
    return d, a, b, leader, follower, gen, f_tok


def test_follower_waiting_for_leader_sync_is_kept_alive() -> None:
    d, _a, _b, _leader, follower, _gen, _tok = _follower_waiting_20s_for_its_leader()
    assert follower in d.group().members


def test_sync_answer_restarts_the_session_of_a_member_that_waited_for_the_leader() -> None:
    # Kafka's propagateAssignment: the follower was kept alive while it waited, so its
    # session starts again when it gets its assignment, not from when it sent its SyncGroup
    d, a, b, leader, follower, gen, f_tok = _follower_waiting_20s_for_its_leader()
    d.sync(leader, gen, assignments=((a, b"A"), (b, b"B")))  # 20s after the follower's sync
    assert sr(d, f_tok).error is E.none and d.state() is S.STABLE
    d.advance(9_999)
    assert follower in d.group().members and d.state() is S.STABLE
    assert d.heartbeat(follower, gen) is E.none


def test_sync_error_answer_restarts_the_session_so_the_member_can_rejoin() -> None:
    for cause in ("new member", "write failure"):
        d, a, b, leader, follower, gen, f_tok = _follower_waiting_20s_for_its_leader()
        if cause == "new member":
            d.join_new(session=10_000, rebalance=60_000)
            expected = E.rebalance_in_progress
        else:
            d.fail_with = E.not_enough_replicas
            d.sync(leader, gen, assignments=((a, b"A"), (b, b"B")))
            d.fail_with = None
            expected = E.coordinator_not_available
        assert sr(d, f_tok).error is expected, cause
        assert d.state() is S.PREPARING_REBALANCE, cause
        d.advance(9_999)
        assert follower in d.group().members, cause
        assert d.heartbeat(follower, gen) is E.rebalance_in_progress, cause


# ---- LeaveGroup ------------------------------------------------------------------------------


def test_leave_single_and_batched() -> None:
    d = Driver()
    assert d.leave(LeaveMember("x"), group="none").error is E.unknown_member_id
    (a, b, c), _ = d.stable_group(3)
    res = d.leave(LeaveMember(a), LeaveMember("ghost"))
    assert res.error is E.none
    assert {m.member_id: e for m, e in res.members} == {
        a: E.none, "ghost": E.unknown_member_id}
    assert d.state() is S.PREPARING_REBALANCE
    res = d.leave(LeaveMember(b), LeaveMember(c))
    assert all(e is E.none for _, e in res.members)
    assert d.state() is S.EMPTY


def test_leave_of_awaiting_member_answers_its_join_and_completes_the_rebalance() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2)
    tok_a = d.join(a)
    tok_b = d.join(b, protocols=(("range", b"x"),))
    assert d.state() is S.COMPLETING_REBALANCE
    d.join_new()
    tok_a = d.join(a)
    d.leave(LeaveMember(b))
    assert jr(d, tok_a).error is E.none
    assert jr(d, tok_b).generation_id == gen + 1


def test_leave_of_pending_member() -> None:
    d = Driver()
    (_a,), _ = d.stable_group(1)
    pending = jr(d, d.join()).member_id
    res = d.leave(LeaveMember(pending))
    assert res.members[0][1] is E.none and pending not in d.group().pending_members


def test_leave_by_instance_id_and_fencing() -> None:
    d = Driver()
    tok = d.join(instance="i1")
    res = jr(d, tok)
    mid = res.member_id
    d.sync(mid, res.generation_id, assignments=((mid, b"x"),), instance="i1")
    out = d.leave(LeaveMember("wrong", "i1"), LeaveMember("", "nope"))
    assert [e for _, e in out.members] == [E.fenced_instance_id, E.unknown_member_id]
    out = d.leave(LeaveMember("", "i1"))
    assert out.members[0][1] is E.none and not d.group().members


# ---- static membership -----------------------------------------------------------------------


def _static_group(d: Driver, n: int) -> tuple[list[str], int]:
    toks = [d.join(instance=f"i{k}", session=10_000) for k in range(n)]
    g = d.group()
    for k, t in enumerate(toks):
        if t not in d.replies:
            continue
        if k < n - 1:
            toks[k] = d.join(jr(d, t).member_id, instance=f"i{k}", session=10_000)
    ids = [m.member_id for m in g.members.values()]
    assert g.state is S.COMPLETING_REBALANCE, g.state
    gen = g.generation_id
    d.sync(g.leader_id or "", gen, assignments=tuple((m, m.encode()) for m in ids),
           instance=g.members[g.leader_id or ""].group_instance_id)
    for mid in ids:
        if mid != g.leader_id:
            d.sync(mid, gen, instance=g.members[mid].group_instance_id)
    assert g.state is S.STABLE
    return ids, gen


def test_static_member_joins_without_member_id_round_trip() -> None:
    d = Driver()
    res = jr(d, d.join(instance="i0"))
    assert res.error is E.none and res.generation_id == 1
    assert d.group().static_members == {"i0": res.member_id}


def test_static_member_restart_in_stable_keeps_generation_and_fences_old_id() -> None:
    d = Driver()
    ids, gen = _static_group(d, 3)
    g = d.group()
    follower = next(m for m in ids if m != g.leader_id)
    inst = g.members[follower].group_instance_id
    old_assignment = g.members[follower].assignment
    tok = d.join(instance=inst, session=10_000)
    res = jr(d, tok)
    assert res.error is E.none and res.generation_id == gen and res.member_id != follower
    assert d.state() is S.STABLE  # no rebalance
    assert g.members[res.member_id].assignment == old_assignment
    assert d.heartbeat(follower, gen, instance=inst) is E.fenced_instance_id
    assert d.heartbeat(res.member_id, gen, instance=inst) is E.none
    assert sr(d, d.sync(res.member_id, gen, instance=inst)).assignment == old_assignment
    v = rec.decode_group_metadata_value(d.log[-1].value or b"")
    assert res.member_id in {m.member_id for m in v.members}


def test_static_leader_restart_gets_members_and_skip_assignment() -> None:
    d = Driver()
    _ids, gen = _static_group(d, 2)
    g = d.group()
    inst = g.members[g.leader_id or ""].group_instance_id
    res = jr(d, d.join(instance=inst, session=10_000, supports_skip=True))  # JoinGroup v9+
    assert res.skip_assignment and res.leader == res.member_id and len(res.members) == 2
    assert d.state() is S.STABLE and res.generation_id == gen


def test_static_leader_restart_before_v9_is_answered_as_a_follower() -> None:
    # found by kafka-python (JoinGroup v7): told it led, with the members, it ran its assignor
    # and its metadata watch then made it rejoin, rebalancing everyone. Kafka answers such a
    # leader with no members and the leader id it replaced.
    d = Driver()
    _ids, gen = _static_group(d, 2)
    g = d.group()
    old_leader = g.leader_id or ""
    old_assignment = g.members[old_leader].assignment
    inst = g.members[old_leader].group_instance_id
    res = jr(d, d.join(instance=inst, session=10_000))
    assert res.error is E.none and not res.skip_assignment
    assert res.members == () and res.leader == old_leader != res.member_id
    assert d.state() is S.STABLE and res.generation_id == gen
    assert g.leader_id == res.member_id  # the coordinator knows who leads now
    got = sr(d, d.sync(res.member_id, gen, instance=inst))
    assert got.error is E.none and got.assignment == old_assignment
    assert d.state() is S.STABLE and g.generation_id == gen


def test_static_restart_store_failure_reverts_member_id() -> None:
    d = Driver()
    ids, _gen = _static_group(d, 2)
    g = d.group()
    follower = next(m for m in ids if m != g.leader_id)
    inst = g.members[follower].group_instance_id
    d.fail_with = E.not_leader_or_follower
    res = jr(d, d.join(instance=inst, session=10_000))
    assert res.error is E.not_coordinator
    assert g.static_members[inst or ""] == follower and follower in g.members


def test_static_restart_with_new_protocol_triggers_rebalance() -> None:
    d = Driver()
    _static_group(d, 2)
    d.join(instance="i0", protocols=(("roundrobin", b""), ("range", b"r")), session=10_000)
    # selected protocol stays range (both still support only range in common)
    assert d.state() is S.STABLE
    d2 = Driver()
    _static_group(d2, 1)
    tok = d2.join(instance="i0", protocols=(("roundrobin", b""),), session=10_000)
    # a rebalance, which completes at once: the only member has rejoined
    assert d2.state() is S.COMPLETING_REBALANCE
    assert jr(d2, tok).generation_id == 2 and jr(d2, tok).protocol_name == "roundrobin"


def test_static_rejoin_during_completing_and_preparing() -> None:
    d = Driver()
    tok0 = d.join(instance="i0")
    gen = jr(d, tok0).generation_id
    assert d.state() is S.COMPLETING_REBALANCE
    tok_new = d.join(instance="i0")
    assert d.state() is S.COMPLETING_REBALANCE or d.state() is S.PREPARING_REBALANCE
    res = jr(d, tok_new)
    assert res.generation_id == gen + 1
    # while preparing: the old id's pending join is fenced, the new one completes
    d2 = Driver()
    (a,), _ = d2.stable_group(1)
    s_tok = d2.join(instance="s", session=10_000)
    assert d2.state() is S.PREPARING_REBALANCE
    s_tok2 = d2.join(instance="s", session=10_000)
    assert jr(d2, s_tok).error is E.fenced_instance_id
    d2.join(a)
    assert jr(d2, s_tok2).error is E.none


def test_static_known_member_id_checks() -> None:
    d = Driver()
    ids, _gen = _static_group(d, 1)
    assert jr(d, d.join(ids[0], instance="other")).error is E.unknown_member_id
    d.join(instance="i0")  # replaces ids[0]
    assert jr(d, d.join(ids[0], instance="i0")).error is E.fenced_instance_id


def test_static_member_that_does_not_rejoin_blocks_until_expiry() -> None:
    d = Driver()
    ids, gen = _static_group(d, 2)
    g = d.group()
    leader = g.leader_id or ""
    other = next(m for m in ids if m != leader)
    tok = d.join(leader, instance=g.members[leader].group_instance_id, session=10_000)
    d.advance(10_000)  # the other static member neither rejoins nor heartbeats
    assert other not in g.members
    assert jr(d, tok).generation_id == gen + 1


# ---- OffsetCommit / OffsetFetch --------------------------------------------------------------


def test_manual_commit_creates_group_and_answers_after_write() -> None:
    d = Driver()
    d.auto_complete = False
    tok = d.commit(("t", 0, 10), ("t", 1, 20), metadata="hi")
    assert tok not in d.replies
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
    d.release()
    res = d.replies[tok]
    assert isinstance(res, OffsetCommitResult)
    assert res.errors() == {("t", 0): E.none, ("t", 1): E.none}
    f = d.coord.fetch_offsets("g", [("t", 0), ("t", 9)]).partitions
    assert (f[0].offset, f[0].leader_epoch, f[0].metadata) == (10, 5, "hi")
    assert (f[1].offset, f[1].leader_epoch, f[1].metadata) == (-1, -1, "")
    assert len(d.log) == 2
    k = rec.decode_key(d.log[0].key)
    assert k == rec.OffsetCommitKey("g", "t", 0)
    v = rec.decode_offset_commit_value(d.log[0].value or b"")
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (10, 5, "hi", START_MS)


def test_commit_write_failure_is_not_applied() -> None:
    d = Driver()
    d.fail_with = E.request_timed_out
    res = d.replies[d.commit(("t", 0, 10))]
    assert res.errors() == {("t", 0): E.coordinator_not_available}
    assert "g" not in d.coord.groups
    d.fail_with = E.record_list_too_large
    assert d.replies[d.commit(("t", 0, 10))].errors()[("t", 0)] is E.invalid_commit_offset_size


def test_commit_member_and_generation_checks() -> None:
    d = Driver()
    res = d.replies[d.commit(("t", 0, 1), generation=3, member_id="m")]
    assert res.errors()[("t", 0)] is E.illegal_generation
    (a, b), gen = d.stable_group(2)
    ok = d.replies[d.commit(("t", 0, 1), generation=gen, member_id=a)]
    assert ok.errors()[("t", 0)] is E.none
    checks = {
        (gen, "ghost"): E.unknown_member_id,
        (gen + 1, a): E.illegal_generation,
        (-1, ""): E.unknown_member_id,  # non-member commits to an active group
    }
    for (generation, member), err in checks.items():
        res = d.replies[d.commit(("t", 0, 1), generation=generation, member_id=member)]
        assert res.errors()[("t", 0)] is err
    d.join_new()
    res = d.replies[d.commit(("t", 0, 2), generation=gen, member_id=a)]
    assert res.errors()[("t", 0)] is E.none  # PreparingRebalance still accepts commits
    d.join(a)
    d.join(b)
    assert d.state() is S.COMPLETING_REBALANCE
    res = d.replies[d.commit(("t", 0, 3), generation=gen + 1, member_id=a)]
    assert res.errors()[("t", 0)] is E.rebalance_in_progress


def test_commit_by_fenced_static_member() -> None:
    d = Driver()
    ids, gen = _static_group(d, 1)
    d.join(instance="i0")
    res = d.replies[d.commit(("t", 0, 1), generation=gen, member_id=ids[0], instance="i0")]
    assert res.errors()[("t", 0)] is E.fenced_instance_id


def test_commit_metadata_too_large_per_partition() -> None:
    d = Driver(offset_metadata_max_bytes=4)
    res = d.replies[d.commit(("t", 0, 1), metadata="12345")]
    assert res.errors() == {("t", 0): E.offset_metadata_too_large}
    assert not d.log


def test_commit_resets_member_session() -> None:
    d = Driver()
    (a,), gen = d.stable_group(1, session=10_000)
    d.advance(9000)
    d.commit(("t", 0, 1), generation=gen, member_id=a)
    d.advance(9000)
    assert a in d.group().members


def test_fetch_all_partitions() -> None:
    d = Driver()
    assert d.coord.fetch_offsets("g", None).partitions == ()
    d.commit(("b", 1, 5), ("a", 0, 3))
    got = [(p.topic, p.partition, p.offset) for p in d.coord.fetch_offsets("g", None).partitions]
    assert got == [("a", 0, 3), ("b", 1, 5)]


# ---- OffsetDelete / DeleteGroups / ListGroups / DescribeGroups -------------------------------


def test_offset_delete() -> None:
    d = Driver()
    tok = d.token()
    d.run(d.coord.delete_offsets(tok, "nope", [("t", 0)], d.now))
    assert d.replies[tok].error is E.group_id_not_found
    d.commit(("t", 0, 1), ("u", 0, 2))
    tok = d.token()
    d.run(d.coord.delete_offsets(tok, "g", [("t", 0), ("x", 0)], d.now))
    res = d.replies[tok]
    assert isinstance(res, OffsetDeleteResult) and res.error is E.none
    assert dict(res.partitions) == {("t", 0): E.none, ("x", 0): E.none}
    assert d.log[-1] == rec_tombstone("g", "t", 0)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1


def rec_tombstone(group: str, topic: str, partition: int) -> object:
    from broker.group.types import OffsetsRecord
    return OffsetsRecord(rec.encode_offset_commit_key(group, topic, partition), None)


def test_offset_delete_of_active_group() -> None:
    d = Driver()
    (a,), gen = d.stable_group(1, protocols=(("range", subscription("t")),))
    d.commit(("t", 0, 1), ("u", 0, 1), generation=gen, member_id=a)
    tok = d.token()
    d.run(d.coord.delete_offsets(tok, "g", [("t", 0), ("u", 0)], d.now))
    assert dict(d.replies[tok].partitions) == {("t", 0): E.group_subscribed_to_topic,
                                               ("u", 0): E.none}
    d2 = Driver()
    d2.stable_group(1, protocol_type="connect")
    tok = d2.token()
    d2.run(d2.coord.delete_offsets(tok, "g", [("t", 0)], d2.now))
    assert d2.replies[tok].error is E.non_empty_group


def test_delete_groups() -> None:
    d = Driver()
    d.stable_group(1, group="busy")
    d.commit(("t", 0, 1), group="idle")
    tok = d.token()
    d.run(d.coord.delete_groups(tok, ["busy", "idle", "none"], d.now))
    assert dict(d.replies[tok]) == {"busy": E.non_empty_group, "idle": E.none,
                                    "none": E.group_id_not_found}
    assert "idle" not in d.coord.groups
    assert d.log[-2:] == [rec_tombstone("idle", "t", 0),
                          type(d.log[-1])(rec.encode_group_metadata_key("idle"), None)]


def test_list_and_describe() -> None:
    d = Driver()
    (a,), _gen = d.stable_group(1, group="s", protocols=(("range", b"meta"),))
    d.commit(("t", 0, 1), group="e")
    d.join_new(group="p")
    names = {g.group_id: g.state for g in d.coord.list_groups()}
    assert names == {"s": "Stable", "e": "Empty", "p": "CompletingRebalance"}
    assert [g.group_id for g in d.coord.list_groups(states=["stable", "Empty"])] == ["s", "e"]
    assert d.coord.list_groups(types=["consumer"]) == []
    assert len(d.coord.list_groups(types=["Classic"])) == 3
    desc = d.coord.describe_group("s")
    assert desc is not None and desc.state == "Stable" and desc.protocol_data == "range"
    m = desc.members[0]
    assert (m.member_id, m.metadata, m.assignment, m.client_host) == (
        a, b"meta", f"a-{a}".encode(), "/127.0.0.1")
    desc_p = d.coord.describe_group("p")
    assert desc_p is not None and desc_p.protocol_data == "" and desc_p.members[0].metadata == b""
    assert d.coord.describe_group("none") is None


# ---- offsets retention -----------------------------------------------------------------------


def test_standalone_offsets_expire_from_commit_time_and_group_goes_dead() -> None:
    d = Driver(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    d.commit(("t", 0, 1))
    d.advance(50_000)
    d.commit(("t", 1, 1))
    d.advance(50_000)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
    assert d.coord.fetch_offsets("g", [("t", 1)]).partitions[0].offset == 1
    d.advance(50_000)
    assert "g" not in d.coord.groups
    assert d.log[-1].key == rec.encode_group_metadata_key("g") and d.log[-1].value is None


def test_explicit_retention_time_sets_expire_timestamp() -> None:
    d = Driver(offsets_retention_ms=10**9, offsets_retention_check_interval_ms=1000)
    d.commit(("t", 0, 1), retention=5000)
    v = rec.decode_offset_commit_value(d.log[-1].value or b"")
    assert v.expire_timestamp == START_MS + 5000
    d.advance(4000)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1
    d.advance(1000)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1


def test_empty_group_offsets_expire_from_when_it_became_empty() -> None:
    d = Driver(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    (a,), gen = d.stable_group(1)
    d.commit(("t", 0, 1), generation=gen, member_id=a)
    for _ in range(20):  # 200 s: twice the retention, but the group is active
        d.advance(9_000)
        assert d.heartbeat(a, gen) is E.none
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1
    d.leave(LeaveMember(a))
    assert d.state() is S.EMPTY
    d.advance(90_000)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1
    d.advance(50_000)
    assert "g" not in d.coord.groups


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    d = Driver(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=5_000)
    (a,), gen = d.stable_group(1, protocols=(("range", subscription("t")),), session=60_000)
    d.commit(("t", 0, 1), ("old", 0, 1), generation=gen, member_id=a)
    for _ in range(22):
        d.advance(5_000)
        d.heartbeat(a, gen)
    assert d.coord.fetch_offsets("g", [("old", 0)]).partitions[0].offset == -1
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1


def test_non_consumer_active_group_never_expires_offsets() -> None:
    d = Driver(offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    (a,), gen = d.stable_group(1, protocol_type="connect", session=60_000)
    d.commit(("t", 0, 1), generation=gen, member_id=a)
    for _ in range(10):
        d.advance(500)
        d.heartbeat(a, gen)
    assert d.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1


# ---- loading and unloading -------------------------------------------------------------------


def test_reload_from_written_records_restores_groups_and_offsets() -> None:
    d = Driver()
    ids, gen = d.stable_group(2, session=10_000)
    d.commit(("t", 0, 7), generation=gen, member_id=ids[0])
    d.commit(("x", 0, 1), group="manual")
    tok = d.token()
    d.run(d.coord.delete_offsets(tok, "manual", [("x", 0)], d.now))
    d.commit(("x", 1, 2), group="gone")
    tok = d.token()
    d.run(d.coord.delete_groups(tok, ["gone"], d.now))
    fresh = GroupCoordinator(d.config, random.Random(1), d.now)
    for r in d.log:
        fresh.replay(r.key, r.value)
    fresh.finish_loading(d.now)
    assert set(fresh.groups) == {"g"}
    g = fresh.groups["g"]
    assert g.state is S.STABLE and g.generation_id == gen and set(g.members) == set(ids)
    assert g.leader_id == d.group().leader_id and g.protocol_name == "range"
    assert fresh.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 7
    # the reloaded members must keep heartbeating
    d.coord = fresh
    d.advance(5_000)
    assert d.heartbeat(ids[0], gen) is E.none
    d.advance(5_000)
    assert ids[1] not in g.members and g.state is S.PREPARING_REBALANCE


def test_replay_keeps_share_group_records_aside_and_rejects_corruption() -> None:
    c = GroupCoordinator(Driver().config, random.Random(1), START_MS)
    c.replay(b"\x00\x0b\x00\x01g", b"\x00\x00")  # ShareGroupMetadata: the share service's
    assert not c.groups and not c.consumer_groups
    assert c.share_records == {b"\x00\x0b\x00\x01g": b"\x00\x00"}
    c.replay(b"\x00\x0b\x00\x01g", None)
    assert c.share_records == {}
    from broker.errors import KafkaError
    with pytest.raises(KafkaError):
        c.replay(b"\x00\x01\x00", b"")
    with pytest.raises(KafkaError):  # a KIP-848 group record whose value is cut short
        c.replay(b"\x00\x03\x00\x01g", b"\x00\x00")


def test_unload_answers_waiting_requests_not_coordinator() -> None:
    d = Driver()
    (a, _b), _gen = d.stable_group(2)
    tok = d.join(a)
    d.auto_complete = False
    ctok = d.commit(("t", 0, 1), group="other")
    d.run(d.coord.unload(d.now))
    assert jr(d, tok).error is E.not_coordinator
    assert d.replies[ctok].errors()[("t", 0)] is E.not_coordinator
    assert not d.coord.groups


# ---- the transition table --------------------------------------------------------------------


def test_illegal_transition_raises() -> None:
    g = ClassicGroup("g")
    with pytest.raises(IllegalTransition):
        g.transition(S.STABLE, 0)
    g.state = S.DEAD
    with pytest.raises(IllegalTransition):
        g.transition(S.EMPTY, 0)


def test_every_listed_transition_is_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[tuple[S, S]] = set()
    original = ClassicGroup.transition

    def spy(self: ClassicGroup, to: S, now_ms: int) -> None:
        seen.add((self.state, to))
        original(self, to, now_ms)

    monkeypatch.setattr(ClassicGroup, "transition", spy)
    # Empty -> Preparing -> Completing -> Stable -> Preparing -> Empty -> Dead (DeleteGroups)
    d = Driver()
    (a,), _gen = d.stable_group(1)
    d.join_new()
    d.leave(LeaveMember(a))
    for m in list(d.group().members):
        d.leave(LeaveMember(m))
    d.advance(30_000)
    tok = d.token()
    d.run(d.coord.delete_groups(tok, ["g"], d.now))
    # Completing -> Preparing (sync write fails), Completing -> Dead / Preparing -> Dead (unload)
    d = Driver()
    b, tok = d.join_new()
    d.fail_with = E.not_enough_replicas
    d.sync(b, jr(d, tok).generation_id, assignments=())
    d.fail_with = None
    d.run(d.coord.unload(d.now))
    d = Driver()
    d.join_new()
    d.run(d.coord.unload(d.now))
    d = Driver()
    d.stable_group(1)
    d.run(d.coord.unload(d.now))
    d = Driver()
    d.join_new()  # Empty with a pending member only
    d.run(d.coord.unload(d.now))
    listed = {(frm, to) for frm, tos in TRANSITIONS.items() for to in tos}
    assert seen == listed


def test_sync_missing_assignment_for_other_protocol_types_is_empty_bytes() -> None:
    d = Driver()
    a, _ = d.join_new(protocol_type="connect")
    b, tok = d.join_new(protocol_type="connect")
    d.join(a, protocol_type="connect")
    gen = jr(d, tok).generation_id
    leader = d.group().leader_id or ""
    follower = b if leader == a else a
    d.sync(leader, gen, assignments=((leader, b"L"),))
    assert sr(d, d.sync(follower, gen)).assignment == b""
