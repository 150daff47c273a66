"""Kafka wire primitives shared by the narrow encoders (raft/fetch_codec.py,
raft/control.py, broker/protocol/fetch_encoder.py) and the record writers (raft/records.py,
broker/protocol/records.py, broker/group/records.py): unsigned varints (compact lengths,
tag counts, and the zigzag varints of record fields) and tagged fields of flexible message
versions; and the reader of unsigned varints for the narrow decoder of Fetch answers."""

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


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at `pos`; at most 5 bytes (the
    32-bit lengths and tags of flexible versions). ValueError past the end or when longer."""
    end = len(buf)
    value = shift = 0
    while shift < 35:
        if pos >= end:
            raise ValueError("unsigned varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("unsigned varint longer than 5 bytes")
