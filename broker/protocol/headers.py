"""Request frames in, response frames out, through kio.

A request frame (after its 4-byte size) is a RequestHeader (v1, or v2 for flexible versions:
v1 plus tagged fields) followed by the request body. `peek_api` reads only the api key,
version and correlation id, so the server can decide what to do with a version it does not
support before parsing anything else. Responses are the 4-byte size, the ResponseHeader
(v0, or v1 with an empty tagged-field section for flexible versions; ApiVersions always v0) and
the body, all written by kio's entity_writer.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.response_header.v1 import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_unsigned_varint
from kio.static.protocol import RequestPayload, ResponsePayload

from broker.protocol.api import request_schema, response_header_schema

_HEAD: Final = struct.Struct(">hhi")
_SIZE: Final = struct.Struct(">i")

# Tagged fields in a request header are allowed by the protocol but none are defined; we skip
# them, bounded by this many.
MAX_HEADER_TAGGED_FIELDS: Final = 64


class FrameError(ValueError):
    """The frame cannot be parsed: the connection that sent it is closed."""


@dataclass(frozen=True, slots=True)
class ApiPeek:
    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: RequestPayload


def peek_api(frame: bytes | memoryview) -> ApiPeek:
    """The first 8 bytes of every request header, in every version."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    return ApiPeek(key, version, correlation_id)


_header_v1_reader: Final = entity_reader(RequestHeaderV1)


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> tuple[str | None, int]:
    """(client_id, offset of the body). Header v2 tagged fields are skipped."""
    try:
        header, offset = _header_v1_reader(frame, 0)  # consumed from 0 == offset
    except Exception as e:  # kio raises BufferUnderflow, UnicodeDecodeError, ...
        raise FrameError(f"unparseable request header: {e!r}") from e
    if flexible:
        offset = _skip_tagged_fields(frame, offset)
    return header.client_id, offset


def _skip_tagged_fields(frame: bytes | memoryview, offset: int) -> int:
    # kio's readers return (value, bytes consumed), not the new offset.
    try:
        count, n = read_unsigned_varint(frame, offset)
        offset += n
        if count > MAX_HEADER_TAGGED_FIELDS:
            raise FrameError(f"{count} tagged fields in a request header")
        for _ in range(count):
            _tag, n = read_unsigned_varint(frame, offset)
            offset += n
            size, n = read_unsigned_varint(frame, offset)
            offset += n
            if size > len(frame) - offset:
                raise FrameError("tagged field runs past the end of the frame")
            offset += size
    except FrameError:
        raise
    except Exception as e:
        raise FrameError(f"unparseable tagged fields: {e!r}") from e
    return offset


_body_readers: dict[tuple[int, int], Callable[[Any, int], tuple[Any, int]]] = {}


def _body_reader(api_key: int, version: int) -> Callable[[Any, int], tuple[Any, int]]:
    reader = _body_readers.get((api_key, version))
    if reader is None:
        reader = entity_reader(request_schema(api_key, version))
        _body_readers[(api_key, version)] = reader
    return reader


def parse_request(frame: bytes | memoryview, peek: ApiPeek | None = None) -> ParsedRequest:
    """Header and body of a frame whose (api key, version) has a kio schema; `peek` is
    `peek_api(frame)` when the caller has it already.

    Raises FrameError for anything that does not parse. Bytes after the body are ignored, as
    Kafka does.
    """
    if peek is None:
        peek = peek_api(frame)
    try:
        schema = request_schema(peek.api_key, peek.api_version)
    except Exception as e:
        raise FrameError(f"no schema for api {peek.api_key} v{peek.api_version}") from e
    client_id, offset = parse_request_header(frame, bool(schema.__flexible__))
    try:
        body, _consumed = _body_reader(peek.api_key, peek.api_version)(frame, offset)
    except Exception as e:  # kio: BufferUnderflow, KeyError (unknown tag), ValueError, ...
        raise FrameError(f"unparseable {schema.__name__} v{peek.api_version}: {e!r}") from e
    return ParsedRequest(peek.api_key, peek.api_version, peek.correlation_id, client_id, body)


def _header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    if response_header_schema(api_key, version) is ResponseHeaderV1:
        return _SIZE.pack(correlation_id) + b"\x00"  # correlation id + no tagged fields
    return _SIZE.pack(correlation_id)


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    """The encoded ResponseHeader for this API version (v0, or v1 with empty tagged fields)."""
    return _header_bytes(api_key, version, correlation_id)


def encode_body(response: ResponsePayload) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    return buf.getvalue()


def encode_response(response: ResponsePayload, correlation_id: int) -> bytes:
    """Size prefix + response header + body, the whole frame."""
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    header = _header_bytes(int(response.__api_key__), int(response.__version__), correlation_id)
    buf.write(header)
    entity_writer(type(response))(buf, response)
    size = buf.tell() - 4
    buf.seek(0)
    buf.write(_SIZE.pack(size))
    return buf.getvalue()


def frame_prefix(
    api_key: int, version: int, correlation_id: int, body_size: int
) -> bytes:
    """Size prefix + response header for a body of `body_size` bytes written separately."""
    header = _header_bytes(api_key, version, correlation_id)
    return _SIZE.pack(len(header) + body_size) + header
