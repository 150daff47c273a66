"""Unit tests of the core's message handlers, each citing the KIP section it follows.

KIP-595: A Raft Protocol for the Metadata Quorum.  KIP-996: Pre-Vote.
KIP-630: Kafka Raft Snapshot.
"""

from __future__ import annotations

from random import Random

import pytest
from kio.schema.errors import ErrorCode

from raft.control import decode_leader_change
from raft.core import CoreConfig, NotLeaderError, RaftCore
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChanged,
    Send,
    SnapshotId,
    SnapshotLoaded,
    VoteRequest,
    VoteResponse,
)
from raft.roles import Candidate, Follower, Leader, Prospective, Resigned, Unattached
from raft.store import MemoryLogStore, MemoryQuorumStateStore, QuorumState

CFG = CoreConfig(election_timeout_ms=100, fetch_timeout_ms=100, election_backoff_max_ms=50,
                 fetch_max_wait_ms=40, request_timeout_ms=60, retry_backoff_ms=10)
VOTERS = frozenset({1, 2, 3})


def make(node_id: int = 1, voters: frozenset[int] = VOTERS, state: QuorumState | None = None,
         log: MemoryLogStore | None = None, now: int = 0) -> RaftCore:
    qs = MemoryQuorumStateStore()
    if state is not None:
        qs.state = state
    return RaftCore(node_id, voters, log or MemoryLogStore(), qs, Random(7), now, CFG)


def sends(core: RaftCore) -> list[Send]:
    return core.take_output().sends


def only_reply(core: RaftCore) -> object:
    out = [s for s in sends(core) if s.is_response]
    assert len(out) == 1
    return out[0].message


def log_with(epochs: list[int]) -> MemoryLogStore:
    """A log holding one single-record batch per entry, with the given epochs."""
    log = MemoryLogStore()
    for i, e in enumerate(epochs):
        log.append((f"r{i}".encode(),), e)
    log.flush()
    return log


def elect(core: RaftCore, now: int = 1000) -> int:
    """Drive `core` (voter set {1,2,3}) to leadership; returns the time used."""
    core.tick(now)
    assert isinstance(core.role, Prospective)
    for s in sends(core):
        core.handle_response(s.dst, s.rid, VoteResponse(ErrorCode.none, core.epoch, -1, True,
                                                        True), now)
    assert isinstance(core.role, Candidate)
    for s in sends(core):
        core.handle_response(s.dst, s.rid, VoteResponse(ErrorCode.none, core.epoch, -1, True,
                                                        False), now)
    assert isinstance(core.role, Leader)
    return now


# --- KIP-595 "Vote" ---------------------------------------------------------------


def test_vote_granted_to_up_to_date_candidate_and_persisted_before_reply() -> None:
    core = make(1)
    core.handle_request(2, 5, VoteRequest(3, 2, 0, 0, False), 10)
    resp = only_reply(core)
    assert resp == VoteResponse(ErrorCode.none, 3, -1, True, False)
    assert core.state_store.read() == QuorumState(3, -1, 2)
    assert core.role == Unattached(3, 2, core.role.election_deadline_ms)  # type: ignore[union-attr]


def test_vote_rejected_for_a_log_behind_ours() -> None:
    core = make(1, log=log_with([1, 1, 2]))
    core.handle_request(2, 1, VoteRequest(3, 2, 1, 10, False), 10)  # older last epoch
    assert only_reply(core) == VoteResponse(ErrorCode.none, 3, -1, False, False)
    core.handle_request(3, 2, VoteRequest(3, 3, 2, 2, False), 10)  # same epoch, shorter
    assert only_reply(core) == VoteResponse(ErrorCode.none, 3, -1, False, False)
    core.handle_request(3, 3, VoteRequest(3, 3, 2, 3, False), 10)
    assert only_reply(core) == VoteResponse(ErrorCode.none, 3, -1, True, False)


def test_one_vote_per_epoch() -> None:
    core = make(1)
    core.handle_request(2, 1, VoteRequest(4, 2, 0, 0, False), 10)
    assert only_reply(core).vote_granted  # type: ignore[attr-defined]
    core.handle_request(3, 2, VoteRequest(4, 3, 0, 0, False), 11)
    assert not only_reply(core).vote_granted  # type: ignore[attr-defined]
    core.handle_request(2, 3, VoteRequest(4, 2, 0, 0, False), 12)  # a retry is granted again
    assert only_reply(core).vote_granted  # type: ignore[attr-defined]


def test_vote_from_an_older_epoch_is_rejected_with_ours() -> None:
    core = make(1, state=QuorumState(5, -1, -1))
    core.handle_request(2, 1, VoteRequest(4, 2, 9, 99, False), 10)
    assert only_reply(core) == VoteResponse(ErrorCode.none, 5, -1, False, False)


def test_observer_does_not_vote() -> None:
    core = make(4)
    core.handle_request(2, 1, VoteRequest(4, 2, 0, 0, False), 10)
    resp = only_reply(core)
    assert resp.error == ErrorCode.inconsistent_voter_set  # type: ignore[attr-defined]
    assert core.epoch == 0


# --- KIP-996 "Pre-Vote" -----------------------------------------------------------


def test_pre_vote_changes_no_state() -> None:
    core = make(1, state=QuorumState(2, -1, -1))
    writes = core.state_store.writes  # type: ignore[attr-defined]
    core.handle_request(2, 1, VoteRequest(3, 2, 0, 0, True), 10)
    assert only_reply(core) == VoteResponse(ErrorCode.none, 2, -1, True, True)
    assert core.epoch == 2
    assert core.state_store.writes == writes  # type: ignore[attr-defined]


def test_follower_in_contact_with_its_leader_refuses_pre_votes() -> None:
    core = make(1)
    core.handle_request(2, 1, BeginQuorumEpochRequest(1, 2), 0)
    sends(core)
    core.handle_request(3, 2, VoteRequest(2, 3, 0, 0, True), 50)
    assert not only_reply(core).vote_granted  # type: ignore[attr-defined]
    # no word from the leader for a fetch timeout: the pre-vote is granted
    core.handle_request(3, 3, VoteRequest(2, 3, 0, 0, True), 150)
    assert only_reply(core).vote_granted  # type: ignore[attr-defined]


def test_prospective_becomes_candidate_on_majority_then_leader() -> None:
    core = make(1)
    core.tick(10_000)
    assert isinstance(core.role, Prospective) and core.epoch == 0
    out = sends(core)
    assert {s.dst for s in out} == {2, 3}
    assert all(isinstance(s.message, VoteRequest) and s.message.pre_vote
               and s.message.epoch == 1 for s in out)
    core.handle_response(2, out[0].rid, VoteResponse(ErrorCode.none, 0, -1, True, True), 10_001)
    assert isinstance(core.role, Candidate) and core.epoch == 1
    assert core.state_store.read() == QuorumState(1, -1, 1)
    votes = sends(core)
    assert all(isinstance(s.message, VoteRequest) and not s.message.pre_vote for s in votes)
    core.handle_response(3, votes[-1].rid, VoteResponse(ErrorCode.none, 1, -1, True, False),
                         10_002)
    assert isinstance(core.role, Leader)


def test_rejected_pre_vote_with_a_known_leader_makes_a_follower() -> None:
    core = make(1)
    core.tick(10_000)
    out = sends(core)
    core.handle_response(2, out[0].rid, VoteResponse(ErrorCode.none, 0, 3, False, True), 10_001)
    assert isinstance(core.role, Follower) and core.role.leader_id == 3


# --- KIP-595 "Leader election": LeaderChange and BeginQuorumEpoch ---------------------


def test_new_leader_appends_leader_change_and_begins_epoch() -> None:
    core = make(1)
    elect(core)
    out = core.take_output()
    begin = [s for s in out.sends if isinstance(s.message, BeginQuorumEpochRequest)]
    assert {s.dst for s in begin} == {2, 3}
    assert LeaderChanged(1, 1) in out.events
    [batch] = core.log.read(0, 1 << 20)
    assert batch.control and batch.epoch == 1
    leader, voters, _granting = decode_leader_change(batch.records[0])
    assert (leader, voters) == (1, (1, 2, 3))
    assert core.hw == 0  # not committed until a majority has it


def test_single_voter_elects_itself() -> None:
    core = make(1, voters=frozenset({1}))
    core.tick(core.next_wakeup_ms())
    assert isinstance(core.role, Leader)
    assert core.hw == 1
    assert core.append([b"a", b"b"], 500) == 2
    assert core.hw == 3


@pytest.mark.parametrize("previous_leader", [-1, 1], ids=["fresh", "restarted-leader"])
def test_the_only_voter_stands_at_once_not_after_an_election_timeout(
        previous_leader: int) -> None:
    # Kafka's KafkaRaftClient does the same: with no one to wait for, the election timeout
    # is only delay (it was ~1.8 s of a single node's 2-3 s start).
    state = QuorumState(epoch=4, leader_id=previous_leader, voted_for=-1)
    core = make(1, voters=frozenset({1}), state=state, now=1000)
    assert core.next_wakeup_ms() == 1000
    core.tick(1000)
    assert isinstance(core.role, Leader) and core.epoch == 5
    several = make(1, state=state, now=1000)  # QuorumState is frozen: safe to share
    several.tick(1000)
    assert isinstance(several.role, (Unattached, Resigned)) and several.epoch == 4


def test_begin_quorum_epoch_makes_a_follower_that_fetches() -> None:
    core = make(2)
    core.handle_request(1, 9, BeginQuorumEpochRequest(3, 1), 5)
    out = sends(core)
    assert isinstance(core.role, Follower) and core.role.leader_id == 1
    assert core.state_store.read() == QuorumState(3, 1, -1)
    assert any(isinstance(s.message, FetchRequest) and s.dst == 1 for s in out)
    assert any(s.is_response and s.message == BeginQuorumEpochResponse(ErrorCode.none, 3, 1)
               for s in out)


def test_begin_quorum_epoch_from_an_old_epoch_is_fenced() -> None:
    core = make(2, state=QuorumState(5, -1, -1))
    core.handle_request(1, 9, BeginQuorumEpochRequest(3, 1), 5)
    assert only_reply(core) == BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, 5, -1)


# --- KIP-595 "Fetch" -------------------------------------------------------------------


def test_leader_advances_hw_when_a_majority_fetched_past_epoch_start() -> None:
    core = make(1)
    elect(core)
    sends(core)
    core.append([b"x"], 1001)
    core.handle_request(2, 1, FetchRequest(1, 2, 0, 0, 1 << 20, 0), 1002)
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and [b.base_offset for b in r.batches] == [0, 1]
    assert core.hw == 0
    core.handle_request(2, 2, FetchRequest(1, 2, 2, 1, 1 << 20, 0), 1003)
    r = only_reply(core)
    assert core.hw == 2 and isinstance(r, FetchResponse) and r.high_watermark == 2


def test_fetch_errors_name_the_leader() -> None:
    core = make(1)
    elect(core)
    sends(core)
    core.handle_request(2, 1, FetchRequest(0, 2, 0, 0, 100, 0), 1001)
    assert only_reply(core) == FetchResponse(ErrorCode.fenced_leader_epoch, 1, 1)
    core.handle_request(2, 2, FetchRequest(7, 2, 0, 0, 100, 0), 1001)
    assert only_reply(core) == FetchResponse(ErrorCode.unknown_leader_epoch, 1, 1)
    follower = make(2, state=QuorumState(1, 1, -1))
    sends(follower)
    follower.handle_request(3, 1, FetchRequest(1, 3, 0, 0, 100, 0), 5)
    assert only_reply(follower) == FetchResponse(ErrorCode.not_leader_or_follower, 1, 1)


def test_diverging_epoch_and_follower_truncation() -> None:
    # leader: epochs 1,1,3,3 (now leading epoch 4); follower: 1,1,2,2,2
    llog = log_with([1, 1, 3, 3])
    leader = make(1, state=QuorumState(3, -1, -1), log=llog)
    leader.tick(10_000)
    for s in sends(leader):
        leader.handle_response(s.dst, s.rid, VoteResponse(ErrorCode.none, 3, -1, True, True),
                               10_000)
    for s in sends(leader):
        leader.handle_response(s.dst, s.rid, VoteResponse(ErrorCode.none, 4, -1, True, False),
                               10_000)
    assert isinstance(leader.role, Leader) and leader.epoch == 4
    sends(leader)
    leader.handle_request(2, 1, FetchRequest(4, 2, 5, 2, 1 << 20, 0), 10_001)
    r = only_reply(leader)
    assert isinstance(r, FetchResponse)
    assert (r.diverging_epoch, r.diverging_end_offset) == (1, 2)

    flog = log_with([1, 1, 2, 2, 2])
    follower = make(2, state=QuorumState(4, 1, 1), log=flog)
    fetch = sends(follower)[0]
    follower.handle_response(1, fetch.rid, r, 10_002)
    assert flog.end_offset == 2
    refetch = sends(follower)[0].message
    assert isinstance(refetch, FetchRequest)
    assert (refetch.fetch_offset, refetch.last_fetched_epoch) == (2, 1)


def test_caught_up_fetch_waits_for_new_data() -> None:
    core = make(1)
    elect(core)
    sends(core)
    core.handle_request(2, 1, FetchRequest(1, 2, 1, 1, 1 << 20, 40), 1001)
    assert next(s for s in sends(core) if s.is_response).message.high_watermark == 1  # type: ignore[union-attr]
    core.handle_request(2, 2, FetchRequest(1, 2, 1, 1, 1 << 20, 40), 1002)
    assert sends(core) == []  # parked
    core.append([b"new"], 1010)
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and r.batches[0].records == (b"new",)
    core.handle_request(2, 3, FetchRequest(1, 2, 2, 1, 1 << 20, 40), 1011)
    sends(core)
    core.handle_request(2, 4, FetchRequest(1, 2, 2, 1, 1 << 20, 40), 1012)
    assert sends(core) == []
    core.tick(1052)  # max wait elapsed: an empty answer
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and r.batches == ()


# --- KIP-630 "Fetch" answers a SnapshotId; "FetchSnapshot" -----------------------------


def _leader_with_snapshot() -> RaftCore:
    core = make(1, voters=frozenset({1}))
    core.tick(core.next_wakeup_ms())
    for i in range(5):
        core.append([f"v{i}".encode()], 500)
    core.create_snapshot(4, b"S" * 10, 501)
    assert core.log.log_start_offset == 4
    return core


def test_fetch_below_log_start_gets_the_snapshot_id() -> None:
    core = _leader_with_snapshot()
    sends(core)
    core.handle_request(9, 1, FetchRequest(1, 9, 0, 0, 100, 0), 502)
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and r.snapshot_id == SnapshotId(4, 1)


def test_fetch_snapshot_chunks_and_errors() -> None:
    core = _leader_with_snapshot()
    sends(core)
    sid = SnapshotId(4, 1)
    core.handle_request(9, 1, FetchSnapshotRequest(1, 9, sid, 6, 100), 502)
    assert only_reply(core) == FetchSnapshotResponse(ErrorCode.none, 1, 1, sid, 10, 6, b"SSSS")
    core.handle_request(9, 2, FetchSnapshotRequest(1, 9, SnapshotId(3, 1), 0, 100), 502)
    assert only_reply(core).error == ErrorCode.snapshot_not_found  # type: ignore[attr-defined]
    core.handle_request(9, 3, FetchSnapshotRequest(1, 9, sid, 11, 100), 502)
    assert only_reply(core).error == ErrorCode.position_out_of_range  # type: ignore[attr-defined]


def test_follower_loads_a_snapshot_then_resumes_fetch() -> None:
    follower = make(2, state=QuorumState(1, 1, -1))
    fetch = sends(follower)[0]
    sid = SnapshotId(4, 1)
    follower.handle_response(1, fetch.rid, FetchResponse(ErrorCode.none, 1, 1, 4, 4,
                                                         snapshot_id=sid), 10)
    req = sends(follower)[0]
    assert req.message == FetchSnapshotRequest(1, 2, sid, 0, CFG.snapshot_chunk_bytes)
    follower.handle_response(1, req.rid, FetchSnapshotResponse(ErrorCode.none, 1, 1, sid, 6, 0,
                                                                b"abc"), 11)
    req = sends(follower)[0]
    assert isinstance(req.message, FetchSnapshotRequest) and req.message.position == 3
    follower.handle_response(1, req.rid, FetchSnapshotResponse(ErrorCode.none, 1, 1, sid, 6, 3,
                                                                b"def"), 12)
    out = follower.take_output()
    assert SnapshotLoaded(sid) in out.events
    assert follower.log.latest_snapshot() == sid and follower.log.log_start_offset == 4
    assert follower.log.read_snapshot(sid, 0, 100) == b"abcdef"
    assert follower.hw == 4
    [nxt] = out.sends
    assert isinstance(nxt.message, FetchRequest)
    assert (nxt.message.fetch_offset, nxt.message.last_fetched_epoch) == (4, 1)


# --- KIP-595 "EndQuorumEpoch" and check-quorum ------------------------------------------


def test_resign_sends_end_quorum_epoch_with_successors_by_progress() -> None:
    core = make(1)
    elect(core)
    sends(core)
    core.append([b"a"], 1001)
    core.handle_request(3, 1, FetchRequest(1, 3, 2, 1, 100, 0), 1002)
    core.handle_request(2, 2, FetchRequest(1, 2, 1, 1, 100, 0), 1002)
    sends(core)
    core.resign(1003)
    assert isinstance(core.role, Resigned)
    ends = [s.message for s in sends(core) if isinstance(s.message, EndQuorumEpochRequest)]
    assert ends and all(m.preferred_successors == (3, 2) for m in ends)
    with pytest.raises(NotLeaderError):
        core.append([b"b"], 1004)


def test_end_quorum_epoch_makes_the_first_successor_run_soon() -> None:
    first = make(3, state=QuorumState(1, 1, 1))
    second = make(2, state=QuorumState(1, 1, 1))
    for core in (first, second):
        sends(core)
        core.handle_request(1, 1, EndQuorumEpochRequest(1, 1, (3, 2)), 100)
        assert isinstance(core.role, Unattached)
    assert first.role.election_deadline_ms < second.role.election_deadline_ms  # type: ignore[union-attr]
    assert first.role.election_deadline_ms <= 100 + CFG.election_backoff_max_ms  # type: ignore[union-attr]


def test_check_quorum_leader_resigns_without_majority_fetching() -> None:
    core = make(1)
    elect(core, now=1000)
    sends(core)
    core.handle_request(2, 1, FetchRequest(1, 2, 1, 1, 100, 0), 1050)
    core.tick(1100)
    assert isinstance(core.role, Leader)
    core.tick(1050 + 150)  # 1.5 x fetch timeout after the last fetch
    assert isinstance(core.role, Resigned)


def test_restarted_leader_comes_back_resigned_and_says_so() -> None:
    core = make(1, state=QuorumState(4, 1, 1))
    assert isinstance(core.role, Resigned)
    ends = [s for s in sends(core) if isinstance(s.message, EndQuorumEpochRequest)]
    assert {s.dst for s in ends} == {2, 3}


def test_follower_told_by_its_leader_that_it_leads_no_more_starts_an_election() -> None:
    core = make(2, state=QuorumState(4, 1, 1))
    fetch = sends(core)[0]
    core.handle_response(1, fetch.rid, FetchResponse(ErrorCode.not_leader_or_follower, 4, -1),
                         10)
    assert isinstance(core.role, Unattached)
    assert core.role.election_deadline_ms <= 10 + CFG.election_backoff_max_ms


# --- observers (KIP-595 "Fetch": a non-leader names the leader) -----------------------------


def test_observer_discovers_the_leader_through_any_voter() -> None:
    core = make(7)
    core.tick(0)
    [s] = sends(core)
    assert isinstance(s.message, FetchRequest) and s.dst in VOTERS
    core.handle_response(s.dst, s.rid, FetchResponse(ErrorCode.not_leader_or_follower, 3, 2), 5)
    assert isinstance(core.role, Follower) and core.role.leader_id == 2
    assert any(isinstance(x.message, FetchRequest) and x.dst == 2 for x in sends(core))


def test_observer_whose_leader_refuses_connections_looks_for_the_new_one_at_once() -> None:
    """Observers get no BeginQuorumEpoch: after two refused connections to its leader an
    observer asks a voter right away instead of waiting out the fetch timeout."""
    core = make(7)
    core.tick(0)
    [s] = sends(core)
    core.handle_response(s.dst, s.rid, FetchResponse(ErrorCode.not_leader_or_follower, 3, 1), 1)
    assert isinstance(core.role, Follower) and core.role.leader_id == 1
    fetch = next(x for x in sends(core) if x.dst == 1)
    core.handle_failure(1, fetch.rid, 5)
    assert isinstance(core.role, Follower)  # one refusal may be a blip
    core.tick(5 + CFG.retry_backoff_ms)
    again = next(x for x in sends(core) if x.dst == 1)
    core.handle_failure(1, again.rid, 20)
    assert isinstance(core.role, Unattached) and core.epoch == 3
    assert CFG.fetch_timeout_ms > 20  # well before the fetch deadline
    [ask] = [x for x in sends(core) if isinstance(x.message, FetchRequest)]
    assert ask.dst in VOTERS
    core.handle_response(ask.dst, ask.rid,
                         FetchResponse(ErrorCode.not_leader_or_follower, 4, 2), 22)
    assert isinstance(core.role, Follower) and core.role.leader_id == 2 and core.epoch == 4


def test_append_on_a_follower_names_the_leader() -> None:
    core = make(2, state=QuorumState(4, 1, 1))
    with pytest.raises(NotLeaderError) as e:
        core.append([b"x"], 0)
    assert (e.value.leader_id, e.value.epoch) == (1, 4)


def test_snapshot_must_be_committed() -> None:
    core = make(1, voters=frozenset({1}))
    core.tick(core.next_wakeup_ms())
    core.append([b"a"], 500)
    with pytest.raises(ValueError):
        core.create_snapshot(core.hw + 1, b"", 501)


def test_leader_counts_only_what_it_has_flushed() -> None:
    """KIP-595: the leader's own write may overlap replication, but the high
    watermark counts the leader only up to its flushed offset."""
    from dataclasses import replace as dc_replace

    qs = MemoryQuorumStateStore()
    core = RaftCore(1, VOTERS, MemoryLogStore(), qs, Random(7), 0,
                    dc_replace(CFG, leader_async_flush=True))
    elect(core)
    out = core.take_output()
    assert out.flush
    core.flushed(1, 1, 1000)
    core.handle_request(2, 1, FetchRequest(1, 2, 1, 1, 1 << 20, 0), 1001)
    assert core.hw == 1
    core.append([b"a", b"b"], 1002)
    out = core.take_output()
    assert out.flush
    assert core.log.flushed_offset == 1
    # both followers have the new records, but the leader has not flushed them:
    # a majority of two still holds them, so they commit
    core.handle_request(2, 2, FetchRequest(1, 2, 3, 1, 1 << 20, 0), 1003)
    core.handle_request(3, 3, FetchRequest(1, 3, 3, 1, 1 << 20, 0), 1003)
    assert core.hw == 3
    core.append([b"c"], 1004)
    core.handle_request(2, 4, FetchRequest(1, 2, 4, 1, 1 << 20, 0), 1005)
    assert core.hw == 3  # only one follower and an unflushed leader: no majority
    core.flushed(1, 4, 1006)
    assert core.hw == 4
    core.flushed(0, 99, 1007)  # a flush from an older epoch is ignored
    assert core.log.flushed_offset == 4


def test_refused_connections_to_the_leader_end_its_contact_early() -> None:
    """KIP-996 refuses pre-votes while in contact with the leader; a leader whose
    process refuses connections is out of contact at once, and the follower runs
    within the election backoff rather than after the whole fetch timeout."""
    core = make(2)
    core.handle_request(1, 9, BeginQuorumEpochRequest(3, 1), 0)
    fetch = next(s for s in sends(core) if isinstance(s.message, FetchRequest))
    core.handle_failure(1, fetch.rid, 5)
    assert isinstance(core.role, Follower) and core.role.fetch_deadline_ms >= 100
    core.tick(5 + CFG.retry_backoff_ms)
    again = next(s for s in sends(core) if isinstance(s.message, FetchRequest))
    core.handle_failure(1, again.rid, 20)
    assert isinstance(core.role, Follower)
    assert core.role.fetch_deadline_ms <= 20 + CFG.election_backoff_max_ms
    core.handle_request(3, 1, VoteRequest(4, 3, 0, 0, True), 21)
    assert only_reply(core).vote_granted  # type: ignore[attr-defined]


def test_a_bare_high_watermark_waits_briefly_for_records_to_carry_it() -> None:
    from dataclasses import replace as dc_replace

    core = RaftCore(1, VOTERS, MemoryLogStore(), MemoryQuorumStateStore(), Random(7), 0,
                    dc_replace(CFG, hw_notify_delay_ms=5))
    elect(core)
    sends(core)
    core.handle_request(3, 1, FetchRequest(1, 3, 1, 1, 1 << 20, 40), 1001)  # HW -> 1
    assert core.hw == 1
    assert sends(core) == []  # only news: the high watermark, so it waits
    assert core.next_wakeup_ms() <= 1006
    core.append([b"x"], 1002)  # records arrive: they carry the new HW at once
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and r.high_watermark == 1 and r.batches
    core.handle_request(3, 2, FetchRequest(1, 3, 2, 1, 1 << 20, 40), 1003)  # HW -> 2
    assert sends(core) == []
    core.tick(1008)
    r = only_reply(core)
    assert isinstance(r, FetchResponse) and r.high_watermark == 2 and not r.batches
