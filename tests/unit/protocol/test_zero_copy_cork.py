"""A Fetch answer (prefix and head, file slice, tail) leaves a TCP socket corked: one segment
for the peer to wake up for, not three, and still os.sendfile for the slice."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile

import pytest

from broker.log.segment import FileSlice
from broker.protocol import frames
from broker.protocol.frames import ResponseChunks, ZeroCopyWriter

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")


def _corked(fd: int) -> int:
    probe = socket.socket(fileno=os.dup(fd))
    try:
        return probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)
    finally:
        probe.close()


async def _answer(chunks: ResponseChunks, prefix: bytes) -> tuple[bytes, int]:
    """Writes one answer from a server transport; (what the client read, TCP_CORK after)."""
    writer_done = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        zc = ZeroCopyWriter(writer.transport, writer.drain)  # type: ignore[arg-type]
        await zc.write(prefix, chunks)
        writer_done.set_result(_corked(writer.transport.get_extra_info("socket").fileno()))
        zc.close()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    server.close()
    await server.wait_closed()
    return received, await writer_done


def test_a_fetch_answer_is_corked_around_sendfile_and_uncorked_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real_sendfile = os.sendfile

    def sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        seen.append(_corked(out_fd))
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(frames.os, "sendfile", sendfile)
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789" * 100)
        f.flush()
        chunks = ResponseChunks([b"head", FileSlice(f, 5, 200), b"tail"])
        got, cork_after = asyncio.run(_answer(chunks, b"\x00\x00\x00\x10"))
    assert got == b"\x00\x00\x00\x10head" + (b"0123456789" * 100)[5:205] + b"tail"
    assert seen == [1], "the slice went out while the socket was corked"
    assert cork_after == 0, "uncorked once the answer is written"


def test_an_answer_without_file_slices_is_one_write_and_never_corked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    corks: list[bool] = []
    monkeypatch.setattr(ZeroCopyWriter, "_cork", lambda self, on: corks.append(on) or True)
    got, cork_after = asyncio.run(_answer(ResponseChunks([b"abc", b"def"]), b"\x00\x00\x00\x06"))
    assert got == b"\x00\x00\x00\x06abcdef"
    assert corks == [] and cork_after == 0
