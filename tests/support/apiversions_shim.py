"""A loopback TCP proxy that drops the top-level tagged fields of ApiVersions v3+ responses.

Only for checking the kcat tests against a peer broker (Tansu 0.6) whose ApiVersions v3
response carries tagged fields that kcat's bundled librdkafka 2.0.2 cannot parse. Every
other byte passes through unchanged. Skiff itself must not need this (it writes only
non-default tagged fields), and the test suite never uses it.

    python -m tests.support.apiversions_shim --listen 127.0.0.1:19193 --upstream 127.0.0.1:19093

The upstream broker must advertise the proxy's address, or clients bypass the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import struct

from kio.serial.errors import BufferUnderflow
from kio.serial.readers import read_unsigned_varint

from broker.protocol.headers import skip_tagged_fields

API_VERSIONS = 18
MAX_FRAME = 100 * 1024 * 1024


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it), read by kio."""
    try:
        value, used = read_unsigned_varint(memoryview(buf), pos)
    except BufferUnderflow as e:
        raise ValueError("bad varint") from e
    return value, pos + used


def strip_top_level_tags(payload: bytes) -> bytes:
    """payload = correlation id + ApiVersions v3 body; returns it with no top-level tags."""
    pos = 4 + 2  # correlation id (header v0), error_code
    n, pos = _uvarint(payload, pos)
    for _ in range(max(0, n - 1)):
        pos += 6  # api_key, min_version, max_version
        pos = skip_tagged_fields(payload, pos)
    pos += 4  # throttle_time_ms
    return payload[:pos] + b"\x00"


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= MAX_FRAME:
        return None
    try:
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                pending: set[int], requests: bool) -> None:
    try:
        while (frame := await _read_frame(reader)) is not None:
            if requests:
                api_key, api_version, corr = struct.unpack(">hhi", frame[:8])
                if api_key == API_VERSIONS and api_version >= 3:
                    pending.add(corr)
            else:
                (corr,) = struct.unpack(">i", frame[:4])
                if corr in pending:
                    pending.discard(corr)
                    frame = strip_top_level_tags(frame)
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
    finally:
        writer.close()


async def _serve(listen: tuple[str, int], upstream: tuple[str, int]) -> None:
    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(*upstream)
        except OSError:
            cw.close()
            return
        pending: set[int] = set()
        await asyncio.gather(_pipe(cr, uw, pending, True), _pipe(ur, cw, pending, False),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def _addr(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        raise argparse.ArgumentTypeError("loopback only")
    return host, int(port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--listen", type=_addr, required=True)
    ap.add_argument("--upstream", type=_addr, required=True)
    args = ap.parse_args()
    asyncio.run(_serve(args.listen, args.upstream))


if __name__ == "__main__":
    main()
