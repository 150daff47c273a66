"""ListPartitionReassignments (API 46, KIP-455), version 0: the reassignments in progress
(all, or of the named partitions), from the active controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import list_partition_reassignments as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 46


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await rpc.serve(node.controller, request)
