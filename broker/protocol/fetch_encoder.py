"""A narrow fast encoder for FetchResponse v0-v18 whose records are file slices.

kio's encoder is pure Python and wants the records as bytes; the Fetch hot path wants to send
segment bytes with os.sendfile without reading them. This module writes the same bytes kio
would (tests check byte for byte against kio's FetchResponse of every version), with each
partition's `records` left as the caller's chunks (bytes or FileSlice) inside a ResponseChunks
body. Field layout by version:

- v0: [topic, [partition_index, error_code, high_watermark, records]]
- v1-v3: throttle_time_ms first
- v4: throttle_time_ms, [topic, [partition_index, error_code, high_watermark,
  last_stable_offset, aborted_transactions, records]]
- v5+: log_start_offset after last_stable_offset
- v7+: error_code and session_id after throttle_time_ms
- v11+: preferred_read_replica after aborted_transactions
- v12+: flexible (compact strings/arrays/bytes, tagged fields); partition tags 0
  diverging_epoch, 1 current_leader, 2 snapshot_id (written only when not default)
- v13+: topic_id (uuid) instead of the topic name
- v16+: top-level tag 0 node_endpoints (v17 and v18 answers are laid out as v16's)
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from broker.protocol.frames import Chunk, FileSlice, ResponseChunks, chunk_length
from broker.protocol.wire import (
    NodeEndpoint,
    array_length,
    node_endpoints,
    string,
    tagged_field,
    uvarint,
)

__all__ = [
    "FetchPartition", "FetchResponseData", "FetchTopic", "NodeEndpoint", "encode_fetch_response",
]

MIN_VERSION: Final = 0
MAX_VERSION: Final = 18

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_II: Final = struct.Struct(">ii")
_IQ: Final = struct.Struct(">iq")
_QI: Final = struct.Struct(">qi")
_QQ: Final = struct.Struct(">qq")
_PARTITION_HEAD: Final = struct.Struct(">ihqq")  # index, error, high watermark, LSO
_PARTITION_HEAD_V0: Final = struct.Struct(">ihq")  # index, error, high watermark
_NULL_UUID: Final = bytes(16)

Records = bytes | FileSlice | Sequence[bytes | FileSlice] | None


# Not frozen, like the two below: built once or more per partition per Fetch answer, and a
# frozen dataclass's __init__ costs three times a plain one's (object.__setattr__ per field).
@dataclass(slots=True)
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    """(producer_id, first_offset) pairs; None is null (read_uncommitted)."""
    preferred_read_replica: int = -1
    records: Records = None
    """None is null; b"" (an empty record set) is encoded as empty."""
    diverging_epoch: tuple[int, int] = (-1, -1)
    """(epoch, end_offset), v12+."""
    current_leader: tuple[int, int] = (-1, -1)
    """(leader_id, leader_epoch), v12+."""
    snapshot_id: tuple[int, int] = (-1, -1)
    """(end_offset, epoch), v12+."""


@dataclass(slots=True)
class FetchTopic:
    partitions: Sequence[FetchPartition]
    topic: str = ""
    """The name, v4-v12."""
    topic_id: uuid.UUID | None = None
    """v13+."""


@dataclass(slots=True)
class FetchResponseData:
    topics: Sequence[FetchTopic]
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0
    node_endpoints: Sequence[NodeEndpoint] = field(default=())


def _record_chunks(records: Records) -> list[Chunk] | None:
    if records is None:
        return None
    if isinstance(records, bytes):
        return [records]
    if isinstance(records, list | tuple):
        return list(records)
    return [cast(FileSlice, records)]


def encode_fetch_response(version: int, data: FetchResponseData) -> ResponseChunks:
    """The FetchResponse body of `version`, records as the caller's chunks."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is outside v{MIN_VERSION}-v{MAX_VERSION}")
    flexible = version >= 12
    out = ResponseChunks()
    buf = bytearray(_I32.pack(data.throttle_time_ms)) if version >= 1 else bytearray()
    if version >= 7:
        buf += _I16.pack(data.error_code)
        buf += _I32.pack(data.session_id)
    buf += array_length(len(data.topics), flexible)
    for t in data.topics:
        if version >= 13:
            buf += t.topic_id.bytes if t.topic_id is not None else _NULL_UUID
        else:
            buf += string(t.topic, flexible)
        buf += array_length(len(t.partitions), flexible)
        for p in t.partitions:
            if version < 4:
                buf += _PARTITION_HEAD_V0.pack(p.partition_index, p.error_code, p.high_watermark)
            else:
                buf += _PARTITION_HEAD.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            if version >= 5:
                buf += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if version >= 4:
                buf += array_length(None if aborted is None else len(aborted), flexible)
            if version >= 4 and aborted is not None:
                for producer_id, first_offset in aborted:
                    buf += _QQ.pack(producer_id, first_offset)
                    if flexible:
                        buf += b"\x00"
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            chunks = _record_chunks(p.records)
            if chunks is None:
                buf += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = sum(chunk_length(c) for c in chunks)
                buf += uvarint(size + 1) if flexible else _I32.pack(size)
                if size:
                    out.append(bytes(buf))
                    buf = bytearray()
                    for c in chunks:
                        out.append(c)
            if flexible:
                buf += _partition_tags(p)
        if flexible:
            buf += b"\x00"  # topic tagged fields
    if flexible:
        if version >= 16 and data.node_endpoints:
            buf += b"\x01" + tagged_field(0, node_endpoints(data.node_endpoints))
        else:
            buf += b"\x00"
    out.append(bytes(buf))
    return out


def _partition_tags(p: FetchPartition) -> bytes:
    tags: list[bytes] = []
    if p.diverging_epoch != (-1, -1):
        tags.append(tagged_field(0, _IQ.pack(*p.diverging_epoch) + b"\x00"))
    if p.current_leader != (-1, -1):
        tags.append(tagged_field(1, _II.pack(*p.current_leader) + b"\x00"))
    if p.snapshot_id != (-1, -1):
        tags.append(tagged_field(2, _QI.pack(*p.snapshot_id) + b"\x00"))
    return uvarint(len(tags)) + b"".join(tags)

