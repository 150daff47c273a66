"""Run a Server on 127.0.0.1:0 inside a test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from broker.handlers import api_versions
from broker.protocol.api import BROKER_APIS, ApiTable
from broker.server import Dispatcher, ListenerSpec, Server, ServerConfig


@contextlib.asynccontextmanager
async def running_server(
    dispatcher: Dispatcher | None = None,
    config: ServerConfig | None = None,
    apis: ApiTable = BROKER_APIS,
    node: object = None,
    on_connection_closed: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[Server, int]]:
    if dispatcher is None:
        dispatcher = Dispatcher.from_modules([api_versions])
    server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, apis, dispatcher.bind(node))],
                    config, on_connection_closed=on_connection_closed)
    await server.start()
    try:
        yield server, server.address("PLAINTEXT")[1]
    finally:
        await server.stop()


def run(coro_fn: Callable[[], Awaitable[Any]], timeout: float = 20) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())
