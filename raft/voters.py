"""The voter set and its history (KIP-853), as Kafka's `VoterSetHistory` keeps it.

The voter set in force is the latest Voters control record in the log (committed or
not), else the one the latest snapshot carries, else the bootstrap checkpoint's
(`storage format --standalone / --initial-controllers`, kraft.version 1), else the
static `controller.quorum.voters` (kraft.version 0).  KRaftVersion records are kept the
same way.  Both histories are indexed by the offset of their record, so a truncated
log forgets what it no longer holds and a snapshot can carry the set in force at its
end.  Pure: the log and the record codec are passed in.

The change a leader may make to a set (AddVoter, RemoveVoter, UpdateVoter) is computed
here too; whether the leader may make one now (it leads, its epoch is committed, no
other change is pending, the new voter is caught up) is the core's business.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import replace

from kio.schema.errors import ErrorCode

from raft.control import (
    KRAFT_VERSION_TYPE,
    VOTERS_TYPE,
    Voter,
    VoterCodec,
    VoterSet,
    split_snapshot,
)
from raft.messages import Batch
from raft.store import LogStore

# (error, message) of a refused voter change
Refusal = tuple[ErrorCode, str]


class VoterSetHistory:
    """Voters and kraft.version records by offset, over a base (snapshot, bootstrap or
    static set)."""

    __slots__ = (
        "bootstrap",
        "codec",
        "snapshot_kraft_version",
        "snapshot_voters",
        "static",
        "versions_log",
        "voters_log",
    )

    def __init__(self, static: VoterSet, bootstrap: VoterSet | None,
                 codec: VoterCodec | None) -> None:
        self.codec = codec
        self.static = static
        self.bootstrap = bootstrap
        self.voters_log: list[tuple[int, VoterSet]] = []  # (offset, voters) of Voters records
        self.versions_log: list[tuple[int, int]] = []  # (offset, kraft.version) records
        self.snapshot_voters: VoterSet | None = None
        self.snapshot_kraft_version = 0

    # ------------------------------------------------------------ reading

    @property
    def kraft_version(self) -> int:
        if self.versions_log:
            return self.versions_log[-1][1]
        if self.snapshot_voters is not None:
            return self.snapshot_kraft_version
        return 1 if self.bootstrap is not None else 0

    def latest(self) -> VoterSet:
        """The voter set in force (the latest record's, committed or not)."""
        if self.voters_log:
            return self.voters_log[-1][1]
        if self.snapshot_voters is not None:
            return self.snapshot_voters
        if self.bootstrap is not None:
            return self.bootstrap
        return self.static

    def at(self, offset: int) -> tuple[int, VoterSet | None]:
        """(kraft.version, voter set) in force after every record below `offset` (None: a
        static quorum, whose snapshots carry no voter set)."""
        vs = [v for o, v in self.voters_log if o < offset]
        kv = [k for o, k in self.versions_log if o < offset]
        if vs:
            voters: VoterSet | None = vs[-1]
        elif self.snapshot_voters is not None:
            voters = self.snapshot_voters
        else:
            voters = self.bootstrap
        if kv:
            return kv[-1], voters
        if self.snapshot_voters is not None:
            return self.snapshot_kraft_version, voters
        return (1 if self.bootstrap is not None else 0), voters

    def pending_change(self, high_watermark: int) -> int:
        """Offset of the Voters record not yet committed, else -1 (at most one)."""
        if self.voters_log and self.voters_log[-1][0] >= high_watermark:
            return self.voters_log[-1][0]
        return -1

    def previous(self) -> VoterSet:
        """The set the latest Voters record replaced."""
        if len(self.voters_log) > 1:
            return self.voters_log[-2][1]
        return self.snapshot_voters or self.bootstrap or ()

    def removed_uncommitted(self, node_id: int, directory_id: uuid.UUID | None,
                            high_watermark: int) -> bool:
        """`node_id` was a voter until a Voters record not known to be committed."""
        if self.kraft_version < 1 or not self.voters_log or \
                self.voters_log[-1][0] < high_watermark:
            return False
        return any(v.matches(node_id, directory_id) for v in self.previous())

    def bootstrap_unwritten(self) -> bool:
        """The bootstrap set is in force but not yet in the log: the first leader of the
        quorum writes it there, where replicas formatted without one learn it."""
        return (self.bootstrap is not None and self.codec is not None
                and not self.voters_log and self.snapshot_voters is None)

    # ------------------------------------------------------------ writing

    def add_voters(self, offset: int, voters: VoterSet) -> None:
        self.voters_log.append((offset, voters))

    def add_kraft_version(self, offset: int, version: int) -> None:
        self.versions_log.append((offset, version))

    def snapshot_taken(self, kraft_version: int, voters: VoterSet) -> None:
        self.snapshot_voters, self.snapshot_kraft_version = voters, kraft_version

    def load_snapshot(self, log: LogStore) -> None:
        """Read the voter set the latest snapshot carries (KIP-853's snapshot header)."""
        snap = log.latest_snapshot()
        self.snapshot_voters = None
        self.snapshot_kraft_version = 0
        if snap is None:
            return
        head = log.read_snapshot(snap, 0, 1 << 16)
        if not head.startswith(b"\x00SKV"):
            return
        kv, value, _rest = split_snapshot(log.read_snapshot(snap, 0, 1 << 40))
        if value is not None and self.codec is not None:
            self.snapshot_voters = self.codec.decode_voters(value)
            self.snapshot_kraft_version = kv

    def scan(self, log: LogStore, from_offset: int) -> None:
        """Collect the KRaftVersion and Voters records at or above `from_offset`."""
        pos = max(from_offset, log.log_start_offset)
        while pos < log.end_offset:
            batches = log.read(pos, 1 << 20)
            if not batches:
                break
            self.note_control(batches)
            pos = batches[-1].next_offset

    def note_control(self, batches: Sequence[Batch]) -> None:
        for b in batches:
            if not b.control or b.control_type not in (VOTERS_TYPE, KRAFT_VERSION_TYPE):
                continue
            if self.codec is None:
                raise ValueError("the log holds KIP-853 voter records but this node was "
                                 "given no codec to read them")
            if b.control_type == VOTERS_TYPE:
                self.voters_log.append((b.base_offset, self.codec.decode_voters(b.records[-1])))
            else:
                self.versions_log.append((b.base_offset,
                                          self.codec.decode_kraft_version(b.records[-1])))

    def prune(self, start: int, end: int) -> None:
        """Forget records outside [start, end): truncated, or below the log start (which a
        snapshot covers)."""
        self.voters_log = [e for e in self.voters_log if start <= e[0] < end]
        self.versions_log = [e for e in self.versions_log if start <= e[0] < end]


# ---------------------------------------------------------------- voter changes


def find_voter(voters: VoterSet, node_id: int) -> Voter | None:
    for v in voters:
        if v.node_id == node_id:
            return v
    return None


def replica_key(node_id: int, directory_id: uuid.UUID | None) -> str:
    """Kafka's ReplicaKey.toString(), as its voter-change errors print it."""
    d = ("<undefined>" if directory_id is None
         else base64.urlsafe_b64encode(directory_id.bytes).decode().rstrip("="))
    return f"ReplicaKey(id={node_id}, directoryId={d})"


def voter_keys(voters: VoterSet) -> str:
    """Kafka's VoterSet.voterKeys() in an error message (a Java set; Kafka's order is a hash
    set's, Skiff's the node ids')."""
    return "[" + ", ".join(replica_key(v.node_id, v.directory_id) for v in voters) + "]"


def add_refusal(voters: VoterSet, voter: Voter) -> Refusal | None:
    """Why `voter` cannot be added to `voters` (KIP-853 "AddVoter"), else None; Kafka's
    AddVoterHandler's words."""
    if find_voter(voters, voter.node_id) is not None:
        return (ErrorCode.duplicate_voter,
                f"The voter id for {replica_key(voter.node_id, voter.directory_id)} is already "
                f"part of the set of voters {voter_keys(voters)}.")
    if not voter.endpoints:
        return ErrorCode.invalid_request, "the new voter names no listener endpoint"
    return None


def with_voter(voters: VoterSet, voter: Voter) -> VoterSet:
    return tuple(sorted((*voters, voter), key=lambda v: v.node_id))


def remove_refusal(voters: VoterSet, node_id: int,
                   directory_id: uuid.UUID | None) -> Refusal | None:
    """Why `node_id` cannot be removed from `voters` (KIP-853 "RemoveVoter"), else None. As
    Kafka's RemoveVoterHandler (VoterSet.removeVoter), the last voter is not found either."""
    v = find_voter(voters, node_id)
    if v is None or not v.matches(node_id, directory_id) or not without_voter(voters, node_id):
        return (ErrorCode.voter_not_found,
                f"Cannot remove voter {replica_key(node_id, directory_id)} from the set of "
                f"voters {voter_keys(voters)}")
    return None


def without_voter(voters: VoterSet, node_id: int) -> VoterSet:
    return tuple(x for x in voters if x.node_id != node_id)


def update_refusal(voters: VoterSet, voter: Voter) -> Refusal | None:
    """Why `voter` cannot announce its endpoints (KIP-853 "UpdateVoter"), else None."""
    v = find_voter(voters, voter.node_id)
    if v is None or not v.matches(voter.node_id, voter.directory_id):
        return (ErrorCode.voter_not_found,
                f"no voter {voter.node_id} with directory id {voter.directory_id}")
    if not voter.endpoints:
        return ErrorCode.invalid_request, "no listener endpoint"
    return None


def with_endpoints(voters: VoterSet, voter: Voter) -> VoterSet:
    return tuple(replace(x, endpoints=voter.endpoints) if x.node_id == voter.node_id
                 else x for x in voters)
