"""One module per Kafka API, each with API_KEY and ``async def handle(node, ctx, request)``.

`BROKER_HANDLERS` lists the modules the client listener serves; the node builds its
Dispatcher from it (`broker_dispatcher()`). Add a module here when its API is implemented:
the server advertises only APIs that have a handler.
"""

from __future__ import annotations

from types import ModuleType

from broker.handlers import (
    api_versions,
    delete_records,
    describe_client_quotas,
    describe_log_dirs,
    fetch,
    list_offsets,
    produce,
)
from broker.server.dispatch import Dispatcher

BROKER_HANDLERS: tuple[ModuleType, ...] = (
    api_versions,
    produce,
    fetch,
    list_offsets,
    delete_records,
    describe_log_dirs,
    describe_client_quotas,
)


def broker_dispatcher(modules: tuple[ModuleType, ...] = BROKER_HANDLERS) -> Dispatcher:
    return Dispatcher.from_modules(modules)
