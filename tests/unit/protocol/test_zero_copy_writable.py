"""A file slice larger than the socket's send buffer goes out in many sendfile calls with
EAGAIN between them; the writer watches the socket's writability once per answer, not once
per EAGAIN, and leaves nothing watched when the answer is written."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from typing import Any

from broker.log.segment import FileSlice
from broker.protocol import frames
from broker.protocol.frames import ResponseChunks, ZeroCopyWriter

SLICE = 2 * 1024 * 1024


async def _slow_read(reader: asyncio.StreamReader, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = await asyncio.wait_for(reader.read(64 * 1024), 10)
        if not piece:
            break
        data += piece
        await asyncio.sleep(0.001)  # slower than the sender: its buffer fills
    return data


def test_one_watch_per_answer_however_many_times_sendfile_would_block(
        monkeypatch: Any) -> None:
    would_block = 0
    real_sendfile = os.sendfile

    def sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        nonlocal would_block
        try:
            return real_sendfile(out_fd, in_fd, offset, count)
        except BlockingIOError:
            would_block += 1
            raise

    monkeypatch.setattr(frames.os, "sendfile", sendfile)
    content = os.urandom(SLICE + 1000)
    watches: list[str] = []
    left_watched: list[bool] = []

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        real_add, real_remove = loop.add_writer, loop.remove_writer

        def add_writer(fd: int, cb: Any, *args: Any) -> None:
            watches.append("add")
            real_add(fd, cb, *args)

        def remove_writer(fd: int) -> bool:
            watches.append("remove")
            return real_remove(fd)

        with tempfile.TemporaryFile() as f:
            f.write(content)
            f.flush()
            chunks = ResponseChunks([b"head", FileSlice(f, 0, SLICE), b"mid",
                                     FileSlice(f, 1000, SLICE), b"tail"])
            done = loop.create_future()

            async def serve(reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
                sock = writer.transport.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
                zc = ZeroCopyWriter(writer.transport, writer.drain)  # type: ignore[arg-type]
                monkeypatch.setattr(loop, "add_writer", add_writer)
                monkeypatch.setattr(loop, "remove_writer", remove_writer)
                await zc.write(b"\x00\x00\x00\x00", chunks)
                await writer.drain()
                # nothing of the answer is still watched: removing it again finds nothing
                left_watched.append(real_remove(zc._socket_fd()))
                zc.close()
                writer.close()
                done.set_result(None)

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            got = await _slow_read(reader, 4 + 4 + 2 * SLICE + 3 + 4)
            await asyncio.wait_for(done, 10)
            writer.close()
            server.close()
            await server.wait_closed()
            return got

    got = asyncio.run(main())
    assert got == (b"\x00\x00\x00\x00head" + content[:SLICE] + b"mid"
                   + content[1000:1000 + SLICE] + b"tail")
    assert would_block >= 4, f"the test's reader never made sendfile wait ({would_block})"
    # one watch per slice at most (the transport's bytes between them end the first),
    # never one per EAGAIN
    assert watches.count("add") <= 2 < would_block, (watches, would_block)
    assert watches.count("add") == watches.count("remove"), watches
    assert left_watched == [False]
