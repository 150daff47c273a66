"""raft/transport.FrameReader: frames come out whole and in order whatever the receive
sizes, large frames get buffers of their own, and a bad length closes the connection
before anything is allocated for it."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.transport import FrameError, FrameReader, KafkaConnection


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def feed(reader: FrameReader, data: bytes, chunk_sizes: list[int]) -> int:
    """Deliver `data` the way a transport does: into get_buffer's view, at most what the
    caller asks per receive, cycling through `chunk_sizes`, until the reader pauses the
    transport. Returns how many bytes it took."""
    pos, i = 0, 0
    transport: Any = reader.transport
    while pos < len(data) and not transport.closed and getattr(transport, "reading", True):
        buf = reader.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), chunk_sizes[i % len(chunk_sizes)], len(data) - pos)
        buf[:n] = data[pos:pos + n]
        buf.release()
        reader.buffer_updated(n)
        pos += n
        i += 1
    return pos


def make_reader(max_bytes: int = 1 << 20, **kw: Any,
                ) -> tuple[FrameReader, list[bytes], list[BaseException | None]]:
    frames: list[bytes] = []
    lost: list[BaseException | None] = []
    reader = FrameReader(lambda f: frames.append(bytes(f)), lost.append, max_bytes=max_bytes,
                         **kw)
    reader.connection_made(FakeTransport())  # type: ignore[arg-type]
    return reader, frames, lost


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 3, 100, 4000, 65532, 65533, 70000, 200_000]),
                      min_size=1, max_size=8),
       chunks=st.lists(st.integers(1, 300_000), min_size=1, max_size=5))
def test_frames_come_out_whole_and_in_order(sizes: list[int], chunks: list[int]) -> None:
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    reader, frames, lost = make_reader()
    feed(reader, framed(payloads), chunks)
    assert frames == payloads
    assert not lost


def test_a_frame_larger_than_the_scratch_is_read_into_its_own_buffer() -> None:
    reader, frames, _ = make_reader()
    payload = b"x" * 100_000
    data = framed([payload])
    buf = reader.get_buffer(-1)
    buf[:1000] = data[:1000]
    reader.buffer_updated(1000)
    rest = reader.get_buffer(-1)
    assert len(rest) == len(data) - 1000  # exactly the rest of this frame, nothing more
    rest[:] = data[1000:]
    rest.release()
    reader.buffer_updated(len(data) - 1000)
    assert frames == [payload]


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1, 2**31 - 1])
def test_a_bad_length_closes_the_connection(size: int) -> None:
    reader, frames, lost = make_reader(1 << 20)
    feed(reader, struct.pack(">i", size) + b"abcd", [64])
    assert reader.transport.closed  # type: ignore[union-attr]
    assert frames == []
    reader.connection_lost(None)
    assert isinstance(lost[0], FrameError)


def test_an_exception_from_the_consumer_closes_the_connection() -> None:
    lost: list[BaseException | None] = []

    def boom(frame: memoryview | bytes) -> None:
        raise FrameError("malformed response")

    reader = FrameReader(boom, lost.append, max_bytes=1 << 20)
    reader.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(reader, framed([b"abc"]), [100])
    assert reader.transport.closed  # type: ignore[union-attr]
    reader.connection_lost(None)
    assert str(lost[0]) == "malformed response"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_kafka_connection_gets_large_and_small_answers_and_fails_pending_on_close(
        loop: str) -> None:
    """Over real loopback TCP: a 300 KB Fetch answer with small ones pipelined behind it,
    then the server drops the connection and the request still pending fails at once."""
    from broker.protocol.fetch_codec import encode_fetch_request_body

    async def main() -> None:
        big_records = b"r" * 300_000
        hold = asyncio.Event()

        async def serve_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            n = 0
            while True:
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return
                frame = await reader.readexactly(struct.unpack(">i", head)[0])
                cid = struct.unpack_from(">i", frame, 4)[0]
                n += 1
                if n == 4:
                    await hold.wait()
                    writer.close()
                    return
                writer.write(_with_records(cid, big_records if n == 1 else b"small"))

        server = await asyncio.start_server(serve_conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = KafkaConnection("127.0.0.1", port, "test")
        body = encode_fetch_request_body(16, replica_id=1, replica_epoch=1, max_wait_ms=0,
                                         min_bytes=1, max_bytes=1 << 20, topics=[])
        try:
            first = await conn.request(1, 16, body, 5)  # connects
            assert first.responses[0].partitions[0].records == big_records
            answers = await asyncio.gather(*(conn.start_request(1, 16, body, 5)
                                             for _ in range(2)))
            assert [a.responses[0].partitions[0].records for a in answers] == [b"small"] * 2
            fourth = conn.start_request(1, 16, body, 5)
            await asyncio.sleep(0.05)
            hold.set()
            with pytest.raises(ConnectionResetError):
                await asyncio.wait_for(fourth, 5)
        finally:
            await conn.close()
            server.close()

    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def _with_records(cid: int, records: bytes) -> bytes:
    import uuid

    from broker.protocol.fetch_encoder import (
        FetchPartition,
        FetchResponseData,
        FetchTopic,
        encode_fetch_response,
    )

    data = FetchResponseData(topics=[FetchTopic(
        partitions=[FetchPartition(0, 0, 1, 1, 0, None, -1, records)], topic_id=uuid.uuid4())])
    body = encode_fetch_response(16, data).to_bytes()
    return struct.pack(">ii", len(body) + 5, cid) + b"\x00" + body


class PausableTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed


def test_admit_holds_the_reader_before_allocating_and_release_reads_on() -> None:
    room = {"frames": 1}
    asked: list[int] = []

    def admit(size: int) -> bool:
        asked.append(size)
        return room["frames"] > 0

    frames: list[bytes] = []

    def take(frame: memoryview | bytes) -> None:
        frames.append(bytes(frame))
        room["frames"] -= 1

    reader = FrameReader(take, lambda e: None, max_bytes=1 << 20, admit=admit)
    transport = PausableTransport()
    reader.connection_made(transport)  # type: ignore[arg-type]
    data = framed([b"one", b"x" * 100_000])
    took = feed(reader, data, [20_000])
    assert frames == [b"one"]
    assert not transport.reading  # paused, and the 100 KB frame has no buffer yet
    assert reader._big is None
    room["frames"] = 1
    reader.release()
    assert transport.reading
    feed(reader, data[took:], [20_000])
    assert frames == [b"one", b"x" * 100_000]
    assert asked == [3, 100_000, 100_000]


def test_copy_small_hands_out_bytes_the_owner_may_keep() -> None:
    kept: list[memoryview | bytes] = []
    reader = FrameReader(kept.append, lambda e: None, max_bytes=1 << 20, copy_small=True)
    reader.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(reader, framed([b"first", b"second"]), [100])
    feed(reader, framed([b"third"]), [100])  # reuses the scratch buffer
    assert [type(f) for f in kept] == [bytes, bytes, bytes]
    assert kept == [b"first", b"second", b"third"]


@pytest.mark.parametrize(("data", "partial"), [(b"", False), (b"\x00\x00\x00\x09abc", True)])
def test_eof_tells_the_owner_whether_a_frame_was_cut(data: bytes, partial: bool) -> None:
    seen: list[bool] = []
    reader = FrameReader(lambda f: None, lambda e: None, max_bytes=100,
                         on_eof=lambda cut: seen.append(cut) or True)
    reader.connection_made(FakeTransport())  # type: ignore[arg-type]
    if data:
        feed(reader, data, [100])
    assert reader.eof_received() is True
    assert seen == [partial]


def test_a_frame_below_the_minimum_is_an_error_for_the_owner() -> None:
    errors: list[BaseException] = []
    reader = FrameReader(lambda f: None, lambda e: None, max_bytes=100, min_bytes=8,
                         on_error=errors.append)
    transport = FakeTransport()
    reader.connection_made(transport)  # type: ignore[arg-type]
    feed(reader, struct.pack(">i", 7) + b"1234567", [100])
    assert isinstance(errors[0], FrameError)
    assert not transport.closed  # the owner decides when to close


@pytest.mark.parametrize("chunk", [3, 4, 10, 1000])
def test_an_http2_preface_as_the_first_bytes_is_named(chunk: int) -> None:
    """A gRPC client (`skiff --bootstrap` given the Kafka port) opens with HTTP/2's
    preface: the reader names it, whatever socket.request.max.bytes allows, and it is
    checked only at the start of the connection."""
    from broker.protocol.frame_reader import HTTP2_PREFACE, Http2PrefaceError

    errors: list[BaseException] = []
    reader, frames, _ = make_reader(max_bytes=0x7FFFFFFF, on_error=errors.append)
    feed(reader, HTTP2_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00", [chunk])
    assert len(errors) == 1 and isinstance(errors[0], Http2PrefaceError), errors
    assert frames == []
    # after a first Kafka frame, the same bytes are a (too large) length like any other
    errors.clear()
    reader, frames, _ = make_reader(on_error=errors.append)
    feed(reader, framed([b"x" * 8]) + HTTP2_PREFACE, [chunk])
    assert frames == [b"x" * 8]
    assert len(errors) == 1 and not isinstance(errors[0], Http2PrefaceError)
