"""A minimal Kafka client for tests: kio-encoded requests over a blocking or asyncio socket."""

from __future__ import annotations

import asyncio
import io
import socket
import struct
from typing import Any

from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from broker.protocol.api import request_schema, response_schema


def encode_request(request: Any, correlation_id: int, client_id: str | None = "test") -> bytes:
    """Size-prefixed frame: request header (v1 or v2 as kio says) + body."""
    header_cls = type(request).__header_schema__
    header = header_cls(
        request_api_key=i16(int(request.__api_key__)),
        request_api_version=i16(int(request.__version__)),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header)
    entity_writer(type(request))(buf, request)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def raw_frame(api_key: int, version: int, correlation_id: int, body: bytes,
              flexible: bool = False, client_id: str | None = "test") -> bytes:
    header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(
        request_api_key=i16(api_key), request_api_version=i16(version),
        correlation_id=i32(correlation_id), client_id=client_id))
    payload = buf.getvalue() + body
    return struct.pack(">i", len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) from a frame without its size prefix."""
    schema = response_schema(api_key, version)  # kio's, or kio 0.5.0's for removed versions
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    offset = 4
    if schema.__header_schema__.__flexible__:
        assert frame[offset] == 0, "response header tagged fields"
        offset += 1
    body, consumed = entity_reader(schema)(frame, offset)
    assert offset + consumed == len(frame), f"{len(frame) - offset - consumed} trailing bytes"
    return correlation_id, body


def api_versions_request(version: int) -> Any:
    schema = request_schema(18, version)
    if version >= 3:
        return schema(client_software_name="skiff-test", client_software_version="1.0")  # type: ignore[call-arg]
    return schema()


class RawConnection:
    """One blocking connection that sends kio requests and reads their answers in turn,
    checking each answer's correlation id."""

    def __init__(self, bootstrap: str, timeout: float, client_id: str = "test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0
        self.client_id = client_id

    def call(self, request: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(request, self.correlation, self.client_id))
        cid, resp = decode_response(int(request.__api_key__), int(request.__version__),
                                    recv_frame(self.sock))
        assert cid == self.correlation
        return resp

    def close(self) -> None:
        self.sock.close()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


async def arecv_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def is_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closed (EOF or reset) within `timeout` and sent nothing more."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(1)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return data == b""
