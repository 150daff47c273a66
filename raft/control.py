"""KRaft control records carried in the metadata log.

Control record types (the key's type, Kafka's ControlRecordType): 2 LeaderChange,
5 KRaftVersion, 6 Voters (KIP-853).  The core reads the voter set from Voters records
through a `VoterCodec` it is given (raft/kafka_messages.py implements it on kio's
VotersRecord and KRaftVersionRecord schemas): the pure core does no Kafka encoding of
its own beyond the small LeaderChange writer below.

A LeaderChange control record (key: version 0, type 2) has as its value
Kafka's LeaderChangeMessage v0, a flexible schema:
  Version int16, LeaderId int32, Voters [VoterId int32], GrantingVoters [VoterId int32]
with compact arrays (unsigned varint length + 1) and empty tagged-field sections.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Protocol

LEADER_CHANGE_TYPE = 2
KRAFT_VERSION_TYPE = 5
VOTERS_TYPE = 6
CONTROL_KEY_LEADER_CHANGE = struct.pack(">hh", 0, LEADER_CHANGE_TYPE)
_MAX_VOTERS = 10_000


def _uvarint(n: int) -> bytes:
    """An unsigned varint (a compact array's length + 1). The pure core imports nothing from
    the Kafka wire package (broker/protocol), so this one small writer lives here."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _voters(ids: tuple[int, ...]) -> bytes:
    return _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", v) + b"\x00" for v in ids)


def encode_leader_change(
    leader_id: int, voters: tuple[int, ...], granting: tuple[int, ...]
) -> bytes:
    return (
        struct.pack(">hi", 0, leader_id) + _voters(voters) + _voters(granting) + b"\x00"
    )


def decode_leader_change(value: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader_id, voters, granting voters); ValueError on malformed input."""
    if len(value) < 6:
        raise ValueError("LeaderChange too short")
    _version, leader = struct.unpack_from(">hi", value, 0)
    pos = 6
    lists: list[tuple[int, ...]] = []
    for _ in range(2):
        n, pos = _read_uvarint(value, pos)
        count = n - 1
        if count < 0 or count > _MAX_VOTERS or pos + count * 5 > len(value):
            raise ValueError("LeaderChange voter list out of range")
        ids = []
        for _ in range(count):
            (vid,) = struct.unpack_from(">i", value, pos)
            pos += 4
            tags, pos = _read_uvarint(value, pos)
            if tags != 0:
                raise ValueError("unexpected tagged fields")
            ids.append(vid)
        lists.append(tuple(ids))
    return int(leader), lists[0], lists[1]



@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # listener name, e.g. CONTROLLER
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """A voter is a replica id and the directory id of its metadata log directory
    (KIP-853 "ReplicaKey"): a controller whose disk was replaced comes back with a new
    directory id and is not the same voter.  `directory_id` None: unknown (static
    `controller.quorum.voters`, kraft.version 0)."""

    node_id: int
    directory_id: uuid.UUID | None = None
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def key(self) -> tuple[int, uuid.UUID | None]:
        return (self.node_id, self.directory_id)

    def matches(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """`node_id` with `directory_id` is this voter.  A voter without a directory id
        (static voters) is known by its id alone; one with a directory id only by both (as
        Kafka's ReplicaKey: a key without a directory id is not that voter)."""
        return node_id == self.node_id and (
            self.directory_id is None or directory_id == self.directory_id)


VoterSet = tuple[Voter, ...]  # sorted by node id, one entry per id


def voter_set(voters: list[Voter] | tuple[Voter, ...]) -> VoterSet:
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ValueError(f"voter ids listed twice: {sorted(ids)}")
    return tuple(sorted(voters, key=lambda v: v.node_id))


def static_voters(ids: frozenset[int]) -> VoterSet:
    return tuple(Voter(i) for i in sorted(ids))


class VoterCodec(Protocol):
    """Kafka's VotersRecord and KRaftVersionRecord (control record values)."""

    def encode_voters(self, voters: VoterSet) -> bytes: ...

    def decode_voters(self, value: bytes) -> VoterSet:
        """ValueError on malformed input."""

    def encode_kraft_version(self, version: int) -> bytes: ...

    def decode_kraft_version(self, value: bytes) -> int:
        """ValueError on malformed input."""


# Snapshots carry the voter set at their end (KIP-853: the voter set lives in the log and in
# snapshots).  Skiff's snapshots are the state machine's opaque bytes; with kraft.version 1
# the core prefixes them with this header and the IO shell hands the state machine only the
# rest (`snapshot_payload`).  kraft.version 0 snapshots carry no header.
SNAPSHOT_VOTERS_MAGIC = b"\x00SKV"
_SNAP_HEAD = struct.Struct(">4shI")


def wrap_snapshot(kraft_version: int, voters_value: bytes, data: bytes) -> bytes:
    return _SNAP_HEAD.pack(SNAPSHOT_VOTERS_MAGIC, kraft_version, len(voters_value)) + \
        voters_value + data


def split_snapshot(raw: bytes) -> tuple[int, bytes | None, bytes]:
    """(kraft version, VotersRecord value or None, the state machine's bytes)."""
    if not raw.startswith(SNAPSHOT_VOTERS_MAGIC):
        return 0, None, raw
    if len(raw) < _SNAP_HEAD.size:
        raise ValueError("snapshot voter header truncated")
    _magic, kv, n = _SNAP_HEAD.unpack_from(raw, 0)
    end = _SNAP_HEAD.size + n
    if end > len(raw):
        raise ValueError("snapshot voter header runs past the snapshot")
    return int(kv), raw[_SNAP_HEAD.size:end], raw[end:]


def snapshot_payload(raw: bytes) -> bytes:
    """The state machine's part of a snapshot."""
    return split_snapshot(raw)[2]
