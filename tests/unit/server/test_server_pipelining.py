"""Pipelined requests: concurrent handlers, answers in request order, the in-flight cap,
handler failures, no-response requests and zero-copy ResponseChunks."""

from __future__ import annotations

import asyncio
import os
import random
import struct
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, BinaryIO

from kio.schema.api_versions.v2.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from broker.errors import KafkaError
from broker.handlers import api_versions
from broker.protocol.headers import encode_body
from broker.server import Dispatcher, RequestContext, ResponseChunks, ServerConfig
from broker.testing.wire import (
    api_versions_request,
    arecv_frame,
    decode_response,
    encode_request,
)
from tests.unit.server.harness import run, running_server


def _response_for(ctx: RequestContext) -> ApiVersionsResponse:
    # The throttle time carries the correlation id, so the client can see which handler answered.
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=i32Timedelta.parse(timedelta(milliseconds=ctx.correlation_id)),
    )


def _dispatcher(handle: Any, error_response: Any = None) -> Dispatcher:
    d = Dispatcher()
    d.register(18, handle, error_response=error_response)
    return d


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def test_pipelined_answers_in_request_order_while_handlers_overlap() -> None:
    started: list[int] = []
    finished: list[int] = []
    rng = random.Random(4)
    delays = {i: rng.uniform(0, 0.05) for i in range(40)}
    delays[0] = 0.2  # the first one is by far the slowest

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        started.append(ctx.correlation_id)
        await asyncio.sleep(delays[ctx.correlation_id])
        finished.append(ctx.correlation_id)
        return _response_for(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (_s, port):
            reader, writer = await _open(port)
            writer.write(b"".join(encode_request(api_versions_request(2), i) for i in range(40)))
            got = []
            for _ in range(40):
                corr, resp = decode_response(18, 2, await arecv_frame(reader))
                assert resp.throttle_time == timedelta(milliseconds=corr)
                got.append(corr)
            writer.close()
        assert got == list(range(40))
        assert started == list(range(40))  # handlers start in arrival order
        assert finished != list(range(40))  # and really ran concurrently
        assert finished.index(0) > 0

    run(main)


def test_inflight_cap_stops_reading() -> None:
    release = asyncio.Event
    state: dict[str, Any] = {"started": 0}

    async def main() -> None:
        gate = release()

        async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
            state["started"] += 1
            await gate.wait()
            return _response_for(ctx)

        config = ServerConfig(max_inflight_requests=3)
        async with running_server(_dispatcher(handle), config=config) as (_s, port):
            reader, writer = await _open(port)
            writer.write(b"".join(encode_request(api_versions_request(2), i) for i in range(10)))
            await writer.drain()
            await asyncio.sleep(0.3)
            assert state["started"] == 3  # the server stopped reading at the cap
            gate.set()
            got = [decode_response(18, 2, await arecv_frame(reader))[0] for _ in range(10)]
            assert got == list(range(10))
            assert state["started"] == 10
            writer.close()

    run(main)


def test_handler_exception_closes_only_that_connection() -> None:
    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        if ctx.client_id == "bad" and ctx.correlation_id == 2:
            raise RuntimeError("handler bug")
        return _response_for(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (_s, port):
            r_bad, w_bad = await _open(port)
            r_ok, w_ok = await _open(port)
            w_bad.write(b"".join(encode_request(api_versions_request(2), i, client_id="bad")
                                 for i in (1, 2, 3)))
            assert decode_response(18, 2, await arecv_frame(r_bad))[0] == 1
            assert await asyncio.wait_for(r_bad.read(1), 5) == b""
            w_ok.write(encode_request(api_versions_request(2), 2, client_id="ok"))
            assert decode_response(18, 2, await arecv_frame(r_ok))[0] == 2
            w_bad.close()
            w_ok.close()

    run(main)


def test_kafka_error_uses_the_handlers_error_response_or_closes() -> None:
    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        raise KafkaError(ErrorCode.cluster_authorization_failed, "nope")

    async def main() -> None:
        disp = _dispatcher(handle, error_response=api_versions.error_response)
        async with running_server(disp) as (_s, port):
            reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(3), 11))
            corr, resp = decode_response(18, 3, await arecv_frame(reader))
            assert (corr, resp.error_code) == (11, ErrorCode.cluster_authorization_failed)
            writer.close()
        async with running_server(_dispatcher(handle)) as (_s, port):
            reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(3), 12))
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()

    run(main)


def test_none_means_no_response() -> None:
    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        return None if ctx.correlation_id % 2 else _response_for(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (_s, port):
            reader, writer = await _open(port)
            writer.write(b"".join(encode_request(api_versions_request(2), i) for i in range(6)))
            got = [decode_response(18, 2, await arecv_frame(reader))[0] for _ in range(3)]
            assert got == [0, 2, 4]
            writer.close()

    run(main)


def test_wrong_response_version_closes() -> None:
    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        return api_versions.build_response(1, ctx.apis, ErrorCode.none)

    async def main() -> None:
        # ApiVersions is exempt (its error answer is always v0), so use another key.
        d = Dispatcher()
        d.register(18, api_versions.handle)
        d.register(48, handle)
        async with running_server(d) as (_s, port):
            from kio.schema.describe_client_quotas.v0.request import DescribeClientQuotasRequest

            reader, writer = await _open(port)
            writer.write(encode_request(DescribeClientQuotasRequest(components=(), strict=False),
                                        1))
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()

    run(main)


@dataclass(frozen=True)
class _Slice:
    file: BinaryIO
    position: int
    length: int

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


def test_response_chunks_with_file_slices_are_spliced_in_order() -> None:
    payload = os.urandom(6 * 1024 * 1024)
    with tempfile.TemporaryFile() as f:
        f.write(b"HEAD" + payload + b"TAIL")
        f.flush()
        f.seek(0)  # sendfile must not depend on or move the file position
        slice_ = _Slice(f, 4, len(payload))
        big_bytes = os.urandom(3 * 1024 * 1024)  # fills the transport buffer before sendfile

        async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
            return ResponseChunks([b"<", big_bytes, slice_, b"|", _Slice(f, 0, 4), b">"])

        async def main() -> None:
            async with running_server(_dispatcher(handle)) as (_s, port):
                reader, writer = await _open(port)
                writer.write(b"".join(encode_request(api_versions_request(1), i)
                                      for i in (1, 2)))
                for corr in (1, 2):
                    await asyncio.sleep(0.2)  # a slow reader: the socket buffer fills up
                    frame = await arecv_frame(reader)
                    assert struct.unpack_from(">i", frame)[0] == corr
                    assert frame[4:] == b"<" + big_bytes + payload + b"|HEAD>"
                writer.close()

        run(main)
        assert f.tell() == 0


def test_short_file_slice_closes_connection() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 100)
        f.flush()

        async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
            return ResponseChunks([_Slice(f, 50, 100)])

        async def main() -> None:
            async with running_server(_dispatcher(handle)) as (_s, port):
                reader, writer = await _open(port)
                writer.write(encode_request(api_versions_request(1), 1))
                data = await asyncio.wait_for(reader.read(), 5)
                assert len(data) < 4 + 4 + 100  # never a complete frame
                writer.close()

        run(main)


def test_encode_body_round_trip() -> None:
    resp = api_versions.build_response(2, api_versions.ApiTable([]), ErrorCode.none)
    assert encode_body(resp) == b"\x00\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"


def test_inflight_bytes_cap_stops_reading() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    state: dict[str, int] = {"started": 0}
    req = ApiVersionsRequest(client_software_name="x" * 80, client_software_version="1")
    frame_len = len(encode_request(req, 0)) - 4
    cap = frame_len * 3 + frame_len // 2  # room for three frames, not four

    async def main() -> None:
        gate = asyncio.Event()

        async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
            state["started"] += 1
            await gate.wait()
            return api_versions.build_response(3, ctx.apis, ErrorCode.none)

        config = ServerConfig(max_inflight_bytes=cap)
        async with running_server(_dispatcher(handle), config=config) as (_s, port):
            reader, writer = await _open(port)
            writer.write(b"".join(encode_request(req, i) for i in range(8)))
            await asyncio.sleep(0.3)
            assert state["started"] == 3
            gate.set()
            got = [decode_response(18, 3, await arecv_frame(reader))[0] for _ in range(8)]
            assert got == list(range(8))
            writer.close()

    run(main)

    # A single frame larger than the cap is still let in when nothing else is in flight.
    async def one_big() -> None:
        async with running_server(config=ServerConfig(max_inflight_bytes=10)) as (_s, port):
            reader, writer = await _open(port)
            writer.write(encode_request(req, 1) + encode_request(req, 2))
            assert [decode_response(18, 3, await arecv_frame(reader))[0] for _ in range(2)] == [
                1, 2]
            writer.close()

    run(one_big)


def test_a_handler_that_is_not_a_coroutine_closes_only_its_connection() -> None:
    def not_async(node: object, ctx: RequestContext, request: Any) -> Any:
        return _response_for(ctx)  # a bug: handlers must be async

    async def main() -> None:
        d = Dispatcher.from_modules([api_versions])
        d.register(48, not_async)  # type: ignore[arg-type]
        async with running_server(d) as (server, port):
            from kio.schema.describe_client_quotas.v0.request import DescribeClientQuotasRequest

            reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(2), 1))
            writer.write(encode_request(DescribeClientQuotasRequest(components=(), strict=False),
                                        2))
            assert decode_response(18, 2, await arecv_frame(reader))[0] == 1
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()
            await asyncio.sleep(0.05)
            assert server.connection_count == 0
            r2, w2 = await _open(port)
            w2.write(encode_request(api_versions_request(2), 3))
            assert decode_response(18, 2, await arecv_frame(r2))[0] == 3
            w2.close()

    run(main)
