"""Kafka wire primitives shared by the narrow encoders (fetch_codec, fetch_encoder,
produce_encoder) and the record writers (records, broker/group/records.py): unsigned
varints (compact lengths, tag counts, and the zigzag varints of record fields), tagged
fields of flexible versions, strings, arrays and the KIP-951 node endpoints, in both the
classic and the flexible (compact, KIP-482) forms."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

I16: Final = struct.Struct(">h")
I32: Final = struct.Struct(">i")


def uvarint(n: int) -> bytes:
    if n < 0:
        raise ValueError("negative unsigned varint")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tagged_field(tag: int, data: bytes) -> bytes:
    """One tagged field: its tag, its size, its bytes."""
    return uvarint(tag) + uvarint(len(data)) + data


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def string(s: str, flexible: bool) -> bytes:
    b = s.encode()
    if flexible:
        return uvarint(len(b) + 1) + b
    if len(b) > 0x7FFF:
        raise ValueError("string too long")
    return I16.pack(len(b)) + b


def nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(s, flexible)


def array_length(n: int | None, flexible: bool) -> bytes:
    """The length prefix of an array of `n` entries (None: a null array)."""
    if n is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint(n + 1) if flexible else I32.pack(n)


def node_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The compact array of NodeEndpoint that Fetch v16+ and Produce v10+ carry as a
    top-level tagged field."""
    out = bytearray(uvarint(len(endpoints) + 1))
    for e in endpoints:
        out += I32.pack(e.node_id)
        out += string(e.host, True)
        out += I32.pack(e.port)
        out += nullable_string(e.rack, True)
        out += b"\x00"
    return bytes(out)
