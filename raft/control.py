"""KRaft control records carried in the metadata log.

A LeaderChange control record (key: version 0, type 2) has as its value
Kafka's LeaderChangeMessage v0, a flexible schema:
  Version int16, LeaderId int32, Voters [VoterId int32], GrantingVoters [VoterId int32]
with compact arrays (unsigned varint length + 1) and empty tagged-field sections.
"""

from __future__ import annotations

import struct

LEADER_CHANGE_TYPE = 2
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
