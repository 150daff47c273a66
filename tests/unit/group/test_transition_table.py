"""One test per row of the transition tables at the top of broker/group/coordinator.py (classic
group states, with each listed trigger) and broker/group/consumer.py (KIP-848 member states and
group-epoch triggers): set the group up in the row's source state, apply the trigger, and check
the transition the row names happened (observed through ClassicGroup.transition)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from grouphelpers import Driver
from kio.schema.errors import ErrorCode
from test_classic_group import _static_group, jr
from test_consumer_group import Consumers, image, no_double_ownership

from broker.group.consumer import ConsumerGroupState, MemberState
from broker.group.coordinator import TRANSITIONS, ClassicGroup, GroupState
from broker.group.types import LeaveMember

S = GroupState
E = ErrorCode
Seen = list[tuple[GroupState, GroupState]]


@contextmanager
def transitions(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    seen: Seen = []
    original = ClassicGroup.transition

    def spy(self: ClassicGroup, to: GroupState, now_ms: int) -> None:
        seen.append((self.state, to))
        original(self, to, now_ms)

    monkeypatch.setattr(ClassicGroup, "transition", spy)
    yield seen


def completing(d: Driver, n: int = 2, **kw: object) -> list[str]:
    """n dynamic members joined; the group is CompletingRebalance, nobody synced yet."""
    ids = [d.join_new(**kw)[0] for _ in range(n)]
    g = d.group()
    if g.state is S.PREPARING_REBALANCE:
        for mid in ids:
            if not g.members[mid].awaiting_join:
                d.join(mid, **kw)  # type: ignore[arg-type]
    assert g.state is S.COMPLETING_REBALANCE, g.state
    return ids


def leader_and_follower(d: Driver, ids: list[str]) -> tuple[str, str]:
    leader = d.group().leader_id
    assert leader is not None
    return leader, next(m for m in ids if m != leader)


def preparing(d: Driver) -> list[str]:
    """A Stable group of two, then a third member joins: PreparingRebalance."""
    ids, _ = d.stable_group(2)
    new, _tok = d.join_new()
    assert d.state() is S.PREPARING_REBALANCE
    return [*ids, new]


# ---- classic: (from, to, trigger) ------------------------------------------------------------


def t_empty_join(d: Driver, seen: Seen) -> None:
    seen.clear()
    d.join_new()


def _offsets_only(d: Driver) -> None:
    d.commit(("t", 0, 5))  # a manual-assignment commit: an Empty group holding offsets
    assert d.state() is S.EMPTY


def t_empty_delete(d: Driver, seen: Seen) -> None:
    _offsets_only(d)
    seen.clear()
    d.run(d.coord.delete_groups(d.token(), ["g"], d.now))


def t_empty_offsets_expire(d: Driver, seen: Seen) -> None:
    _offsets_only(d)
    seen.clear()
    d.advance(d.config.offsets_retention_ms + d.config.offsets_retention_check_interval_ms)
    assert "g" not in d.coord.groups


def t_empty_unload(d: Driver, seen: Seen) -> None:
    _offsets_only(d)
    seen.clear()
    d.run(d.coord.unload(d.now))


def t_preparing_all_rejoined(d: Driver, seen: Seen) -> None:
    a, b, _c = preparing(d)
    seen.clear()
    d.join(a)
    d.join(b)


def t_preparing_join_timer(d: Driver, seen: Seen) -> None:
    a, b, _c = preparing(d)
    d.join(a)  # b never rejoins
    seen.clear()
    d.advance(30_000)
    assert b not in d.group().members and d.state() is S.COMPLETING_REBALANCE


def t_preparing_no_members_left(d: Driver, seen: Seen) -> None:
    (a,), _ = d.stable_group(1)
    d.join(a, protocols=(("roundrobin", b"x"),))  # changed protocols: a rebalance, a joined
    assert d.state() is S.COMPLETING_REBALANCE  # (the only member rejoined: it completes)
    d.join(a, protocols=(("range", b"y"),))  # changed again while completing
    assert d.state() is S.COMPLETING_REBALANCE
    b, _tok = d.join_new()
    assert d.state() is S.PREPARING_REBALANCE
    seen.clear()
    d.leave(LeaveMember(a), LeaveMember(b))


def t_preparing_unload(d: Driver, seen: Seen) -> None:
    preparing(d)
    seen.clear()
    d.run(d.coord.unload(d.now))


def t_completing_sync(d: Driver, seen: Seen) -> None:
    ids = completing(d)
    leader, _ = leader_and_follower(d, ids)
    seen.clear()
    d.sync(leader, d.group().generation_id, assignments=tuple((m, b"x") for m in ids))


def t_completing_join(d: Driver, seen: Seen) -> None:
    completing(d)
    seen.clear()
    d.join_new()


def t_completing_leave(d: Driver, seen: Seen) -> None:
    ids = completing(d)
    seen.clear()
    d.leave(LeaveMember(ids[0]))


def t_completing_protocols_change(d: Driver, seen: Seen) -> None:
    ids = completing(d)
    seen.clear()
    d.join(ids[0], protocols=(("range", b"other-metadata"),))


def t_completing_expiry(d: Driver, seen: Seen) -> None:
    completing(d)
    seen.clear()
    d.advance(10_000)  # session 10 s < rebalance 30 s: both expire before the sync deadline


def t_completing_sync_deadline(d: Driver, seen: Seen) -> None:
    ids = completing(d, session=60_000)
    leader, follower = leader_and_follower(d, ids)
    d.sync(follower, d.group().generation_id)  # the leader never sends its assignment
    seen.clear()
    d.advance(30_000)
    assert leader not in d.group().members


def t_completing_write_failed(d: Driver, seen: Seen) -> None:
    ids = completing(d)
    leader, _ = leader_and_follower(d, ids)
    d.fail_with = E.not_enough_replicas
    seen.clear()
    d.sync(leader, d.group().generation_id, assignments=())
    d.fail_with = None


def t_completing_unload(d: Driver, seen: Seen) -> None:
    completing(d)
    seen.clear()
    d.run(d.coord.unload(d.now))


def t_stable_join(d: Driver, seen: Seen) -> None:
    d.stable_group(2)
    seen.clear()
    d.join_new()


def t_stable_leave(d: Driver, seen: Seen) -> None:
    (a, _b), _ = d.stable_group(2)
    seen.clear()
    d.leave(LeaveMember(a))


def t_stable_expiry(d: Driver, seen: Seen) -> None:
    (a, b), gen = d.stable_group(2)
    d.advance(5_000)
    assert d.heartbeat(a, gen) is E.none  # only b goes quiet
    seen.clear()
    d.advance(5_000)
    assert b not in d.group().members


def t_stable_leader_rejoins(d: Driver, seen: Seen) -> None:
    d.stable_group(2)
    leader = d.group().leader_id or ""
    seen.clear()
    d.join(leader)  # same metadata: a leader's rejoin still means a new assignment


def t_stable_protocols_change(d: Driver, seen: Seen) -> None:
    (a, b), _ = d.stable_group(2)
    follower = b if d.group().leader_id == a else a
    seen.clear()
    d.join(follower, protocols=(("range", b"changed"),))


def t_stable_sync_deadline(d: Driver, seen: Seen) -> None:
    ids = completing(d, session=60_000)
    leader, follower = leader_and_follower(d, ids)
    d.sync(leader, d.group().generation_id, assignments=tuple((m, b"x") for m in ids))
    assert d.state() is S.STABLE  # the follower never collects its assignment
    seen.clear()
    d.advance(30_000)
    assert follower not in d.group().members


def t_stable_static_new_protocol(d: Driver, seen: Seen) -> None:
    _static_group(d, 1)
    seen.clear()
    tok = d.join(instance="i0", protocols=(("roundrobin", b""),), session=10_000)
    assert jr(d, tok).protocol_name == "roundrobin"


def t_stable_unload(d: Driver, seen: Seen) -> None:
    d.stable_group(2)
    seen.clear()
    d.run(d.coord.unload(d.now))


CLASSIC_ROWS: list[tuple[GroupState, GroupState, Callable[[Driver, Seen], None]]] = [
    (S.EMPTY, S.PREPARING_REBALANCE, t_empty_join),
    (S.EMPTY, S.DEAD, t_empty_delete),
    (S.EMPTY, S.DEAD, t_empty_offsets_expire),
    (S.EMPTY, S.DEAD, t_empty_unload),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, t_preparing_all_rejoined),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, t_preparing_join_timer),
    (S.PREPARING_REBALANCE, S.EMPTY, t_preparing_no_members_left),
    (S.PREPARING_REBALANCE, S.DEAD, t_preparing_unload),
    (S.COMPLETING_REBALANCE, S.STABLE, t_completing_sync),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_join),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_leave),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_protocols_change),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_expiry),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_sync_deadline),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, t_completing_write_failed),
    (S.COMPLETING_REBALANCE, S.DEAD, t_completing_unload),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_join),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_leave),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_expiry),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_leader_rejoins),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_protocols_change),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_sync_deadline),
    (S.STABLE, S.PREPARING_REBALANCE, t_stable_static_new_protocol),
    (S.STABLE, S.DEAD, t_stable_unload),
]


@pytest.mark.parametrize(("frm", "to", "trigger"), CLASSIC_ROWS,
                         ids=[f.__name__[2:] for _, _, f in CLASSIC_ROWS])
def test_classic_row(monkeypatch: pytest.MonkeyPatch, frm: GroupState, to: GroupState,
                     trigger: Callable[[Driver, Seen], None]) -> None:
    d = Driver(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1_000)
    with transitions(monkeypatch) as seen:
        trigger(d, seen)
    assert (frm, to) in seen, f"expected {frm.value} -> {to.value}, saw {seen}"


def test_the_rows_cover_the_whole_table() -> None:
    listed = {(frm, to) for frm, tos in TRANSITIONS.items() for to in tos}
    assert {(frm, to) for frm, to, _ in CLASSIC_ROWS} == listed


def test_loaded_group_starts_stable_or_empty() -> None:
    d = Driver()
    d.stable_group(2)
    d.commit(("t", 0, 1), group="other")
    fresh = type(d.coord)(d.config, __import__("random").Random(1), d.now)
    for r in d.log:
        fresh.replay(r.key, r.value)
    fresh.finish_loading(d.now)
    assert fresh.groups["g"].state is S.STABLE
    assert fresh.groups["other"].state is S.EMPTY


# ---- KIP-848 member states (consumer.py) -------------------------------------------------------


def test_member_stable_to_stable_epoch_moves_when_target_is_reachable() -> None:
    c = Consumers(image(a=4))
    a = c.join()
    c.settle([a])
    epoch = c.epoch[a]
    c.img = image(a=6)  # more partitions: a new target, nothing to revoke
    c.hb(a)
    m = c.group().members[a]
    assert m.state is MemberState.STABLE and c.epoch[a] == epoch + 1
    assert sorted(c.owned[a][next(iter(c.owned[a]))]) == list(range(6))


def test_member_stable_to_unrevoked_then_stable_on_acknowledgement() -> None:
    c = Consumers(image(a=4))
    a = c.join()
    c.settle([a])
    epoch = c.epoch[a]
    b = c.join()
    c.hb(a)
    m = c.group().members[a]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and m.member_epoch == epoch
    c.hb(a)  # owns only what it kept: acknowledges the revocation
    assert m.state is MemberState.STABLE and m.member_epoch > epoch
    c.settle([a, b])
    no_double_ownership(c)


def test_member_stable_to_unreleased_then_stable_when_released() -> None:
    c = Consumers(image(a=4))
    a = c.join()
    c.settle([a])
    b = c.join()
    mb = c.group().members[b]
    assert mb.state is MemberState.UNRELEASED_PARTITIONS and not mb.assigned
    c.hb(a)  # a is told to revoke
    c.hb(a)  # and acknowledges
    c.hb(b)
    assert mb.state is MemberState.STABLE and mb.assigned
    no_double_ownership(c)


def test_member_unrevoked_removed_after_rebalance_timeout() -> None:
    c = Consumers(image(a=4))
    a = c.join()  # rebalance timeout 5 s (every heartbeat of the helper says so)
    c.settle([a])
    b = c.join()
    c.hb(a, owned=False)  # the revocation is sent, never acknowledged
    assert c.group().members[a].state is MemberState.UNREVOKED_PARTITIONS
    c.now += 4999
    c.coord.tick(c.now)
    assert a in c.group().members
    c.hb(b)
    c.now += 1
    c.coord.tick(c.now)
    assert a not in c.group().members


@pytest.mark.parametrize("how", ["leave", "session", "static-no-return"])
def test_any_member_state_to_removed(how: str) -> None:
    c = Consumers(image(a=2))
    a = c.join(instance="i-a" if how == "static-no-return" else None)
    c.settle([a])
    epoch = c.group().group_epoch
    if how == "leave":
        assert c.hb(a, -1).member_epoch == -1
    elif how == "session":
        c.now += 10_000
        c.coord.tick(c.now)
    else:
        c.hb(a, -2, instance="i-a")
        c.now += 9_999
        c.coord.tick(c.now)
        assert a in c.group().members  # still within its session: it may come back
        c.now += 1
        c.coord.tick(c.now)
    assert a not in c.group().members and c.group().group_epoch == epoch + 1
    assert c.group().state is ConsumerGroupState.EMPTY


# ---- KIP-848 group-epoch triggers -------------------------------------------------------------


@pytest.mark.parametrize("trigger", ["join", "leave", "subscription", "regex", "rack",
                                     "assignor", "partitions", "new-topic", "none"])
def test_group_epoch_triggers(trigger: str) -> None:
    c = Consumers(image(a=2, b=2))
    a = c.join(topics=("a",))
    x = c.join(topics=("a",))
    c.settle([a, x])
    before = c.group().group_epoch
    if trigger == "join":
        c.join()
    elif trigger == "leave":
        c.hb(x, -1)
    elif trigger == "subscription":
        c.hb(a, topics=("a", "b"))
    elif trigger == "regex":
        c.hb(a, regex="^b$")
    elif trigger == "rack":
        c.coord.consumer_heartbeat(
            __import__("dataclasses").replace(_plain_hb(c, a), rack_id="r1"), c.img, c.now)
    elif trigger == "assignor":
        c.hb(a, assignor="range")
    elif trigger == "partitions":
        c.img = image(a=3, b=2)
        c.hb(a)
    elif trigger == "new-topic":
        c.hb(a, regex="^c$")
        c.settle([a, x])
        before = c.group().group_epoch
        c.img = image(a=2, b=2, c=1)
        c.hb(a)
    else:
        c.hb(a)
        c.hb(x)
    bumped = c.group().group_epoch == before + 1
    assert bumped is (trigger != "none"), (trigger, before, c.group().group_epoch)
    c.hb(a)  # the new target is computed on the next heartbeat of any member (as Kafka)
    g = c.group()
    assert g.assignment_epoch == g.group_epoch


def _plain_hb(c: Consumers, member: str):  # type: ignore[no-untyped-def]
    from broker.group.consumer import ConsumerHeartbeatRequest

    return ConsumerHeartbeatRequest(group_id="g", member_id=member, member_epoch=c.epoch[member],
                                    owned_partitions=tuple(c.owned[member].items()))


@pytest.mark.parametrize("state", list(ConsumerGroupState))
def test_consumer_group_states(state: ConsumerGroupState) -> None:
    c = Consumers(image(a=4))
    if state is ConsumerGroupState.EMPTY:
        a = c.join()
        c.hb(a, -1)
        assert c.group().state is state
    elif state is ConsumerGroupState.STABLE:
        a = c.join()
        c.settle([a])
        assert c.group().state is state
    elif state is ConsumerGroupState.RECONCILING:
        a = c.join()
        c.settle([a])
        c.join()
        assert c.group().state is state
    elif state is ConsumerGroupState.ASSIGNING:
        a = c.join()
        c.settle([a])
        c.group().group_epoch += 1  # only between an epoch bump and its target, in one call
        assert c.group().state is state
    else:
        a = c.join()
        c.hb(a, -1)
        c.coord.delete_groups(1, ["g"], c.now)
        assert "g" not in c.coord.consumer_groups
