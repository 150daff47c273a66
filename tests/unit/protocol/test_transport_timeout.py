"""KafkaConnection(close_on_timeout=True), as the Raft transport uses it: a request that
times out closes the connection (Kafka's NetworkClient disconnects on a request timeout),
fails what else was pending on it, and the next request connects afresh."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from broker.protocol.transport import KafkaConnection

pytestmark = pytest.mark.timeout(20)


async def _scenario(close_on_timeout: bool, use_start: bool) -> tuple[int, int]:
    accepted = 0
    closed = 0

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted, closed
        accepted += 1
        while await reader.read(4096):  # read requests, never answer
            pass
        closed += 1
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = KafkaConnection("127.0.0.1", port, close_on_timeout=close_on_timeout)
    try:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                if use_start and conn._live() is not None:
                    await conn.start_request(18, 0, ApiVersionsRequest(), 0.2)
                else:
                    await conn.request(18, 0, ApiVersionsRequest(), 0.2)
        await asyncio.sleep(0.2)
        return accepted, closed
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("use_start", [False, True])
def test_timeout_closes_the_connection(use_start: bool) -> None:
    accepted, closed = asyncio.run(_scenario(True, use_start))
    assert accepted == 2 and closed >= 1


def test_without_the_option_the_connection_stays() -> None:
    accepted, closed = asyncio.run(_scenario(False, False))
    assert accepted == 1 and closed == 0


async def _malformed_answer() -> BaseException:
    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readexactly(4)
        body = await reader.readexactly(int.from_bytes(head, "big"))
        cid = body[4:8]  # api key, api version, then the correlation id
        bad = cid + b"\xff\xff"  # an error code, then nothing where the api list should be
        writer.write(len(bad).to_bytes(4, "big") + bad)
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    conn = KafkaConnection("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        with pytest.raises(Exception) as info:
            await conn.request(18, 0, ApiVersionsRequest(), 10.0)
        return info.value
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


def test_a_response_that_cannot_be_parsed_fails_its_request_at_once() -> None:
    """Not after the request's timeout: the parse error is the answer (the connection
    closes, as for any malformed frame)."""
    error, elapsed = asyncio.run(_timed(_malformed_answer()))
    assert not isinstance(error, TimeoutError), error
    assert elapsed < 5.0


async def _timed(coro: Coroutine[Any, Any, BaseException]) -> tuple[BaseException, float]:
    t0 = time.monotonic()
    error = await coro
    return error, time.monotonic() - t0
