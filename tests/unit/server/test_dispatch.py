"""broker/server/dispatch.py: handlers bound to their services, so no listener holds them."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.handlers import api_versions
from broker.protocol.api import BROKER_APIS
from broker.server import ListenerSpec, Server
from broker.server.context import RequestContext
from broker.server.dispatch import Dispatcher


def test_a_bound_handler_gets_its_services_first() -> None:
    seen: list[tuple[Any, Any, Any]] = []

    async def handle(services: Any, ctx: RequestContext, request: Any) -> str:
        seen.append((services, ctx, request))
        return "answer"

    def error_response(ctx: RequestContext, request: Any, code: Any) -> str:
        return "error"

    d = Dispatcher()
    d.register(48, handle, error_response=error_response)
    services, ctx, request = object(), object(), object()
    bound = d.bind(services)
    entry = bound.get(48)
    assert entry is not None and bound.get(49) is None
    assert bound.api_keys() == frozenset({48})
    assert asyncio.run(entry.handle(ctx, request)) == "answer"  # type: ignore[arg-type]
    assert seen == [(services, ctx, request)]
    assert entry.error_response is error_response


def test_a_server_holds_no_node() -> None:
    d = Dispatcher.from_modules([api_versions]).bind(object())
    server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, BROKER_APIS, d)])
    assert not hasattr(server, "node")
