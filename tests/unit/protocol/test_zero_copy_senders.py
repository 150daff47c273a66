"""ZeroCopyWriter with the native sender threads (SenderPool): an answer of OFFLOAD_MIN bytes
or more goes to them whole, a smaller one from the loop; a peer that stops reading makes a
thread give the answer back, and the writer sends the rest once the socket is writable; the
bytes on the wire are the answer's either way."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import tempfile

import pytest

from broker.log.segment import FileSlice
from broker.protocol.frames import (
    OFFLOAD_MIN,
    ResponseChunks,
    SenderPool,
    ZeroCopyWriter,
    _after,
    native_senders_missing,
)

missing = native_senders_missing()
if missing is not None and os.environ.get("EXPECT_COMPILED_MODULES") != "1":
    pytest.skip(f"no native sender threads: {missing}", allow_module_level=True)

SLICE = 2 * 1024 * 1024


def test_after_drops_what_was_sent() -> None:
    parts = [b"abc", (5, 100, 10), bytearray(b"de"), memoryview(b"fgh")]
    assert _after(parts, 0) == parts
    assert _after(parts, 2) == [memoryview(b"c"), (5, 100, 10), b"de", b"fgh"]
    assert _after(parts, 3) == [(5, 100, 10), b"de", b"fgh"]
    assert _after(parts, 7) == [(5, 104, 6), b"de", b"fgh"]
    assert _after(parts, 14) == [memoryview(b"e"), b"fgh"]
    assert _after(parts, 18) == []


async def _answer_through(chunks: ResponseChunks, *, pause_s: float,
                          short_of_descriptors: bool = False) -> tuple[bytes, int, int]:
    """Serves one answer through a ZeroCopyWriter with two sender threads to a reader that
    stops for `pause_s` after its first 64 KB; (bytes read, jobs handed to the threads,
    jobs in flight at the end)."""
    done: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        pool = SenderPool.acquire(2)
        if short_of_descriptors:
            def refuse(socket_fd: int, parts: object) -> None:
                raise OSError(errno.EMFILE, "Too many open files")
            pool.send = refuse  # type: ignore[assignment,method-assign]
        try:
            zc = ZeroCopyWriter(writer.transport, writer.drain,  # type: ignore[arg-type]
                                senders=pool)
            await zc.write(b"\x00\x00\x00\x00", chunks)
            await writer.drain()
            zc.close()
            writer.close()
            done.set_result((pool.jobs, len(pool._futures)))
        finally:
            pool.release()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.transport.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    got = await asyncio.wait_for(reader.readexactly(64 * 1024), 10)
    await asyncio.sleep(pause_s)
    got += await asyncio.wait_for(reader.read(), 10)
    jobs, in_flight = await asyncio.wait_for(done, 10)
    writer.close()
    server.close()
    await server.wait_closed()
    return got, jobs, in_flight


@pytest.mark.parametrize("pause_s", [0.0, 0.3])
def test_a_large_answer_goes_through_the_threads_byte_for_byte(pause_s: float) -> None:
    content = os.urandom(SLICE + 1000)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        chunks = ResponseChunks([b"head", FileSlice(f, 0, SLICE), b"mid",
                                 FileSlice(f, 1000, SLICE), b"tail"])
        got, jobs, in_flight = asyncio.run(_answer_through(chunks, pause_s=pause_s))
    assert got == (b"\x00\x00\x00\x00head" + content[:SLICE] + b"mid"
                   + content[1000:1000 + SLICE] + b"tail")
    assert in_flight == 0
    if pause_s:
        # the reader stopped for longer than a thread waits for room: the answer came back
        # to the loop at least once and went out again from where it stopped
        assert jobs >= 2, jobs
    else:
        assert jobs >= 1, jobs


def test_threads_short_of_descriptors_leave_the_answer_to_the_loop() -> None:
    content = os.urandom(SLICE)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        chunks = ResponseChunks([b"head", FileSlice(f, 0, SLICE)])
        got, jobs, _ = asyncio.run(_answer_through(chunks, pause_s=0.0,
                                                   short_of_descriptors=True))
    assert got == b"\x00\x00\x00\x00head" + content
    assert jobs == 0


def test_a_small_answer_is_sent_by_the_loop() -> None:
    content = os.urandom(OFFLOAD_MIN)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        chunks = ResponseChunks([b"head", FileSlice(f, 0, OFFLOAD_MIN - 100)])
        got, jobs, _ = asyncio.run(_answer_through(chunks, pause_s=0.0))
    assert got == b"\x00\x00\x00\x00head" + content[:OFFLOAD_MIN - 100]
    assert jobs == 0


def test_one_pool_per_loop_shared_and_closed_by_its_last_user() -> None:
    async def main() -> None:
        a = SenderPool.acquire(3)
        assert a.users == 1
        b = SenderPool.acquire(3)
        assert a is b and a.threads == 3 and a.users == 2
        a.release()
        assert a.users == 1
        assert SenderPool._shared[asyncio.get_running_loop()] == (a, 1)
        b.release()
        assert asyncio.get_running_loop() not in SenderPool._shared and a.users == 0
        with pytest.raises(ValueError, match="closed"):
            a._pool.submit(1, 0, [b"x"])

    asyncio.run(main())
