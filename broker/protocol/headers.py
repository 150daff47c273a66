"""Kafka's request and response headers and frames, both directions, through kio.

The server's side: requests in, responses out.

A request frame (after its 4-byte size) is a RequestHeader (v1, or v2 for flexible versions:
v1 plus tagged fields) followed by the request body. `peek_api` reads only the api key,
version and correlation id, so the server can decide what to do with a version it does not
support before parsing anything else. Responses are the 4-byte size, the ResponseHeader
(v0, or v1 with an empty tagged-field section for flexible versions; ApiVersions always v0) and
the body, all written by kio's entity_writer.

The client's side (broker/protocol/transport.py's KafkaConnection): `encode_request` writes
request header v1/v2 without kio's generic writer, `parse_response` reads a response of the
(api key, version) the client asked.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.response_header.v1 import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_unsigned_varint
from kio.static.protocol import RequestPayload, ResponsePayload

from broker.protocol.api import (
    request_schema,
    response_header_schema,
    response_schema,
)
from broker.protocol.frame_reader import FrameError as FrameError
from broker.protocol.nulls import first_null_array

_HEAD: Final = struct.Struct(">hhi")
_SIZE: Final = struct.Struct(">i")

# Tagged fields in a request header are allowed by the protocol but none are defined; we skip
# them, bounded by this many.
MAX_HEADER_TAGGED_FIELDS: Final = 64


@dataclass(frozen=True, slots=True)
class ApiPeek:
    api_key: int
    api_version: int
    correlation_id: int

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        object.__setattr__(self, "api_key", api_key)
        object.__setattr__(self, "api_version", api_version)
        object.__setattr__(self, "correlation_id", correlation_id)


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: RequestPayload

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
        body: RequestPayload,
    ) -> None:
        object.__setattr__(self, "api_key", api_key)
        object.__setattr__(self, "api_version", api_version)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "client_id", client_id)
        object.__setattr__(self, "body", body)


def peek_api(frame: bytes | memoryview) -> ApiPeek:
    """The first 8 bytes of every request header, in every version."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    return ApiPeek(key, version, correlation_id)


_CLIENT_ID_LENGTH: Final = struct.Struct(">h")
_CLIENT_ID_AT: Final = _HEAD.size  # after the api key, api version and correlation id


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> tuple[str | None, int]:
    """(client_id, offset of the body). Header v2 tagged fields are skipped.

    The client id (a nullable string) is read here: kio's RequestHeader reader built a
    header object per request only for it, ~2% of a small produce's CPU
    (docs/benchmarks.md, "Server machinery per request"); tests/unit/protocol/
    test_headers.py holds it to kio's reading."""
    size = len(frame)
    if size < _CLIENT_ID_AT + 2:
        raise FrameError(f"unparseable request header: {size} bytes")
    (length,) = _CLIENT_ID_LENGTH.unpack_from(frame, _CLIENT_ID_AT)
    offset = _CLIENT_ID_AT + 2
    client_id: str | None = None
    if length >= 0:
        end = offset + length
        if end > size:
            raise FrameError(f"unparseable request header: a client id of {length} bytes "
                             f"in {size - offset}")
        try:
            client_id = str(frame[offset:end], "utf-8")
        except UnicodeDecodeError as e:
            raise FrameError(f"unparseable request header: {e!r}") from e
        offset = end
    elif length != -1:
        raise FrameError(f"unparseable request header: client id length {length}")
    if flexible:
        offset = skip_tagged_fields(frame, offset)
    return client_id, offset


def skip_tagged_fields(frame: bytes | memoryview, offset: int) -> int:
    """The offset after the tagged-field section at `offset` (of a header, or of any
    flexible-version structure). At most MAX_HEADER_TAGGED_FIELDS fields; a count, tag or
    size that runs past the end of `frame`, or is not a varint, is a FrameError."""
    if offset < len(frame) and frame[offset] == 0:  # no tagged fields, as clients send it
        return offset + 1
    # kio's readers return (value, bytes consumed), not the new offset.
    try:
        count, n = read_unsigned_varint(frame, offset)
        offset += n
        if count > MAX_HEADER_TAGGED_FIELDS:
            raise FrameError(f"{count} tagged fields, more than {MAX_HEADER_TAGGED_FIELDS}")
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


class _BodySchema:
    """What parsing a request of one (api key, version) needs of its kio schema."""

    __slots__ = ("flexible", "name", "reader")

    def __init__(self, schema: Any) -> None:
        self.reader: Callable[[Any, int], tuple[Any, int]] = entity_reader(schema)
        self.flexible = bool(schema.__flexible__)
        self.name: str = schema.__name__


_body_schemas: dict[tuple[int, int], _BodySchema] = {}


def _body_schema(api_key: int, version: int) -> _BodySchema:
    found = _body_schemas.get((api_key, version))
    if found is None:
        try:
            schema = request_schema(api_key, version)
        except Exception as e:
            raise FrameError(f"no schema for api {api_key} v{version}") from e
        found = _body_schemas[(api_key, version)] = _BodySchema(schema)
    return found


def _parse(frame: bytes | memoryview, peek: ApiPeek) -> tuple[str | None, Any, int]:
    """(client_id, body, end of the body) of a frame whose header `peek` read."""
    schema = _body_schema(peek.api_key, peek.api_version)
    client_id, offset = parse_request_header(frame, schema.flexible)
    try:
        body, consumed = schema.reader(frame, offset)
    except Exception as e:  # kio: BufferUnderflow, KeyError (unknown tag), ValueError, ...
        raise FrameError(f"unparseable {schema.name} v{peek.api_version}: {e!r}") from e
    null_field = first_null_array(body)
    if null_field is not None:
        raise FrameError(
            f"non-nullable field {null_field} of {schema.name} v{peek.api_version} "
            "was serialized as null"
        )
    return client_id, body, offset + consumed


def parse_request(frame: bytes | memoryview, peek: ApiPeek | None = None) -> ParsedRequest:
    """Header and body of a frame whose (api key, version) has a kio schema; `peek` is
    `peek_api(frame)` when the caller has it already.

    Raises FrameError for anything that does not parse. Bytes after the body are ignored, as
    Kafka does.
    """
    if peek is None:
        peek = peek_api(frame)
    client_id, body, _end = _parse(frame, peek)
    return ParsedRequest(peek.api_key, peek.api_version, peek.correlation_id, client_id, body)


def decode_request(frame: bytes | memoryview) -> tuple[int, int, int, Any]:
    """(api_key, api_version, correlation_id, request) of a frame that holds exactly one
    request: the minimal server's (`transport.serve`) stricter reading."""
    peek = peek_api(frame)
    _client_id, body, end = _parse(frame, peek)
    if end != len(frame):
        raise FrameError("trailing bytes after request")
    return peek.api_key, peek.api_version, peek.correlation_id, body


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


def encode_response(response: ResponsePayload | bytes, correlation_id: int, *,
                    api: tuple[int, int] | None = None) -> bytes:
    """Size prefix + response header + body, the whole frame. `response` is a kio entity, or
    an already encoded body of the (api_key, version) named by `api`."""
    if isinstance(response, bytes):
        if api is None:
            raise TypeError("an encoded response body needs its (api_key, version)")
        header = _header_bytes(api[0], api[1], correlation_id)
        return _SIZE.pack(len(header) + len(response)) + header + response
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


# ---------------------------------------------------------------------- the client's side

_REQUEST_HEADER: Final = struct.Struct(">hhih")


def frame(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """Request header v1, or v2 when `flexible` (v2 adds an empty tagged-field section;
    client_id stays a non-compact nullable string): the bytes kio writes, without its
    generic writer on every metadata Fetch."""
    raw = b"" if client_id is None else client_id.encode()
    head = _REQUEST_HEADER.pack(api_key, version, correlation_id,
                                -1 if client_id is None else len(raw)) + raw
    return head + b"\x00" if flexible else head


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str,
                   request: Any) -> bytes:
    """A request frame; `request` is a kio entity or an already encoded body."""
    if isinstance(request, bytes):
        flexible = request_schema(api_key, version).__flexible__
        body = request
    else:
        flexible = type(request).__flexible__
        body = encode_body(request)
    return frame(request_header(api_key, version, correlation_id, client_id, flexible) + body)


@functools.cache
def _response_reader(api_key: int, version: int) -> tuple[bool, Callable[[Any, int], Any]]:
    """(header v1?, body reader) of a response: built once, not on every answer."""
    return (response_header_schema(api_key, version) is ResponseHeaderV1,
            entity_reader(response_schema(api_key, version)))


def parse_response(frame: bytes | memoryview, api_key: int, version: int) -> Any:
    """The body of a response frame (after its size) to a request of (api_key, version)."""
    if len(frame) < _SIZE.size:
        raise FrameError("response shorter than a header")
    header_v1, read_body = _response_reader(api_key, version)
    offset = skip_tagged_fields(frame, _SIZE.size) if header_v1 else _SIZE.size
    try:
        response, _size = read_body(frame, offset)
    except Exception as e:  # kio: BufferUnderflow, ValueError, ...
        raise FrameError(f"malformed response: {e!r}") from e
    return response
