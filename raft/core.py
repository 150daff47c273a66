"""The sans-IO KRaft core: one node of the metadata quorum.

Inputs are RPCs (raft/messages.py), `now_ms`, and calls from the state
machine (append, create_snapshot, resign); outputs (take_output) are messages
to send and events.  Storage is written through injected stores before a
method returns, so everything returned may be sent at once.  No clocks,
sockets, files or global randomness: time is an argument and election jitter
comes from an injected `random.Random`.

Transitions (KIP-595 "Quorum state"; KIP-996 adds Prospective).  Observers
(nodes not in the voter set) only ever are Unattached or Follower.  TRANSITIONS below
holds these (from, to) pairs as data; every role change is checked against it, and
against the epoch, which never goes back (IllegalTransition otherwise).  A role replaced
by one of its own kind (a vote counted, a deadline moved) is checked the same way.

  Unattached  -> Prospective   election deadline passes (voter)
  Unattached  -> Unattached    higher epoch seen; vote granted in this epoch
  Unattached  -> Follower      leader learned for an epoch >= ours (BeginQuorumEpoch,
                               any response naming a leader)
  Prospective -> Candidate     majority of pre-votes granted (epoch + 1, votes for itself)
  Prospective -> Prospective   election deadline passes: new pre-vote round
  Prospective -> Unattached    higher epoch seen; real vote granted in our epoch
  Prospective -> Follower      leader learned for an epoch >= ours
  Candidate   -> Leader        majority of votes granted
  Candidate   -> Candidate     a vote answer counted; lost: the next round waits a backoff
  Candidate   -> Prospective   election deadline passes (election lost or split)
  Candidate   -> Unattached    higher epoch seen without a leader
  Candidate   -> Follower      leader learned for an epoch >= ours
  Leader      -> Resigned      resign() (graceful) or check-quorum: a majority of voters
                               stopped fetching; EndQuorumEpoch is sent either way
  Leader      -> Unattached/Follower  higher epoch seen
  Resigned    -> Prospective   election deadline passes
  Resigned    -> Unattached/Follower  higher epoch seen; a leader that removed itself
                               (KIP-853) is an observer once its deadline passes
  Follower    -> Prospective   fetch deadline passes (voter); brought forward to within the
                               election backoff after two refused connections to the leader
  Follower    -> Unattached    fetch deadline passes (observer), or two refused connections
                               to the leader (observer: it then asks a voter at once);
                               EndQuorumEpoch from our
                               leader (voter; election deadline by successor rank); our
                               leader answers a Fetch saying it leads no more (voter)
  Follower    -> Follower      leader learned for a higher epoch; a Fetch answered (the
                               fetch deadline moves)
  (restart)   -> Resigned if the persisted leader is us, Follower if a leader is
                 persisted, else Unattached keeping the persisted vote

A voter whose log lost committed state (log start > 0 and no snapshot covering it, e.g.
segments deleted from its disk; `lost_committed_state()`) never goes to Prospective:
where a voter would run it acts as an observer (-> Unattached, asks a voter for the leader),
it grants no vote or pre-vote, and as a Follower it asks for the leader's snapshot
(KIP-630) instead of records.  Loading that snapshot makes it a full voter again.  So
does a follower told to truncate below its own log start (it cannot: it fetches the
snapshot instead of spinning on the same DivergingEpoch).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from random import Random
from typing import Final

from kio.schema.errors import ErrorCode

from raft.control import (
    KRAFT_VERSION_TYPE,
    VOTERS_TYPE,
    Endpoint,
    Voter,
    VoterCodec,
    VoterSet,
    encode_leader_change,
    static_voters,
    wrap_snapshot,
)
from raft.leader import NEVER, LeaderState, ReplicaProgress
from raft.messages import (
    NO_LEADER,
    Batch,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChanged,
    LogStateLost,
    Output,
    Request,
    Response,
    Send,
    SnapshotId,
    SnapshotLoaded,
    SnapshotWanted,
    VoteRequest,
    VoteResponse,
)
from raft.roles import Candidate, Follower, Leader, Prospective, Resigned, Role, Unattached
from raft.store import LogStore, QuorumStateStore
from raft.voters import (
    VoterSetHistory,
    add_refusal,
    find_voter,
    remove_refusal,
    update_refusal,
    with_endpoints,
    with_voter,
    without_voter,
)

# The role transitions, as listed above (a unit test keeps the two the same).
TRANSITIONS: Final[frozenset[tuple[type[Role], type[Role]]]] = frozenset({
    (Unattached, Prospective),
    (Unattached, Unattached),
    (Unattached, Follower),
    (Prospective, Candidate),
    (Prospective, Prospective),
    (Prospective, Unattached),
    (Prospective, Follower),
    (Candidate, Leader),
    (Candidate, Candidate),
    (Candidate, Prospective),
    (Candidate, Unattached),
    (Candidate, Follower),
    (Leader, Resigned),
    (Leader, Unattached),
    (Leader, Follower),
    (Resigned, Prospective),
    (Resigned, Unattached),
    (Resigned, Follower),
    (Follower, Prospective),
    (Follower, Unattached),
    (Follower, Follower),
})


class IllegalTransition(RuntimeError):
    """A role change TRANSITIONS does not list, or one that lowers the epoch: a bug."""


def check_transition(old: Role, new: Role) -> None:
    if (type(old), type(new)) not in TRANSITIONS:
        raise IllegalTransition(f"{type(old).__name__} -> {type(new).__name__} "
                                f"(epoch {old.epoch} -> {new.epoch})")
    if new.epoch < old.epoch:
        raise IllegalTransition(f"{type(old).__name__} -> {type(new).__name__}: the epoch "
                                f"goes back from {old.epoch} to {new.epoch}")


class NotLeaderError(Exception):
    """append() on a node that is not the leader; carries who is, if known."""

    error_code = ErrorCode.not_leader_or_follower

    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True, slots=True)
class CoreConfig:
    election_timeout_ms: int = 500
    fetch_timeout_ms: int = 500
    election_backoff_max_ms: int = 200
    fetch_max_wait_ms: int = 200
    request_timeout_ms: int = 400  # an unanswered request is sent again after this
    retry_backoff_ms: int = 50
    fetch_max_bytes: int = 1 << 20
    snapshot_chunk_bytes: int = 1 << 16
    leader_async_flush: bool = False  # True: the IO shell flushes, then calls flushed()
    # how long a new high watermark alone may wait for records to carry it to a
    # waiting Fetch (0: answer at once); saves a message per commit under load
    hw_notify_delay_ms: int = 0


@dataclass(slots=True)
class _Inflight:
    kind: str
    dst: int
    epoch: int
    expires_ms: int


@dataclass(slots=True)
class _SnapshotFetch:
    snapshot_id: SnapshotId
    data: bytearray = field(default_factory=bytearray)


class RaftCore:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: LogStore,
        state_store: QuorumStateStore,
        rng: Random,
        now_ms: int,
        config: CoreConfig | None = None,
        wall_offset_ms: int = 0,
        *,
        directory_id: uuid.UUID | None = None,
        bootstrap_voters: VoterSet | None = None,
        codec: VoterCodec | None = None,
        discovery_ids: tuple[int, ...] = (),
    ) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.log = log
        # KIP-853: the voter set and its history (raft/voters.py)
        self.voter_history = VoterSetHistory(static_voters(frozenset(voters)),
                                             bootstrap_voters, codec)
        # observers with no voter to ask (controller.quorum.bootstrap.servers): ids the IO
        # shell maps to those addresses
        self.discovery_ids = tuple(discovery_ids)
        self.voter_set: VoterSet = ()
        self.voters: frozenset[int] = frozenset()
        self.is_voter = False
        self.majority = 1
        self.voter_history.load_snapshot(log)
        self.voter_history.scan(log, log.log_start_offset)
        self._refresh_voters()
        self.state_store = state_store
        self.rng = rng
        self.cfg = config or CoreConfig()
        # now_ms + wall_offset_ms is wall-clock ms: the append time batches carry.  The
        # IO shell passes the offset (its wall clock minus its monotonic clock at start).
        self.wall_offset_ms = wall_offset_ms
        self.hw = log.log_start_offset
        snap0 = log.latest_snapshot()
        if self.hw > 0 and (snap0 is None or snap0.end_offset < self.hw):
            # a log that lost its head knows nothing committed until it loads the
            # leader's snapshot
            self.hw = 0
        self._out = Output()
        self._rid = rng.randrange(1 << 30)
        self._inflight: dict[int, _Inflight] = {}
        self._retry_at = NEVER
        self._fetch_rid: int | None = None
        self._snap: _SnapshotFetch | None = None
        self._persisted = state_store.read()
        self._leader_seen = NO_LEADER
        self._leader_contact_ms = -NEVER  # last direct word from the leader we follow
        self._fetch_failures = 0  # connection failures to that leader in a row
        self._now = now_ms
        # a follower told to truncate below its log start: it needs the leader's snapshot
        self._needs_snapshot = False
        self._lost_reported = False
        self._report_lost()
        st = self._persisted
        self.role: Role
        # The only voter has no one to wait for: it stands at once, as Kafka's does, rather
        # than after an election timeout (most of a single node's start otherwise).
        alone = self.voters == {node_id}
        if st.leader_id == node_id and self.may_stand:
            # a leader that restarts resigns and says so (KIP-595 "EndQuorumEpoch")
            self.role = Resigned(st.epoch, (), now_ms if alone else self._election_deadline())
            for v in sorted(self.voters - {node_id}):
                self._request(v, "end_epoch", EndQuorumEpochRequest(st.epoch, node_id, ()))
        elif st.leader_id >= 0 and st.leader_id != node_id:
            self.role = Follower(st.epoch, st.leader_id, st.voted_for, self._fetch_deadline())
            self._leader_seen = st.leader_id
            self._out.events.append(LeaderChanged(st.leader_id, st.epoch))
            self._send_fetch()
        else:
            deadline = now_ms if alone or not self.may_stand else self._election_deadline()
            self.role = Unattached(st.epoch, st.voted_for, deadline)

    # ------------------------------------------------------------------ API

    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def leader_id(self) -> int:
        return self.role.leader(self.node_id)

    def lost_committed_state(self) -> bool:
        """The log starts above 0 and no snapshot covers its start: records below it
        were lost (they were committed: only committed offsets are snapshotted)."""
        start = self.log.log_start_offset
        if start <= 0:
            return False
        snap = self.log.latest_snapshot()
        return snap is None or snap.end_offset < start

    def wants_snapshot(self) -> bool:
        """This node must load the leader's snapshot before it votes, runs or applies."""
        return self._needs_snapshot or self.lost_committed_state()

    def _report_lost(self) -> None:
        if not self._lost_reported and self.lost_committed_state():
            self._lost_reported = True
            snap = self.log.latest_snapshot()
            self._out.events.append(LogStateLost(
                self.log.log_start_offset, snap.end_offset if snap is not None else -1))

    def take_output(self) -> Output:
        out, self._out = self._out, Output()
        return out

    def append(self, records: list[bytes], now_ms: int) -> int:
        """Leader only: append one batch; returns the offset of its last record."""
        self._now = now_ms
        role = self.role
        if not isinstance(role, Leader):
            raise NotLeaderError(self.leader_id, role.epoch)
        batch = self.log.append(tuple(records), role.epoch,
                                timestamp=now_ms + self.wall_offset_ms)
        self._leader_flush(role)
        self._complete_parked(role)
        return batch.last_offset

    def _leader_flush(self, r: Leader) -> None:
        if self.cfg.leader_async_flush:
            # the IO shell makes it durable, then calls flushed(); the leader counts only
            # what is flushed, while followers may already fetch it (KIP-595 allows the
            # leader's write to overlap replication)
            self._out.flush = True
        else:
            self.log.flush()
        self._update_hw(r)

    def flushed(self, epoch: int, end_offset: int, now_ms: int) -> None:
        """The leader's log is durable up to `end_offset`, as of `epoch`."""
        self._now = now_ms
        r = self.role
        if isinstance(r, Leader) and r.epoch == epoch:
            self.log.mark_flushed(end_offset)
            self._update_hw(r)

    def resign(self, now_ms: int) -> None:
        """Graceful resignation (KIP-595 "EndQuorumEpoch")."""
        self._now = now_ms
        r = self.role
        if isinstance(r, Leader):
            self._resign(r)

    def create_snapshot(self, end_offset: int, data: bytes, now_ms: int) -> SnapshotId:
        """The state machine's snapshot of every record below `end_offset`
        (which must be committed); the log start advances to it (KIP-630)."""
        self._now = now_ms
        if end_offset > self.hw or end_offset <= self.log.log_start_offset:
            raise ValueError(
                f"snapshot end {end_offset} outside (log start "
                f"{self.log.log_start_offset}, high watermark {self.hw}]"
            )
        sid = SnapshotId(end_offset, self.log.epoch_at(end_offset - 1))
        kv, voters = self.voters_at(end_offset)
        codec = self.voter_history.codec
        if voters is not None and codec is not None:
            # KIP-853: a snapshot carries the voter set at its end
            data = wrap_snapshot(kv, codec.encode_voters(voters), data)
        self.log.store_snapshot(sid, data)
        if voters is not None and codec is not None:
            self.voter_history.snapshot_taken(kv, voters)
        self._prune_voters()
        return sid

    def replica_progress(self) -> tuple[dict[int, ReplicaProgress], dict[int, ReplicaProgress]]:
        """(voters, observers) as the leader sees them, for DescribeQuorum."""
        r = self.role
        if isinstance(r, Leader):
            return dict(r.state.voters), dict(r.state.observers)
        return {}, {}

    # ------------------------------------------------- voter set (KIP-853)

    @property
    def kraft_version(self) -> int:
        return self.voter_history.kraft_version

    def voter(self, node_id: int) -> Voter | None:
        return find_voter(self.voter_set, node_id)

    @property
    def may_stand(self) -> bool:
        """May run for leader: a voter, or removed only by a Voters record this node does
        not know to be committed.  Without the latter a leader that removed itself and
        lost its quorum before the removal committed could leave the others unable to
        elect anyone (they need its longer log); standing, it counts only the new set's
        votes, gets the record committed, then resigns."""
        return self.is_voter or self.voter_history.removed_uncommitted(
            self.node_id, self.directory_id, self.hw)

    def pending_voter_change(self) -> int:
        """Offset of the Voters record not yet committed, else -1 (at most one)."""
        return self.voter_history.pending_change(self.hw)

    def add_voter(self, voter: Voter, now_ms: int) -> tuple[ErrorCode, str, int]:
        """KIP-853 "AddVoter", on the leader: (error, message, offset of the new Voters
        record).  The new set takes effect at once (appended, not committed); the caller
        answers once that offset is committed.  Only a caught-up observer is added."""
        self._now = now_ms
        err = self._voter_change_error()
        if err is not None:
            return err
        refused = add_refusal(self.voter_set, voter)
        if refused is not None:
            return (*refused, -1)
        leader = self.role
        assert isinstance(leader, Leader)  # _voter_change_error checked
        if not leader.state.caught_up_observer(voter.node_id, now_ms, self.cfg.fetch_timeout_ms):
            p = leader.state.observers.get(voter.node_id)
            return (ErrorCode.request_timed_out,
                    f"node {voter.node_id} is not a caught-up observer of this leader "
                    f"(its fetch offset {p.end_offset if p else -1}, high watermark "
                    f"{self.hw})", -1)
        return ErrorCode.none, "", self._append_voters(with_voter(self.voter_set, voter))

    def remove_voter(self, node_id: int, directory_id: uuid.UUID | None,
                     now_ms: int) -> tuple[ErrorCode, str, int]:
        """KIP-853 "RemoveVoter", on the leader; the leader may remove itself (it keeps
        leading without counting itself and resigns once the record is committed)."""
        self._now = now_ms
        err = self._voter_change_error()
        if err is not None:
            return err
        refused = remove_refusal(self.voter_set, node_id, directory_id)
        if refused is not None:
            return (*refused, -1)
        return ErrorCode.none, "", self._append_voters(
            without_voter(self.voter_set, node_id))

    def update_voter(self, voter: Voter, now_ms: int) -> tuple[ErrorCode, str, int]:
        """KIP-853 "UpdateVoter": a voter announces its endpoints."""
        self._now = now_ms
        err = self._voter_change_error()
        if err is not None:
            return err
        refused = update_refusal(self.voter_set, voter)
        if refused is not None:
            return (*refused, -1)
        new = with_endpoints(self.voter_set, voter)
        if new == self.voter_set:
            return ErrorCode.none, "", self.hw - 1
        return ErrorCode.none, "", self._append_voters(new)

    def upgrade_kraft_version(self, version: int, endpoints: Mapping[int, tuple[Endpoint, ...]],
                              now_ms: int, validate_only: bool = False
                              ) -> tuple[ErrorCode, str, int]:
        """KIP-853's upgrade, on the leader of a static quorum (kraft.version 0): append a
        KRaftVersion(1) and a Voters record naming the static voters with their directory
        ids (as their Fetch requests named them; the leader's own) and `endpoints` (from
        controller.quorum.voters).  (error, message, offset of the Voters record); the
        caller answers once it is committed.  Version 0 or the version in force: nothing
        to do (offset -1)."""
        self._now = now_ms
        r = self.role
        if version == self.kraft_version:
            return ErrorCode.none, "", -1
        if not isinstance(r, Leader):
            return ErrorCode.not_leader_or_follower, "not the leader", -1
        if version < self.kraft_version:
            return (ErrorCode.invalid_update_version,
                    "Downgrading kraft.version is not supported.", -1)
        codec = self.voter_history.codec
        if version != 1 or codec is None:
            return (ErrorCode.invalid_update_version,
                    f"kraft.version {version} is not supported (0-1)", -1)
        if self.hw <= r.epoch_start_offset:
            return (ErrorCode.request_timed_out,
                    "the leader has not yet committed an offset in its epoch", -1)
        new: list[Voter] = []
        for v in self.voter_set:
            directory = self.directory_id if v.node_id == self.node_id else (
                r.state.voters[v.node_id].directory_id if v.node_id in r.state.voters
                else None)
            if directory is None:
                return (ErrorCode.request_timed_out,
                        f"the directory id of voter {v.node_id} is not known yet (it has not "
                        "fetched from this leader with one): retry", -1)
            eps = endpoints.get(v.node_id, ())
            if not eps:
                return (ErrorCode.invalid_request,
                        f"no endpoint for voter {v.node_id} in controller.quorum.voters", -1)
            new.append(Voter(v.node_id, directory, eps))
        if validate_only:
            return ErrorCode.none, "", -1
        ts = self._now + self.wall_offset_ms
        b = self.log.append((codec.encode_kraft_version(1),), r.epoch, control=True,
                            timestamp=ts, control_type=KRAFT_VERSION_TYPE)
        self.voter_history.add_kraft_version(b.base_offset, 1)
        return ErrorCode.none, "", self._append_voters(tuple(new))

    def _voter_change_error(self) -> tuple[ErrorCode, str, int] | None:
        r = self.role
        if not isinstance(r, Leader):
            return ErrorCode.not_leader_or_follower, "not the leader", -1
        if self.kraft_version < 1 or self.voter_history.codec is None:
            return (ErrorCode.unsupported_version,
                    "the quorum uses static voters (kraft.version 0): upgrade it to "
                    "kraft.version 1 (skiff features upgrade --feature kraft.version=1), or "
                    "format the controllers with --standalone or --initial-controllers", -1)
        if self.hw <= r.epoch_start_offset:
            return (ErrorCode.request_timed_out,
                    "the leader has not yet committed an offset in its epoch", -1)
        if self.pending_voter_change() >= 0:
            return (ErrorCode.request_timed_out,
                    "another voter change is in progress (its record is not committed)", -1)
        return None

    def _append_voters(self, new: VoterSet) -> int:
        r = self.role
        codec = self.voter_history.codec
        assert isinstance(r, Leader) and codec is not None
        batch = self.log.append((codec.encode_voters(new),), r.epoch, control=True,
                                timestamp=self._now + self.wall_offset_ms,
                                control_type=VOTERS_TYPE)
        self.voter_history.add_voters(batch.base_offset, new)
        self._refresh_voters()
        r.state.resign_when_committed = not self.is_voter
        self._leader_flush(r)
        self._complete_parked(r)
        return batch.last_offset

    def _prune_voters(self) -> None:
        """Forget voter records the log no longer holds (truncated, or below its start,
        which a snapshot covers)."""
        self.voter_history.prune(self.log.log_start_offset, self.log.end_offset)
        self._refresh_voters()

    def voters_at(self, offset: int) -> tuple[int, VoterSet | None]:
        """(kraft.version, voter set) in force after every record below `offset`."""
        return self.voter_history.at(offset)

    def _refresh_voters(self) -> None:
        vs = self.voter_history.latest()
        if vs == self.voter_set:
            return
        self.voter_set = vs
        self.voters = frozenset(v.node_id for v in vs)
        self.is_voter = any(v.matches(self.node_id, self.directory_id) for v in vs)
        self.majority = len(self.voters) // 2 + 1
        r = getattr(self, "role", None)
        if isinstance(r, Leader):
            r.state.set_voters(self.voters - {self.node_id}, self._now)

    def next_wakeup_ms(self) -> int:
        r = self.role
        t = NEVER
        for inf in self._inflight.values():
            t = min(t, inf.expires_ms)
        if isinstance(r, Prospective | Candidate):
            t = min(t, r.election_deadline_ms, self._retry_at)
        elif isinstance(r, Unattached | Resigned):
            t = min(t, r.election_deadline_ms)
        elif isinstance(r, Follower):
            t = min(t, r.fetch_deadline_ms)
            if self._fetch_rid is None:
                t = min(t, self._retry_at)
        elif isinstance(r, Leader):
            t = min(t, self._retry_at, r.state.next_parked_deadline(),
                    self._quorum_expiry_ms(r))
        return t

    def tick(self, now_ms: int) -> None:
        self._now = now_ms
        r = self.role
        expired = [rid for rid, inf in self._inflight.items() if inf.expires_ms <= now_ms]
        for rid in expired:
            inf = self._inflight.pop(rid)
            if rid == self._fetch_rid:
                self._fetch_rid = None
                if inf.kind in ("fetch", "fetch_snapshot") and isinstance(r, Follower):
                    self._retry_at = min(self._retry_at, now_ms)
        if isinstance(r, Leader):
            self._tick_leader(r)
        elif isinstance(r, Follower):
            if now_ms >= r.fetch_deadline_ms:
                if self.may_stand:
                    self._become_prospective()
                else:
                    self._discover(self._become_unattached(r.epoch, r.voted_for, now_ms))
            elif self._fetch_rid is None and now_ms >= self._retry_at:
                self._retry_at = NEVER
                self._send_fetch()
        elif isinstance(r, Unattached):
            if now_ms >= r.election_deadline_ms:
                if self.may_stand:
                    self._become_prospective()
                else:
                    self._discover(r)
        elif isinstance(r, Prospective | Candidate):
            if now_ms >= r.election_deadline_ms:
                self._become_prospective()
            elif now_ms >= self._retry_at:
                self._send_votes(r)
        elif isinstance(r, Resigned) and now_ms >= r.election_deadline_ms:
            if self.may_stand:
                self._become_prospective()
            else:
                # a leader that removed itself: an observer now
                self._discover(self._become_unattached(r.epoch, self.node_id, now_ms))

    def handle_request(self, src: int, rid: int, request: Request, now_ms: int) -> None:
        self._now = now_ms
        if isinstance(request, FetchRequest):
            self._on_fetch(src, rid, request)
        elif isinstance(request, VoteRequest):
            self._on_vote(src, rid, request)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(src, rid, request)
        elif isinstance(request, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(src, rid, request)
        else:
            self._on_fetch_snapshot(src, rid, request)

    def handle_response(self, src: int, rid: int, response: Response, now_ms: int) -> None:
        self._now = now_ms
        inf = self._inflight.get(rid)
        if inf is None or inf.dst != src:
            return  # stale, duplicated, or from before a transition
        del self._inflight[rid]
        if isinstance(response, FetchResponse):
            self._on_fetch_response(src, rid, response)
        elif isinstance(response, VoteResponse):
            self._on_vote_response(src, inf, response)
        elif isinstance(response, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(src, rid, response)
        else:
            self._observe(response.epoch, response.leader_id)

    def handle_failure(self, dst: int, rid: int, now_ms: int) -> None:
        """The transport could not deliver request `rid` (connection refused or
        reset): retry after the backoff instead of the request timeout."""
        self._now = now_ms
        inf = self._inflight.pop(rid, None)
        if inf is None:
            return
        if rid == self._fetch_rid:
            self._fetch_rid = None
            r = self.role
            if isinstance(r, Follower) and inf.dst == r.leader_id:
                self._fetch_failures += 1
                if self._fetch_failures >= 2 and self.may_stand:
                    # the leader's process refuses connections: it is gone.  Stop
                    # vouching for it (grant pre-votes) and run soon, at a random
                    # point so the survivors do not split their votes.
                    self._leader_contact_ms = -NEVER
                    soon = now_ms + self.rng.randint(0, max(1, self.cfg.election_backoff_max_ms))
                    if soon < r.fetch_deadline_ms:
                        self._move_deadline(replace(r, fetch_deadline_ms=soon))
                elif self._fetch_failures >= 2:
                    # An observer hears of a new leader only by asking (BeginQuorumEpoch
                    # goes to voters): look for it now, not after the whole fetch timeout.
                    self._discover(self._become_unattached(r.epoch, r.voted_for, now_ms))
        self._retry_at = min(self._retry_at, now_ms + self.cfg.retry_backoff_ms)

    # --------------------------------------------------------- transitions

    def _election_deadline(self) -> int:
        t = self.cfg.election_timeout_ms
        return self._now + t + self.rng.randint(0, t)

    def _fetch_deadline(self) -> int:
        # jittered, so followers that lost the leader together do not all run at once
        return self._now + self.cfg.fetch_timeout_ms + self.rng.randint(
            0, self.cfg.election_backoff_max_ms // 2)

    def _backoff(self) -> int:
        return self._now + self.rng.randint(1, max(1, self.cfg.election_backoff_max_ms))

    def _move_deadline(self, role: Follower) -> None:
        """The follower's fetch deadline moves; nothing else changes, nothing to persist."""
        check_transition(self.role, role)
        self.role = role

    def _set_role(self, role: Role) -> None:
        old = self.role
        check_transition(old, role)
        self.role = role
        if type(old) is not type(role) or old.epoch != role.epoch:
            self._inflight.clear()
            self._fetch_rid = None
            self._fetch_failures = 0
            self._snap = None
            self._retry_at = NEVER
            if isinstance(old, Leader):
                # every request gets an answer: an unanswered one holds one of the
                # connection's in-flight slots on the server for good (and it has only so
                # many)
                for src, (rid, req, _deadline) in old.state.take_parked().items():
                    self._reply(src, rid, FetchResponse(self._fetch_error(req.epoch),
                                                        role.epoch, self.leader_id))
        st = role.election(self.node_id)
        if st != self._persisted:
            self.state_store.write(st)
            self._persisted = st
        leader = self.leader_id
        if leader != self._leader_seen or (old is not None and old.epoch != role.epoch):
            self._leader_seen = leader
            self._out.events.append(LeaderChanged(leader, role.epoch))

    def _observe(self, epoch: int, leader_id: int) -> bool:
        """Apply the epoch/leader any message carries; True if the role changed."""
        r = self.role
        known = leader_id >= 0 and leader_id != self.node_id
        if epoch > r.epoch:
            if known:
                self._become_follower(epoch, leader_id, NO_LEADER)
            else:
                deadline = self._election_deadline() if self.may_stand else self._now
                self._set_role(Unattached(epoch, NO_LEADER, deadline))
            return True
        if epoch == r.epoch and known and isinstance(r, Unattached | Prospective | Candidate):
            self._become_follower(epoch, leader_id, r.election(self.node_id).voted_for)
            return True
        return False

    def _become_unattached(self, epoch: int, voted_for: int, deadline_ms: int) -> Unattached:
        u = Unattached(epoch, voted_for, deadline_ms)
        self._set_role(u)
        return u

    def _become_follower(self, epoch: int, leader_id: int, voted_for: int) -> None:
        self._set_role(Follower(epoch, leader_id, voted_for, self._fetch_deadline()))
        self._send_fetch()

    def _become_prospective(self) -> None:
        r = self.role
        if self.wants_snapshot():
            # lost committed state: it must not stand (it could win with a log that
            # misses committed records); as an observer would, it looks for the leader
            self._report_lost()
            # (the vote it persisted: its own as a Candidate, Leader or Resigned)
            voted = r.election(self.node_id).voted_for
            self._discover(self._become_unattached(r.epoch, voted, self._now))
            return
        voted = r.election(self.node_id).voted_for
        p = Prospective(r.epoch, voted, frozenset({self.node_id}), frozenset(),
                        self._election_deadline())
        self._set_role(p)
        self._send_votes(p)
        self._check_election()

    def _become_candidate(self) -> None:
        r = self.role
        c = Candidate(r.epoch + 1, frozenset({self.node_id}), frozenset(),
                      self._election_deadline())
        self._set_role(c)
        self._send_votes(c)
        self._check_election()

    def _become_leader(self) -> None:
        epoch = self.role.epoch
        start = self.log.end_offset
        others = (v for v in self.voters if v != self.node_id)
        leader = Leader(epoch, start, LeaderState(others, self._now, not self.is_voter))
        self._set_role(leader)
        granting = tuple(sorted(self.voters))
        self.log.append(
            (encode_leader_change(self.node_id, tuple(sorted(self.voters)), granting),),
            epoch,
            control=True,
            timestamp=self._now + self.wall_offset_ms,
        )
        hist = self.voter_history
        if hist.bootstrap_unwritten():
            # KIP-853: the first leader of a quorum bootstrapped with a voter set (storage
            # format --standalone / --initial-controllers) writes it into the log, where
            # replicas formatted without one learn it
            assert hist.codec is not None and hist.bootstrap is not None
            ts = self._now + self.wall_offset_ms
            b = self.log.append((hist.codec.encode_kraft_version(1),), epoch, control=True,
                                timestamp=ts, control_type=KRAFT_VERSION_TYPE)
            hist.add_kraft_version(b.base_offset, 1)
            b = self.log.append((hist.codec.encode_voters(hist.bootstrap),), epoch,
                                control=True, timestamp=ts, control_type=VOTERS_TYPE)
            hist.add_voters(b.base_offset, hist.bootstrap)
        self._send_begin_epoch(leader)
        self._leader_flush(leader)

    def _resign(self, r: Leader) -> None:
        successors = r.state.successors()
        self._set_role(Resigned(r.epoch, successors, self._election_deadline()))
        for v in successors:
            self._request(v, "end_epoch", EndQuorumEpochRequest(r.epoch, self.node_id, successors))

    # ------------------------------------------------------------- sending

    def _request(self, dst: int, kind: str, message: Request, timeout_ms: int = 0) -> int:
        self._rid += 1
        rid = self._rid
        self._inflight[rid] = _Inflight(
            kind, dst, self.role.epoch, self._now + (timeout_ms or self.cfg.request_timeout_ms)
        )
        self._out.sends.append(Send(dst, rid, message, False))
        return rid

    def _reply(self, dst: int, rid: int, message: Response) -> None:
        self._out.sends.append(Send(dst, rid, message, True))

    def _send_votes(self, r: Prospective | Candidate) -> None:
        pre = isinstance(r, Prospective)
        req = VoteRequest(
            r.epoch + 1 if pre else r.epoch,
            self.node_id,
            self.log.last_epoch(),
            self.log.end_offset,
            pre,
        )
        waiting = {inf.dst for inf in self._inflight.values() if inf.kind == "vote"}
        for v in sorted(self.voters - r.granted - r.rejected - waiting):
            self._request(v, "vote", req)
        self._retry_at = self._now + self.cfg.retry_backoff_ms

    def _send_begin_epoch(self, r: Leader) -> None:
        waiting = {inf.dst for inf in self._inflight.values() if inf.kind == "begin_epoch"}
        for v, p in sorted(r.state.voters.items()):
            if not p.fetched and v not in waiting:
                self._request(v, "begin_epoch", BeginQuorumEpochRequest(r.epoch, self.node_id))
        self._retry_at = self._now + self.cfg.request_timeout_ms

    def _send_fetch(self) -> None:
        r = self.role
        if isinstance(r, Follower):
            dst = r.leader_id
        else:
            return
        if self._snap is not None:
            req: Request = FetchSnapshotRequest(
                r.epoch, self.node_id, self._snap.snapshot_id, len(self._snap.data),
                self.cfg.snapshot_chunk_bytes,
            )
            kind = "fetch_snapshot"
        elif self.wants_snapshot():
            # "offsets up to my log end, but no epoch you can check": the leader answers
            # with a snapshot (KIP-630) covering every committed record below our log end,
            # never with records this log could not place
            req = FetchRequest(r.epoch, self.node_id, self.log.end_offset, 0,
                               self.cfg.fetch_max_bytes, 0, self.directory_id)
            kind = "fetch"
        else:
            req = FetchRequest(
                r.epoch, self.node_id, self.log.end_offset, self.log.last_epoch(),
                self.cfg.fetch_max_bytes, self.cfg.fetch_max_wait_ms, self.directory_id,
            )
            kind = "fetch"
        self._retry_at = NEVER
        wait = self.cfg.fetch_max_wait_ms if kind == "fetch" else 0
        # a lost Fetch must be retried well before the fetch timeout gives up on the leader
        patience = min(self.cfg.request_timeout_ms,
                       max(1, (self.cfg.fetch_timeout_ms - wait) // 2))
        self._fetch_rid = self._request(dst, kind, req, wait + patience)

    def _discover(self, r: Unattached) -> None:
        """An observer without a leader asks a random voter (KIP-595 "Fetch":
        a non-leader answers with the leader it knows)."""
        pool = (sorted(self.voters - {self.node_id}) or list(self.discovery_ids)
                or sorted(self.voters))
        if not pool:
            self._set_role(replace(r, election_deadline_ms=self._now
                                   + self.cfg.retry_backoff_ms))
            return
        dst = self.rng.choice(pool)
        if self.wants_snapshot():
            req = FetchRequest(r.epoch, self.node_id, self.log.end_offset, 0,
                               self.cfg.fetch_max_bytes, 0, self.directory_id)
        else:
            req = FetchRequest(r.epoch, self.node_id, self.log.end_offset,
                               self.log.last_epoch(), self.cfg.fetch_max_bytes, 0,
                               self.directory_id)
        self._request(dst, "fetch", req)
        self._set_role(replace(r, election_deadline_ms=self._now + self.cfg.retry_backoff_ms))

    # ---------------------------------------------------------- elections

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset)

    def _on_vote(self, src: int, rid: int, req: VoteRequest) -> None:
        """KIP-595 "Vote" and KIP-996 "PreVote": one vote per epoch, only for a
        log at least as up to date; a pre-vote changes no state."""
        r = self.role
        # KIP-853: with a dynamic voter set the candidate may know of a newer set than ours
        # (a Voters record not yet fetched here, maybe the one that makes us a voter): a
        # replica votes whatever its own view; the candidate counts only its voters' votes
        if self.kraft_version < 1 and (not self.is_voter
                                       or req.candidate_id not in self.voters):
            self._reply(src, rid, VoteResponse(ErrorCode.inconsistent_voter_set, r.epoch,
                                               self.leader_id, False, req.pre_vote))
            return
        if req.epoch < r.epoch:
            self._reply(src, rid, VoteResponse(ErrorCode.none, r.epoch, self.leader_id,
                                               False, req.pre_vote))
            return
        # a voter that lost committed state grants nothing: its log cannot tell whether
        # the candidate holds every committed record
        log_ok = (self._log_up_to_date(req.last_offset_epoch, req.last_offset)
                  and not self.wants_snapshot())
        if req.pre_vote:
            # KIP-996: refuse while we lead or have heard from our leader within
            # the fetch timeout; otherwise grant to an up-to-date log
            in_contact = isinstance(r, Leader) or (
                isinstance(r, Follower)
                and self._now - self._leader_contact_ms < self.cfg.fetch_timeout_ms
            )
            grant = log_ok and not in_contact
            self._reply(src, rid, VoteResponse(ErrorCode.none, r.epoch, self.leader_id,
                                               grant, True))
            return
        if req.epoch > r.epoch:
            self._set_role(Unattached(req.epoch, NO_LEADER, self._election_deadline()
                                      if self.may_stand else self._now))
            r = self.role
        grant = False
        if (
            isinstance(r, Unattached | Prospective)
            and r.voted_for in (NO_LEADER, req.candidate_id)
            and log_ok
        ):
            grant = True
            self._set_role(Unattached(r.epoch, req.candidate_id, self._election_deadline()
                                      if self.may_stand else self._now))
        self._reply(src, rid, VoteResponse(ErrorCode.none, r.epoch, self.leader_id, grant, False))

    def _on_vote_response(self, src: int, inf: _Inflight, resp: VoteResponse) -> None:
        # a granted pre-vote names the leader the voter lost contact with: not a reason
        # to follow it again
        same = resp.vote_granted and resp.epoch == self.role.epoch
        if self._observe(resp.epoch, NO_LEADER if same else resp.leader_id):
            return
        r = self.role
        if inf.epoch != r.epoch or resp.error != ErrorCode.none:
            return
        if not isinstance(r, Prospective | Candidate):
            return
        if isinstance(r, Prospective) != resp.pre_vote:
            return
        if resp.vote_granted:
            self._set_role(replace(r, granted=r.granted | {src}))
        else:
            self._set_role(replace(r, rejected=r.rejected | {src}))
        self._check_election()

    def _check_election(self) -> None:
        r = self.role
        if not isinstance(r, Prospective | Candidate):
            return
        if len(r.granted & self.voters) >= self.majority:
            if isinstance(r, Prospective):
                self._become_candidate()
            else:
                self._become_leader()
        elif len(r.rejected & self.voters) > len(self.voters) - self.majority:
            # lost: wait a random backoff, then try again
            self._set_role(replace(r, election_deadline_ms=min(r.election_deadline_ms,
                                                               self._backoff())))
            self._retry_at = NEVER

    def _on_begin_quorum_epoch(self, src: int, rid: int, req: BeginQuorumEpochRequest) -> None:
        """KIP-595 "BeginQuorumEpoch": the new leader announces itself."""
        r = self.role
        if not self.is_voter and self.kraft_version < 1:
            self._reply(src, rid, BeginQuorumEpochResponse(ErrorCode.inconsistent_voter_set,
                                                           r.epoch, self.leader_id))
            return
        if req.epoch < r.epoch:
            self._reply(src, rid, BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch,
                                                           r.epoch, self.leader_id))
            return
        self._observe(req.epoch, req.leader_id)
        if isinstance(self.role, Follower) and self.role.leader_id == src:
            self._leader_contact_ms = self._now
        self._reply(src, rid, BeginQuorumEpochResponse(ErrorCode.none, self.role.epoch,
                                                       self.leader_id))

    def _on_end_quorum_epoch(self, src: int, rid: int, req: EndQuorumEpochRequest) -> None:
        """KIP-595 "EndQuorumEpoch": the leader resigned; preferred successors
        start their election sooner, in the order given."""
        r = self.role
        if req.epoch < r.epoch:
            self._reply(src, rid, EndQuorumEpochResponse(ErrorCode.fenced_leader_epoch,
                                                         r.epoch, self.leader_id))
            return
        self._observe(req.epoch, req.leader_id)
        r = self.role
        if (
            self.may_stand
            and isinstance(r, Follower)
            and r.epoch == req.epoch
            and r.leader_id == req.leader_id
        ):
            unit = max(1, self.cfg.election_backoff_max_ms // max(1, len(self.voters)))
            succ = req.preferred_successors
            rank = succ.index(self.node_id) if self.node_id in succ else len(self.voters)
            deadline = self._now + rank * unit + self.rng.randint(0, unit)
            self._set_role(Unattached(r.epoch, r.voted_for, deadline))
        self._reply(src, rid, EndQuorumEpochResponse(ErrorCode.none, self.role.epoch,
                                                     self.leader_id))

    # ------------------------------------------------------------- leader

    def _quorum_expiry_ms(self, r: Leader) -> int:
        """When check-quorum fails if nobody else fetches: the time at which
        fewer than a majority have fetched within 1.5 fetch timeouts."""
        need = self.majority - (1 if self.is_voter else 0)  # a voter leader counts itself
        return r.state.quorum_expiry_ms(self._now, need, (self.cfg.fetch_timeout_ms * 3) // 2)

    def _tick_leader(self, r: Leader) -> None:
        now = self._now
        if r.state.resign_when_committed and self.pending_voter_change() < 0:
            # its own removal is committed: tell the followers, then hand over (KIP-853
            # "RemoveVoter")
            r.state.resign_when_committed = False
            self._complete_parked(r)
            self._resign(r)
            return
        if now >= self._quorum_expiry_ms(r):
            self._resign(r)
            return
        for src, (rid, req, _deadline) in r.state.take_expired(now):
            self._answer_fetch(r, src, rid, req)
        if now >= self._retry_at:
            self._retry_at = NEVER
            self._send_begin_epoch(r)
            if r.state.all_voters_fetched():
                self._retry_at = NEVER

    def _update_hw(self, r: Leader) -> bool:
        # a leader removed from the voter set (KIP-853) leads on without counting itself
        candidate = r.state.high_watermark(self.log.flushed_offset if self.is_voter else None,
                                           self.majority)
        if candidate > r.epoch_start_offset and candidate > self.hw:
            self.hw = candidate
            if r.state.resign_when_committed and self.pending_voter_change() < 0:
                self._retry_at = min(self._retry_at, self._now)  # resign at the next tick
            delay = self.cfg.hw_notify_delay_ms
            if delay <= 0:
                self._complete_parked(r)
            else:
                # a new high watermark alone waits a moment for records to ride with
                r.state.hurry_parked(self._now + delay)
            return True
        return False

    def _complete_parked(self, r: Leader) -> None:
        for src, (rid, req, _deadline) in r.state.take_parked().items():
            self._answer_fetch(r, src, rid, req)

    def _answer_fetch(self, r: Leader, src: int, rid: int, req: FetchRequest) -> None:
        batches = self.log.read(req.fetch_offset, req.max_bytes)
        p = r.state.progress(src)
        if p is not None:
            p.last_hw_sent = self.hw
        self._reply(src, rid, FetchResponse(
            ErrorCode.none, r.epoch, self.node_id, self.hw, self.log.log_start_offset,
            tuple(batches),
        ))

    def _fetch_error(self, req_epoch: int) -> ErrorCode:
        e = self.role.epoch
        if req_epoch < e:
            return ErrorCode.fenced_leader_epoch
        if req_epoch > e:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.not_leader_or_follower

    def _on_fetch(self, src: int, rid: int, req: FetchRequest) -> None:
        """KIP-595 "Fetch": validate (FetchOffset, LastFetchedEpoch) against
        the log; answer records, a DivergingEpoch, or a SnapshotId (KIP-630)."""
        r = self.role
        if not isinstance(r, Leader) or req.epoch != r.epoch:
            self._reply(src, rid, FetchResponse(self._fetch_error(req.epoch), r.epoch,
                                                self.leader_id))
            return
        log = self.log
        start = log.log_start_offset
        snap = log.latest_snapshot()
        off, last_epoch = req.fetch_offset, req.last_fetched_epoch
        if off < start:
            self._reply(src, rid, FetchResponse(ErrorCode.none, r.epoch, self.node_id, self.hw,
                                                start, snapshot_id=snap))
            return
        valid = off == 0 or (
            snap is not None and off == start and last_epoch == snap.epoch
        )
        if not valid:
            ep, end = log.end_offset_for_epoch(last_epoch)
            if ep == last_epoch and off <= end:
                valid = True
            else:
                target = min(end, off) if ep >= 0 else start
                if last_epoch == 0 and off > 0:
                    # Offsets without an epoch (records of epoch 0 do not exist: the
                    # first leader's epoch is 1): a follower whose log lost its head
                    # asks for a snapshot covering every committed record it may have
                    # held.
                    # It could have acknowledged records up to `off`: an older snapshot
                    # would let it vote again without them.
                    need = min(off, self.hw)
                    if snap is None or snap.end_offset < need:
                        # ask the state machine for one; the follower retries
                        self._out.events.append(SnapshotWanted())
                        snap = None
                    self._reply(src, rid, FetchResponse(ErrorCode.none, r.epoch, self.node_id,
                                                        self.hw, start, snapshot_id=snap))
                elif start > 0 and target <= start:
                    # the follower must go back below our log start (KIP-630)
                    self._reply(src, rid, FetchResponse(ErrorCode.none, r.epoch, self.node_id,
                                                        self.hw, start, snapshot_id=snap))
                else:
                    self._reply(src, rid, FetchResponse(
                        ErrorCode.none, r.epoch, self.node_id, self.hw, start,
                        diverging_epoch=max(ep, 0), diverging_end_offset=target,
                    ))
                return
        p = r.state.fetched(src, off, self._now, self.hw, req.replica_directory_id)
        replaced = r.state.unpark(src)
        if replaced is not None:
            # A newer Fetch from the same node (its earlier ones were held up on the way,
            # e.g. by a network partition, and arrive together): answer the old one now,
            # the follower ignores it; left unanswered it would hold an in-flight slot of
            # the connection for good, and once all are held the connection is dead.
            self._answer_fetch(r, src, replaced[0], replaced[1])
        if src in r.state.voters:
            self._update_hw(r)
        news = self.hw > p.last_hw_sent
        if off < log.end_offset or req.max_wait_ms <= 0 or (
            news and self.cfg.hw_notify_delay_ms <= 0
        ):
            self._answer_fetch(r, src, rid, req)
        else:
            wait = min(req.max_wait_ms, self.cfg.fetch_max_wait_ms)
            if news:
                wait = min(wait, self.cfg.hw_notify_delay_ms)
            r.state.park(src, rid, req, self._now + wait)

    def _on_fetch_snapshot(self, src: int, rid: int, req: FetchSnapshotRequest) -> None:
        """KIP-630 "FetchSnapshot": serve a chunk of the snapshot at `position`."""
        r = self.role
        if not isinstance(r, Leader) or req.epoch != r.epoch:
            self._reply(src, rid, FetchSnapshotResponse(self._fetch_error(req.epoch), r.epoch,
                                                        self.leader_id))
            return
        size = self.log.snapshot_size(req.snapshot_id)
        if size is None:
            err = ErrorCode.snapshot_not_found
        elif req.position < 0 or req.position > size:
            err = ErrorCode.position_out_of_range
        else:
            err = ErrorCode.none
        if err != ErrorCode.none or size is None:
            self._reply(src, rid, FetchSnapshotResponse(err, r.epoch, self.node_id,
                                                        req.snapshot_id))
            return
        r.state.snapshot_fetched(src, self._now)
        chunk = self.log.read_snapshot(req.snapshot_id, req.position,
                                       min(req.max_bytes, self.cfg.snapshot_chunk_bytes))
        self._reply(src, rid, FetchSnapshotResponse(ErrorCode.none, r.epoch, self.node_id,
                                                    req.snapshot_id, size, req.position, chunk))

    # ----------------------------------------------------------- follower

    def _advance_hw(self, leader_hw: int) -> None:
        hw = min(leader_hw, self.log.flushed_offset)
        if hw > self.hw:
            self.hw = hw

    def _fetch_ok(self, src: int) -> Follower | None:
        r = self.role
        if isinstance(r, Follower) and src == r.leader_id:
            r = replace(r, fetch_deadline_ms=self._fetch_deadline())
            self._move_deadline(r)
            self._leader_contact_ms = self._now
            self._fetch_failures = 0
            return r
        return None

    def _on_fetch_response(self, src: int, rid: int, resp: FetchResponse) -> None:
        if rid == self._fetch_rid:
            self._fetch_rid = None
        if self._observe(resp.epoch, resp.leader_id):
            return
        r = self.role
        if not isinstance(r, Follower) or src != r.leader_id or resp.epoch != r.epoch:
            return
        if resp.error != ErrorCode.none:
            if resp.leader_id == NO_LEADER and self.may_stand:
                # our leader says it leads no more (it resigned or restarted)
                self._set_role(Unattached(r.epoch, r.voted_for, self._backoff()))
            else:
                self._retry_at = self._now + self.cfg.retry_backoff_ms
            return
        self._fetch_ok(src)
        log = self.log
        if resp.snapshot_id is not None:
            sid = resp.snapshot_id
            holds = not self.wants_snapshot() and log.end_offset >= sid.end_offset and (
                log.epoch_at(sid.end_offset - 1) == sid.epoch or log.latest_snapshot() == sid
            )
            if holds:
                # our log agrees up to the snapshot: only the suffix diverges
                log.truncate_to(sid.end_offset)
                self._prune_voters()
            else:
                self._snap = _SnapshotFetch(sid)
        elif resp.diverging_end_offset >= 0:
            ep, end = log.end_offset_for_epoch(resp.diverging_epoch)
            if resp.diverging_end_offset < log.log_start_offset:
                # below our log start: truncating cannot reach it (it would spin on the
                # same answer); fetch the leader's snapshot instead
                self._needs_snapshot = True
            else:
                # no epoch of ours <= the diverging one: our log start (a snapshot's end)
                target = min(resp.diverging_end_offset, end if ep >= 0 else log.log_start_offset)
                log.truncate_to(max(target, log.log_start_offset))
                self._prune_voters()
        elif self.wants_snapshot():
            # the leader has no snapshot yet (it is making one): ask again shortly
            self._retry_at = self._now + self.cfg.retry_backoff_ms
            return
        elif resp.batches:
            end = log.end_offset
            batches = tuple(_trim(b, end) for b in resp.batches if b.next_offset > end)
            if not batches or batches[0].base_offset != end:
                self._send_fetch()
                return
            log.append_batches(batches)
            log.flush()
            if any(b.control for b in batches):
                self.voter_history.note_control(batches)
                self._refresh_voters()
            self._advance_hw(resp.high_watermark)
        else:
            self._advance_hw(resp.high_watermark)
        self._send_fetch()

    def _on_fetch_snapshot_response(self, src: int, rid: int, resp: FetchSnapshotResponse) -> None:
        if rid == self._fetch_rid:
            self._fetch_rid = None
        if self._observe(resp.epoch, resp.leader_id):
            return
        r = self.role
        snap = self._snap
        if not isinstance(r, Follower) or src != r.leader_id or snap is None:
            return
        if resp.error != ErrorCode.none or resp.snapshot_id != snap.snapshot_id:
            # the leader no longer has it: start over with a Fetch
            self._snap = None
            self._retry_at = self._now + self.cfg.retry_backoff_ms
            return
        self._fetch_ok(src)
        if resp.position == len(snap.data) and len(snap.data) + len(resp.data) <= resp.size:
            snap.data += resp.data
        if len(snap.data) == resp.size:
            self.log.store_snapshot(snap.snapshot_id, bytes(snap.data))
            self.voter_history.load_snapshot(self.log)
            self._prune_voters()
            self._snap = None
            self._needs_snapshot = False
            self._lost_reported = False
            self.hw = max(self.hw, snap.snapshot_id.end_offset)
            self._out.events.append(SnapshotLoaded(snap.snapshot_id))
        self._send_fetch()


def _trim(batch: Batch, from_offset: int) -> Batch:
    if batch.base_offset >= from_offset:
        return batch
    cut = from_offset - batch.base_offset
    return Batch(from_offset, batch.epoch, batch.records[cut:], batch.control,
                 control_type=batch.control_type)
