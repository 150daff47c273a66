"""KIP-1071 streams groups in __consumer_offsets: what the coordinator writes after each
change (Kafka 4.4's StreamsGroup* records), and a coordinator rebuilt by replaying them."""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode
from test_streams_group import TOPOLOGY, Streams

from broker.group import records as rec
from broker.group.coordinator import GroupCoordinator
from broker.group.streams import MemberState, StreamsGroupState

E = ErrorCode


def drain(s: Streams) -> int:
    """Writes what the coordinator asked for into the driver's log; how many records."""
    before = len(s.d.log)
    s.d.run(s.coord.take_effects())
    return len(s.d.log) - before


def reload(s: Streams) -> GroupCoordinator:
    fresh = GroupCoordinator(s.d.config, random.Random(9), s.d.now)
    for r in s.d.log:
        fresh.replay(r.key, r.value)
    fresh.finish_loading(s.d.now)
    fresh.configure_loaded_streams_groups(lambda n: s.topics.get(n))
    return fresh


def state(coord: GroupCoordinator) -> tuple[object, ...]:
    g = coord.streams_groups["g"]
    return (g.group_epoch, g.assignment_epoch, g.topology, g.target, g.persisted,
            g.static_members,
            # a static member away keeps its epoch, not the one before (as for consumers)
            {m.member_id: (m.member_epoch,
                           None if m.left_temporarily else m.previous_member_epoch,
                           m.state, m.assigned,
                           m.pending_revocation, m.process_id, m.instance_id,
                           m.topology_epoch, m.rebalance_timeout_ms, m.left_temporarily)
             for m in g.members.values()})


def test_replay_rebuilds_the_group_mid_reconciliation_and_members_carry_on() -> None:
    s = Streams()
    s.hb("a", instance="i-a")
    s.hb("b")
    s.settle("a", "b")
    s.hb("c")
    s.hb("a")  # a must give tasks up to c: UnrevokedTasks, not yet reported
    drain(s)
    assert s.group().members["a"].state is MemberState.UNREVOKED_TASKS
    fresh = reload(s)
    assert state(fresh) == state(s.coord)
    assert fresh.streams_groups["g"].topology == TOPOLOGY
    epoch = s.group().group_epoch
    s.d.coord = fresh  # the members go on against the loaded coordinator
    s.settle("a", "b", "c")
    assert s.group().group_epoch == epoch  # nothing changed: no new target
    assert s.group().state is StreamsGroupState.STABLE
    owned = [t for m in "abc" for t in s.active(m)]
    assert len(owned) == len(set(owned)) == 6


def test_an_unchanged_heartbeat_writes_nothing() -> None:
    s = Streams()
    s.hb("a")
    s.settle("a")
    drain(s)
    s.hb("a")
    assert drain(s) == 0


def test_leave_static_leave_and_delete_replay() -> None:
    s = Streams()
    s.hb("a", instance="i-a")
    s.hb("b")
    s.settle("a", "b")
    s.hb("b", -1)
    s.hb("a", -2, instance="i-a")  # a static member's temporary leave
    drain(s)
    tombstones = {r.key for r in s.d.log[-8:] if r.value is None}
    assert tombstones == {rec.encode_streams_group_key(t, "g", "b") for t in (19, 21, 22)}
    fresh = reload(s)
    assert state(fresh) == state(s.coord)
    assert fresh.streams_groups["g"].members["a"].left_temporarily
    s.d.now += 20_000  # a does not come back: removed at its session's end
    s.d.run(s.coord.tick(s.d.now))
    assert s.group().members == {}
    fx = s.coord.delete_groups(1, ["g"], s.d.now)
    s.d.run(fx)
    assert s.d.replies[1] == (("g", E.none),)
    types = [int.from_bytes(r.key[:2], "big") for r in s.d.log if r.value is None][-3:]
    assert types[-1] == rec.STREAMS_GROUP_METADATA  # the group's metadata goes last
    assert "g" not in reload(s).streams_groups


def test_stored_description_epoch_is_persisted_and_replayed() -> None:
    """KIP-1331: the epoch the topology description plugin holds is written in the group's
    StreamsGroupMetadata record (tag 2) and survives a reload; the plugin's description
    itself lives in memory only, as with Kafka's InMemoryTopologyDescriptionPlugin."""
    s = Streams()
    s.hb("a")
    drain(s)
    assert s.coord.check_description_push("g", "a", 2) == (
        E.invalid_request, "Topology epoch 2 is not the group's topology epoch 1.")
    assert s.coord.check_description_push("g", "x", 1)[0] is E.unknown_member_id
    assert s.coord.check_description_push("h", "a", 1)[0] is E.group_id_not_found
    assert s.coord.check_description_push("g", "a", 1) == (E.none, None)
    s.coord.record_description_push("g", 1, stored=True)
    assert drain(s) == 1  # only StreamsGroupMetadata changed
    s.coord.record_description_push("g", 1, stored=False)
    assert drain(s) == 1
    fresh = reload(s)
    g = fresh.streams_groups["g"]
    assert (g.stored_description_epoch, g.failed_description_epoch) == (1, 1)
    assert fresh.describe_streams_group("g").stored_description_epoch == 1
    assert state(fresh) == state(s.coord)
