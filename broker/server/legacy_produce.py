"""Produce v0-v2: advertised (librdkafka disables compression without them), answered with
UNSUPPORTED_VERSION for every partition.

kio has no schema for these versions. The request differs from v3 only by lacking the leading
transactional_id, so it is parsed by kio's v3 reader with a null transactional_id put in front.
The response is encoded here: v0 is [name, [index, error_code, base_offset]], v1 appends
throttle_time_ms, v2 adds log_append_time_ms to each partition (v2 is byte-identical to v3).
"""

from __future__ import annotations

import struct
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.serial import entity_reader

_reader: Final = entity_reader(ProduceRequestV3)
_NULL_STRING: Final = b"\xff\xff"
_PARTITION_V0: Final = struct.Struct(">ihq")
_PARTITION_V2: Final = struct.Struct(">ihqq")


def parse_request(body: bytes | memoryview) -> ProduceRequestV3:
    """Raises whatever kio raises on a malformed body."""
    request, _ = _reader(_NULL_STRING + bytes(body), 0)
    return request


def encode_unsupported_response(version: int, request: ProduceRequestV3) -> bytes:
    """The response body (no header) with UNSUPPORTED_VERSION for every partition."""
    if not 0 <= version <= 2:
        raise ValueError(f"Produce v{version} is not a legacy version")
    error = int(ErrorCode.unsupported_version)
    out = bytearray(struct.pack(">i", len(request.topic_data)))
    for topic in request.topic_data:
        name = topic.name.encode()
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(">i", len(topic.partition_data))
        for p in topic.partition_data:
            if version == 2:
                out += _PARTITION_V2.pack(p.index, error, -1, -1)
            else:
                out += _PARTITION_V0.pack(p.index, error, -1)
    if version >= 1:
        out += struct.pack(">i", 0)  # throttle_time_ms
    return bytes(out)
