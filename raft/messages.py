"""The core's own view of the KRaft RPCs.

The pure core speaks these small frozen dataclasses; the asyncio driver
(raft/driver.py) translates them to and from kio's Vote (52), BeginQuorumEpoch
(53), EndQuorumEpoch (54), Fetch (1) and FetchSnapshot (59) entities.  Keeping
the core free of wire types keeps the simulator fast and the core testable
without encoding.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_LEADER = -1


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot covers every record below `end_offset`; `epoch` is the epoch
    of the record at `end_offset - 1` (KIP-630)."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch of the replicated log.  `records` are opaque payloads;
    `control` marks a control batch (LeaderChange, KRaftVersion, Voters)."""

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: bool = False
    # the batch as Kafka v2 bytes, when known (read from disk or the wire): saves
    # encoding it again for every Fetch answer and log write
    raw: bytes | None = field(default=None, compare=False, repr=False)
    # append time, wall-clock ms (Kafka's batch timestamps); passed in by the IO shell,
    # so the core stays clock-free.  Not part of a batch's identity.
    timestamp: int = field(default=0, compare=False)
    # a control batch's record type (the key's type, Kafka's ControlRecordType): 2
    # LeaderChange, 5 KRaftVersion, 6 Voters.  One type per batch.
    control_type: int = 2

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def size_bytes(self) -> int:
        # v2 batch header is 61 bytes; each record carries ~8 bytes of framing.
        return 61 + sum(len(r) + 8 for r in self.records)


# --- Vote (KIP-595 "Vote"; KIP-996 adds pre_vote) ---------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    epoch: int  # the epoch the candidate proposes (current + 1 for a pre-vote)
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool


# --- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    epoch: int
    leader_id: int


# --- Fetch (KIP-595 "Fetch") -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int  # current_leader_epoch
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_bytes: int
    max_wait_ms: int
    # the fetcher's metadata log directory id (KIP-853 ReplicaDirectoryId), None unknown
    replica_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: ErrorCode
    epoch: int
    leader_id: int
    high_watermark: int = -1
    log_start_offset: int = 0
    batches: tuple[Batch, ...] = ()
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    snapshot_id: SnapshotId | None = None


# --- FetchSnapshot (KIP-630) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica_id: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: ErrorCode
    epoch: int
    leader_id: int
    snapshot_id: SnapshotId | None = None
    size: int = 0
    position: int = 0
    data: bytes = b""


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Send:
    """An outbound message.  Requests carry a fresh `rid` chosen by the sender;
    a response carries the `rid` of the request it answers."""

    dst: int
    rid: int
    message: Request | Response
    is_response: bool


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader_id: int  # NO_LEADER when unknown
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class LogStateLost:
    """This node's log starts at `log_start_offset` > 0 but no snapshot covers it
    (`snapshot_end` is the latest snapshot's end, -1 if none): committed records were
    lost from its disk.  Until it has loaded the leader's snapshot it neither votes nor
    stands for election, and applies nothing."""

    log_start_offset: int
    snapshot_end: int


@dataclass(frozen=True, slots=True)
class SnapshotWanted:
    """The leader was asked for a snapshot it does not have (a follower lost its log):
    the state machine should snapshot what it has applied (create_snapshot)."""


Event = LeaderChanged | SnapshotLoaded | LogStateLost | SnapshotWanted


@dataclass(slots=True)
class Output:
    sends: list[Send] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # the leader appended without flushing: make the log durable, then call
    # RaftCore.flushed(epoch, end offset) (only with leader_async_flush)
    flush: bool = False
