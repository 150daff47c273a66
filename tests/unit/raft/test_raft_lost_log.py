"""A voter whose log lost committed records (issue 17): log start above 0 and no snapshot
covering it.  It must not vote or stand for election, and must repair itself from the
leader's snapshot (KIP-630) rather than spin on a DivergingEpoch below its log start."""

from __future__ import annotations

from random import Random

from kio.schema.errors import ErrorCode

from raft.core import CoreConfig, RaftCore
from raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LogStateLost,
    Send,
    SnapshotId,
    SnapshotLoaded,
    SnapshotWanted,
    VoteRequest,
    VoteResponse,
)
from raft.roles import Follower, Leader, Prospective, Unattached
from raft.store import MemoryLogStore, MemoryQuorumStateStore, QuorumState

CFG = CoreConfig(election_timeout_ms=100, fetch_timeout_ms=100, election_backoff_max_ms=50,
                 fetch_max_wait_ms=40, request_timeout_ms=60, retry_backoff_ms=10)
VOTERS = frozenset({1, 2, 3})


def make(node_id: int, log: MemoryLogStore, state: QuorumState | None = None,
         voters: frozenset[int] = VOTERS, wall_offset_ms: int = 0) -> RaftCore:
    qs = MemoryQuorumStateStore()
    if state is not None:
        qs.state = state
    return RaftCore(node_id, voters, log, qs, Random(3), 0, CFG, wall_offset_ms=wall_offset_ms)


def log_of(n: int, epoch: int = 1) -> MemoryLogStore:
    log = MemoryLogStore()
    for i in range(n):
        log.append((f"r{i}".encode(),), epoch)
    log.flush()
    return log


def lost_log(n: int = 10, lose: int = 6) -> MemoryLogStore:
    log = log_of(n)
    log.lose_head(lose)
    assert (log.log_start_offset, log.end_offset, log.latest_snapshot()) == (lose, n, None)
    return log


def sends(core: RaftCore) -> list[Send]:
    return core.take_output().sends


def test_a_lost_log_is_reported_once_and_the_voter_grants_no_vote() -> None:
    core = make(2, lost_log())
    assert core.lost_committed_state() and core.wants_snapshot()
    out = core.take_output()
    assert out.events == [LogStateLost(6, -1)]
    # even a candidate far ahead gets neither a pre-vote nor a vote
    for pre in (True, False):
        core.handle_request(1, 1, VoteRequest(5, 1, 4, 100, pre), 1)
        [reply] = sends(core)
        assert isinstance(reply.message, VoteResponse) and not reply.message.vote_granted
    assert core.state_store.read().voted_for == -1


def test_a_lost_voter_never_stands_it_looks_for_the_leader_instead() -> None:
    core = make(2, lost_log())
    core.take_output()
    now = 0
    for _ in range(20):
        now = max(now + 1, core.next_wakeup_ms())
        core.tick(now)
        assert not isinstance(core.role, Prospective | Leader)
        for s in sends(core):
            assert isinstance(s.message, FetchRequest)  # discovery, never a VoteRequest
            assert (s.message.fetch_offset, s.message.last_fetched_epoch) == (10, 0)
            assert s.dst != 2
    assert core.epoch == 0


def test_a_lost_follower_asks_for_the_snapshot_loads_it_and_votes_again() -> None:
    # the leader: 10 records of epoch 1 and a snapshot at 8
    leader = make(1, log_of(10), voters=frozenset({1}))
    leader.tick(leader.next_wakeup_ms())
    assert isinstance(leader.role, Leader)
    epoch = leader.epoch
    assert leader.hw == 11  # ten records and the LeaderChange
    leader.create_snapshot(11, b"IMAGE@11", 1000)
    follower = make(2, lost_log(), state=QuorumState(epoch, 1, -1))
    [fetch] = [s for s in sends(follower) if isinstance(s.message, FetchRequest)]
    assert isinstance(fetch.message, FetchRequest)
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (10, 0)
    leader.take_output()
    leader.handle_request(2, 7, fetch.message, 1001)
    [answer] = sends(leader)
    assert isinstance(answer.message, FetchResponse)
    assert answer.message.snapshot_id == SnapshotId(11, epoch) and not answer.message.batches
    follower.handle_response(1, fetch.rid, answer.message, 1002)
    [req] = sends(follower)
    # a log that lost its head needs a snapshot to cover its start
    assert isinstance(req.message, FetchSnapshotRequest)
    leader.handle_request(2, 8, req.message, 1003)
    [chunk] = sends(leader)
    assert isinstance(chunk.message, FetchSnapshotResponse)
    follower.handle_response(1, req.rid, chunk.message, 1004)
    out = follower.take_output()
    assert SnapshotLoaded(SnapshotId(11, epoch)) in out.events
    assert not follower.lost_committed_state() and not follower.wants_snapshot()
    assert follower.log.log_start_offset == 11 and follower.hw == 11
    [nxt] = out.sends
    assert isinstance(nxt.message, FetchRequest) and nxt.message.last_fetched_epoch == epoch
    # a full voter again: it grants a vote to an up-to-date candidate
    follower.handle_request(3, 9, VoteRequest(epoch + 1, 3, epoch, 11, False), 1005)
    [vote] = [s for s in sends(follower) if s.is_response]
    assert isinstance(vote.message, VoteResponse) and vote.message.vote_granted


def test_a_leader_without_a_snapshot_asks_for_one_and_the_follower_backs_off() -> None:
    leader = make(1, log_of(10), voters=frozenset({1}))
    leader.tick(leader.next_wakeup_ms())
    leader.take_output()
    epoch = leader.epoch
    leader.handle_request(2, 1, FetchRequest(epoch, 2, 10, 0, 1 << 20, 0), 1000)
    out = leader.take_output()
    assert SnapshotWanted() in out.events
    [answer] = out.sends
    assert isinstance(answer.message, FetchResponse)
    assert answer.message.snapshot_id is None and not answer.message.batches
    assert answer.message.diverging_end_offset < 0  # never a DivergingEpoch it cannot reach
    # an older snapshot will not do either: the follower may have acknowledged records
    # up to its log end, and would vote again without them
    leader.create_snapshot(5, b"IMAGE@5", 1000)
    leader.handle_request(2, 2, FetchRequest(epoch, 2, 10, 0, 1 << 20, 0), 1000)
    out2 = leader.take_output()
    assert SnapshotWanted() in out2.events
    assert out2.sends[0].message.snapshot_id is None  # type: ignore[union-attr]
    follower = make(2, lost_log(), state=QuorumState(epoch, 1, -1))
    [fetch] = [s for s in sends(follower) if isinstance(s.message, FetchRequest)]
    follower.handle_response(1, fetch.rid, answer.message, 1001)
    assert sends(follower) == []  # no spin: it asks again after the retry backoff
    assert follower.hw == 0  # and knows nothing committed: it applies nothing
    follower.tick(1001 + CFG.retry_backoff_ms)
    [again] = sends(follower)
    assert isinstance(again.message, FetchRequest) and again.message.last_fetched_epoch == 0


def test_a_diverging_epoch_below_the_log_start_leads_to_the_snapshot_not_a_spin() -> None:
    log = log_of(6)
    log.store_snapshot(SnapshotId(4, 1), b"S4")
    assert log.log_start_offset == 4
    follower = make(2, log, state=QuorumState(2, 1, -1))
    [fetch] = [s for s in sends(follower) if isinstance(s.message, FetchRequest)]
    # the leader says: diverge at epoch 0, end offset 2 (below our log start 4)
    follower.handle_response(1, fetch.rid, FetchResponse(
        ErrorCode.none, 2, 1, 10, 0, diverging_epoch=0, diverging_end_offset=2), 10)
    assert follower.log.end_offset == 6  # nothing truncated below the start
    [nxt] = sends(follower)
    assert isinstance(nxt.message, FetchRequest)
    assert (nxt.message.fetch_offset, nxt.message.last_fetched_epoch) == (6, 0)
    assert follower.wants_snapshot() and isinstance(follower.role, Follower)


def test_an_older_snapshot_replaces_a_log_that_lost_its_head() -> None:
    log = lost_log(10, 6)
    log.store_snapshot(SnapshotId(3, 1), b"S3")
    assert (log.log_start_offset, log.end_offset, log.latest_snapshot()) == (
        3, 3, SnapshotId(3, 1))


def test_batches_carry_the_wall_clock_append_time_given_by_the_shell() -> None:
    core = make(1, MemoryLogStore(), voters=frozenset({1}), wall_offset_ms=1_700_000_000_000)
    core.tick(core.next_wakeup_ms())
    assert isinstance(core.role, Leader)
    core.append([b"x"], 2000)
    leader_change, data = core.log.read(0, 1 << 20)
    assert leader_change.timestamp >= 1_700_000_000_000
    assert data.timestamp == 1_700_000_002_000
    assert isinstance(core.role, Leader) and not isinstance(core.role, Unattached)


def test_the_codec_keeps_the_append_time() -> None:
    from raft.kafka_messages import decode_batches, encode_batch
    from raft.messages import Batch

    raw = encode_batch(Batch(5, 3, (b"a", b"b"), timestamp=1_764_000_000_123))
    [back] = decode_batches(raw)
    assert back.timestamp == 1_764_000_000_123 and back.records == (b"a", b"b")


def test_the_metadata_log_store_replaces_a_headless_log_by_an_older_snapshot(tmp_path) -> None:
    from broker.metadata.log_store import MetadataLogStore

    store = MetadataLogStore(tmp_path, segment_bytes=200)
    for i in range(30):
        store.append((b"x%02d" % i * 10,), 1, timestamp=1_764_000_000_000 + i)
    store.flush()
    store.plog.delete_records_before(20)  # what the partition manager's retention did
    assert store.log_start_offset > 0 and store.latest_snapshot() is None
    store.store_snapshot(SnapshotId(12, 1), b"IMAGE")
    assert (store.log_start_offset, store.end_offset) == (12, 12)
    store.close()
    again = MetadataLogStore(tmp_path, segment_bytes=200)
    assert (again.log_start_offset, again.end_offset) == (12, 12)
    assert again.latest_snapshot() == SnapshotId(12, 1)
    again.close()
