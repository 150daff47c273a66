"""The Kafka network server (listeners, frames, dispatch, in-order pipelining)."""

from broker.protocol.frames import FileSlice, ResponseChunks
from broker.server.context import RequestContext
from broker.server.dispatch import BoundDispatcher, Dispatcher, Handler, HandlerEntry
from broker.server.server import ListenerSpec, Server, ServerConfig, advertised_apis

__all__ = [
    "BoundDispatcher",
    "Dispatcher",
    "FileSlice",
    "Handler",
    "HandlerEntry",
    "ListenerSpec",
    "RequestContext",
    "ResponseChunks",
    "Server",
    "ServerConfig",
    "advertised_apis",
]
