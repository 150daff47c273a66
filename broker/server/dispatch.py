"""api_key -> handler, for one listener.

A handler is ``async def handle(services, ctx, request) -> response | ResponseChunks | None``
(the services bound by `Dispatcher.bind` when a listener is built: the node, typed by the
handler as the Protocol of what it reads);
`request` is the kio request entity of ``ctx.api_version``; the response is the kio response
entity of the same API and version, or ResponseChunks (a body spliced from files), or None
when the client expects no answer (Produce with acks=0), or NoResponse(throttle_ms) for
that case when the client went over a quota.

When a handler raises `KafkaError`, the connection gets `error_response(ctx, request, code)`
if the handler module defines one (most APIs carry per-partition or top-level error codes that
the handler sets itself; this hook is for whole-request failures), else it is closed and
logged, as Kafka does for requests it cannot answer.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.protocol.api import api_name
from broker.protocol.frames import ResponseChunks
from broker.server.context import RequestContext

Response = Any  # a kio ResponsePayload of the request's api and version


@dataclass(frozen=True, slots=True)
class NoResponse:
    """No answer (Produce with acks=0), but mute the connection for `throttle_ms` as a
    throttled answer would (KIP-219)."""

    throttle_ms: int


HandlerResult = Response | ResponseChunks | NoResponse | None
Handler = Callable[[Any, RequestContext, Any], Awaitable[HandlerResult]]
# a handler with its services bound (Dispatcher.bind): what a listener calls
BoundHandler = Callable[[RequestContext, Any], Awaitable[HandlerResult]]
ErrorResponder = Callable[[RequestContext, Any, ErrorCode], Response]


class RequestQuota(Protocol):
    """request_percentage (broker/quotas): the server measures a handler's time on the
    event loop (the share of an IO thread Kafka measures) when `applies(ctx)`, and
    `record(ctx, busy_s)` answers the throttle time owed."""

    def applies(self, ctx: RequestContext) -> bool: ...

    def record(self, ctx: RequestContext, busy_s: float) -> int: ...


@dataclass(frozen=True, slots=True)
class HandlerEntry:
    api_key: int
    handle: Handler
    error_response: ErrorResponder | None = None


class Dispatcher:
    def __init__(self) -> None:
        self._handlers: dict[int, HandlerEntry] = {}

    def register(
        self, api_key: int, handle: Handler, *, error_response: ErrorResponder | None = None
    ) -> None:
        if api_key in self._handlers:
            raise ValueError(f"a handler for {api_name(api_key)} ({api_key}) is already registered")
        self._handlers[api_key] = HandlerEntry(api_key, handle, error_response)

    def register_module(self, module: ModuleType) -> None:
        """A handler module: API_KEY, handle, and optionally error_response."""
        self.register(
            int(module.API_KEY),
            module.handle,
            error_response=getattr(module, "error_response", None),
        )

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType]) -> Dispatcher:
        d = cls()
        for m in modules:
            d.register_module(m)
        return d

    def get(self, api_key: int) -> HandlerEntry | None:
        return self._handlers.get(api_key)

    def api_keys(self) -> frozenset[int]:
        return frozenset(self._handlers)

    def bind(self, services: object) -> BoundDispatcher:
        """Each handler with `services` (the node, or what a test gives in its place) as its
        first argument: the listener that serves the result holds no services itself."""
        return BoundDispatcher({
            key: BoundEntry(key, functools.partial(entry.handle, services),
                            entry.error_response)
            for key, entry in self._handlers.items()})


@dataclass(frozen=True, slots=True)
class BoundEntry:
    api_key: int
    handle: BoundHandler
    error_response: ErrorResponder | None = None


class BoundDispatcher:
    """api_key -> a handler bound to its services (Dispatcher.bind), for one listener."""

    def __init__(self, entries: dict[int, BoundEntry]) -> None:
        self._entries = entries

    def get(self, api_key: int) -> BoundEntry | None:
        return self._entries.get(api_key)

    def api_keys(self) -> frozenset[int]:
        return frozenset(self._entries)
