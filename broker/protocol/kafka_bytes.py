"""Kafka wire primitives shared by the narrow encoders (broker/protocol/fetch_codec.py,
raft/control.py, broker/protocol/fetch_encoder.py) and the record writers (raft/records.py,
broker/protocol/records.py, broker/group/records.py): unsigned varints (compact lengths,
tag counts, and the zigzag varints of record fields) and tagged fields of flexible message
versions."""

from __future__ import annotations


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
