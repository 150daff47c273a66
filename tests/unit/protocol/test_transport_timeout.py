"""KafkaConnection(close_on_timeout=True), as the Raft transport uses it: a request that
times out closes the connection (Kafka's NetworkClient disconnects on a request timeout),
fails what else was pending on it, and the next request connects afresh."""

from __future__ import annotations

import asyncio

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
