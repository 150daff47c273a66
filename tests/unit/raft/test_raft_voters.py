"""KIP-853 dynamic voters in the pure core: the voter set read from the log (uncommitted
records included), snapshots and the bootstrap checkpoint; AddVoter / RemoveVoter on the
leader, one change at a time.  Driven through the simulator's cluster (a fake clock and
network), checked against the core's state."""

from __future__ import annotations

import uuid
from random import Random

from kio.schema.errors import ErrorCode

from broker.protocol.kafka_uuid import uuid_to_kafka
from raft.control import KRAFT_VERSION_TYPE, VOTERS_TYPE, Endpoint, Voter, snapshot_payload
from raft.core import RaftCore
from raft.kafka_messages import VOTER_CODEC, decode_batches, encode_batch
from raft.messages import Batch
from raft.roles import Leader
from raft.store import MemoryLogStore, MemoryQuorumStateStore
from tests.sim.cluster import SIM_CONFIG, Cluster


def _core(c: Cluster, i: int) -> RaftCore:
    core = c.nodes[i].core
    assert core is not None
    return core


def _leader(c: Cluster) -> RaftCore:
    lid = c.wait_for_leader(2000)
    return _core(c, lid)


def test_voters_record_round_trips_through_kio_and_the_batch_codec() -> None:
    vs = (Voter(1, uuid.uuid4(), (Endpoint("CONTROLLER", "127.0.0.1", 9093),)), Voter(2))
    value = VOTER_CODEC.encode_voters(vs)
    assert VOTER_CODEC.decode_voters(value) == vs
    assert VOTER_CODEC.decode_kraft_version(VOTER_CODEC.encode_kraft_version(1)) == 1
    batch = Batch(7, 3, (value,), True, control_type=VOTERS_TYPE)
    (back,) = decode_batches(encode_batch(batch))
    assert back == batch and back.control_type == VOTERS_TYPE
    (lc,) = decode_batches(encode_batch(Batch(0, 1, (b"x",), True)))
    assert lc.control_type == 2  # LeaderChange


def test_first_leader_writes_the_bootstrap_voter_set_into_the_log() -> None:
    c = Cluster(1, 1, 1, dynamic=True)
    leader = _leader(c)
    c.run_for(200)
    types = [b.control_type for b in leader.log.read(0, 1 << 20) if b.control]
    assert types[:3] == [2, KRAFT_VERSION_TYPE, VOTERS_TYPE]
    assert leader.kraft_version == 1
    # the observer was formatted without a voter set: it learnt it from the log
    obs = _core(c, 2)
    assert obs.voters == frozenset({1}) and not obs.is_voter and obs.kraft_version == 1


def test_static_voters_refuse_membership_changes() -> None:
    c = Cluster(2, 1, 1)
    _leader(c)
    c.run_for(200)
    assert c.change_voters(add=2) == ErrorCode.unsupported_version
    assert _core(c, 1).kraft_version == 0


def test_add_only_a_caught_up_observer_one_change_at_a_time() -> None:
    c = Cluster(3, 1, 2, dynamic=True)
    leader = _leader(c)
    c.run_with_load(200)
    c.crash(3)  # not fetching: not caught up
    c.run_with_load(150)
    assert c.change_voters(add=3) == ErrorCode.request_timed_out
    assert c.change_voters(add=1) == ErrorCode.duplicate_voter
    assert c.change_voters(add=2) == ErrorCode.none
    # effective once appended, before it commits
    assert leader.voters == frozenset({1, 2}) and leader.pending_voter_change() >= 0
    c.start(3)
    c.run_for(0)
    assert c.change_voters(remove=1) == ErrorCode.request_timed_out  # still pending
    c.run_with_load(300)
    assert leader.pending_voter_change() < 0
    assert _core(c, 2).is_voter and _core(c, 2).voters == frozenset({1, 2})
    assert c.change_voters(remove=3) == ErrorCode.voter_not_found


def test_the_leader_removes_itself_and_resigns_once_committed() -> None:
    c = Cluster(4, 1, 2, dynamic=True)
    _leader(c)
    for add in (2, 3):
        c.run_with_load(200)
        assert c.change_voters(add=add) == ErrorCode.none
    c.run_with_load(200)
    old = c.leader()
    assert old == 1
    assert c.change_voters(remove=1) == ErrorCode.none
    c.run_with_load(400)
    new = c.wait_for_leader(2000)
    assert new in (2, 3)
    assert not _core(c, 1).is_voter and _core(c, 1).voters == frozenset({2, 3})
    assert not isinstance(_core(c, 1).role, Leader)
    c.wait_converged(2000)
    c.final_check()


def test_voter_set_survives_restart_and_snapshots() -> None:
    c = Cluster(5, 1, 1, dynamic=True, snapshot_every=10)
    _leader(c)
    c.run_with_load(200)
    assert c.change_voters(add=2) == ErrorCode.none
    c.run_with_load(600)  # snapshots move the log start past the Voters records
    for i in (1, 2):
        log = c.nodes[i].log
        snap = log.latest_snapshot()
        assert snap is not None and log.log_start_offset > 5
        raw = log.read_snapshot(snap, 0, 1 << 30)
        assert raw != snapshot_payload(raw)  # carries the voter set
    c.crash(1)
    c.crash(2)
    c.start(1)
    c.start(2)
    c.wait_for_leader(2000)
    assert _core(c, 1).voters == _core(c, 2).voters == frozenset({1, 2})
    c.wait_converged(2000)
    c.final_check()


def test_truncated_voters_record_is_forgotten() -> None:
    log = MemoryLogStore()
    log.append((b"lc",), 1, control=True)
    log.append((VOTER_CODEC.encode_kraft_version(1),), 1, control=True,
               control_type=KRAFT_VERSION_TYPE)
    log.append((VOTER_CODEC.encode_voters((Voter(1), Voter(2))),), 1, control=True,
               control_type=VOTERS_TYPE)
    log.flush()
    core = RaftCore(2, frozenset(), log, MemoryQuorumStateStore(), Random(1), 0, SIM_CONFIG,
                    bootstrap_voters=(Voter(1),), codec=VOTER_CODEC)
    assert core.voters == frozenset({1, 2}) and core.is_voter
    log.truncate_to(2)
    core._prune_voters()
    assert core.voters == frozenset({1}) and not core.is_voter


def test_update_voter_endpoints_and_exact_voter_keys() -> None:
    c = Cluster(6, 1, 1, dynamic=True)
    leader = _leader(c)
    c.run_with_load(200)
    me = c.voter_record(1)
    moved = Voter(1, me.directory_id, (Endpoint("CONTROLLER", "elsewhere", 19093),))
    err, _msg, off = leader.update_voter(moved, c.now)
    assert err == ErrorCode.none and off >= 0
    assert leader.voter(1) == moved
    c.run_with_load(200)
    assert _core(c, 2).voter(1) == moved  # replicated
    # a voter is its id and its directory id: another (or no) directory id is not it
    other = Voter(1, uuid.UUID(int=7), moved.endpoints)
    assert leader.update_voter(other, c.now)[0] == ErrorCode.voter_not_found
    assert leader.remove_voter(1, None, c.now)[0] == ErrorCode.voter_not_found
    # the last voter: Kafka's VOTER_NOT_FOUND, with its words
    err, msg = leader.remove_voter(1, me.directory_id, c.now)[:2]
    key = f"ReplicaKey(id=1, directoryId={uuid_to_kafka(me.directory_id)})"
    assert (err, msg) == (ErrorCode.voter_not_found,
                          f"Cannot remove voter {key} from the set of voters [{key}]")


def test_upgrade_a_static_quorum_to_kraft_version_1_then_add_a_voter() -> None:
    """KIP-853's upgrade: the leader of a static quorum writes KRaftVersion(1) and a Voters
    record of the static voters with the directory ids their Fetch requests named."""
    c = Cluster(5, 3, 1, directory_ids=True)
    leader = _leader(c)
    c.run_with_load(300)
    assert leader.kraft_version == 0
    eps = {i: (Endpoint("CONTROLLER", "127.0.0.1", 9090 + i),) for i in (1, 2, 3)}
    assert leader.upgrade_kraft_version(1, eps, c.now, validate_only=True)[0] == ErrorCode.none
    assert leader.kraft_version == 0  # validate_only appends nothing
    missing = {1: eps[1]}
    err, msg, _ = leader.upgrade_kraft_version(1, missing, c.now)
    if leader.node_id == 1:
        assert err == ErrorCode.invalid_request and "no endpoint for voter" in msg
    err, _msg, off = leader.upgrade_kraft_version(1, eps, c.now)
    assert err == ErrorCode.none and off >= 0
    assert leader.kraft_version == 1
    assert leader.upgrade_kraft_version(0, eps, c.now)[0] == ErrorCode.invalid_update_version
    c.run_with_load(300)
    assert leader.hw > off
    for i in (1, 2, 3, 4):
        core = _core(c, i)
        assert core.kraft_version == 1
        assert [v.directory_id for v in core.voter_set] == [
            c.nodes[v].directory_id for v in (1, 2, 3)]
        assert core.is_voter == (i != 4)
    # the membership change a static quorum refused now works
    assert c.change_voters(add=4) == ErrorCode.none
    c.run_with_load(300)
    assert _core(c, 4).is_voter


def test_kraft_version_upgrade_waits_for_every_voters_directory_id() -> None:
    c = Cluster(6, 3, 0, directory_ids=True)
    leader = _leader(c)
    c.run_for(100)
    other = next(i for i in (1, 2, 3) if i != leader.node_id)
    c.crash(other)
    assert isinstance(leader.role, Leader)
    leader.role.state.voters[other].directory_id = None  # as if it never fetched with one
    eps = {i: (Endpoint("CONTROLLER", "127.0.0.1", 9090 + i),) for i in (1, 2, 3)}
    err, msg, _ = leader.upgrade_kraft_version(1, eps, c.now)
    assert err == ErrorCode.request_timed_out and f"voter {other}" in msg
    assert leader.kraft_version == 0
