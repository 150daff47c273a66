"""The roles a node of the quorum can be in (KIP-595 "Quorum state", KIP-996).

Small frozen values; the core (raft/core.py) replaces its role on every
transition.  The transition table (TRANSITIONS) is at the top of raft/core.py.
Each role says what it persists (`election`, Kafka's `EpochState.election()`) and
which leader it knows (`leader`), so the core asks the role instead of testing its
kind.  The Leader carries its view of the other replicas (raft/leader.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raft.leader import LeaderState
from raft.messages import NO_LEADER
from raft.store import QuorumState


@dataclass(frozen=True, slots=True)
class Unattached:
    """No known leader in `epoch`; may have voted.  Voters start a pre-vote
    at `election_deadline_ms`; observers look for the leader then."""

    epoch: int
    voted_for: int
    election_deadline_ms: int

    def election(self, node_id: int) -> QuorumState:
        return QuorumState(self.epoch, NO_LEADER, self.voted_for)

    def leader(self, node_id: int) -> int:
        return NO_LEADER


@dataclass(frozen=True, slots=True)
class Prospective:
    """Asking for pre-votes for `epoch + 1` without bumping the epoch (KIP-996)."""

    epoch: int
    voted_for: int
    granted: frozenset[int]
    rejected: frozenset[int]
    election_deadline_ms: int

    def election(self, node_id: int) -> QuorumState:
        return QuorumState(self.epoch, NO_LEADER, self.voted_for)

    def leader(self, node_id: int) -> int:
        return NO_LEADER


@dataclass(frozen=True, slots=True)
class Candidate:
    """Voted for itself in `epoch` and asks the others."""

    epoch: int
    granted: frozenset[int]
    rejected: frozenset[int]
    election_deadline_ms: int

    def election(self, node_id: int) -> QuorumState:
        return QuorumState(self.epoch, NO_LEADER, node_id)

    def leader(self, node_id: int) -> int:
        return NO_LEADER


@dataclass(frozen=True, slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int  # offset of this epoch's LeaderChange record
    # its view of the other replicas in this epoch (raft/leader.py): mutable, and not
    # part of the role's value
    state: LeaderState = field(compare=False, repr=False)

    def election(self, node_id: int) -> QuorumState:
        return QuorumState(self.epoch, node_id, node_id)

    def leader(self, node_id: int) -> int:
        return node_id


@dataclass(frozen=True, slots=True)
class Follower:
    epoch: int
    leader_id: int
    voted_for: int
    fetch_deadline_ms: int  # no successful Fetch answer by then: the leader is gone

    def election(self, node_id: int) -> QuorumState:
        return QuorumState(self.epoch, self.leader_id, self.voted_for)

    def leader(self, node_id: int) -> int:
        return self.leader_id


@dataclass(frozen=True, slots=True)
class Resigned:
    """A former leader of `epoch` that stepped down (EndQuorumEpoch sent)."""

    epoch: int
    preferred_successors: tuple[int, ...]
    election_deadline_ms: int

    def election(self, node_id: int) -> QuorumState:
        # persisted as the leader of its epoch: a restart comes back Resigned
        return QuorumState(self.epoch, node_id, node_id)

    def leader(self, node_id: int) -> int:
        return NO_LEADER


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned
