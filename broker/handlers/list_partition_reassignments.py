"""ListPartitionReassignments (API 46, KIP-455), version 0: the reassignments in progress
(all, or of the named partitions), from the active controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.deadline import within as await_controller
from broker.controller.rpc import list_partition_reassignments as rpc
from broker.errors import KafkaError
from broker.protocol.durations import to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 46


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    partitions = rpc.parse(request)
    try:
        ongoing = await await_controller(
            lambda: node.controller.list_partition_reassignments(partitions),
            to_ms(request.timeout, 0))
    except KafkaError as exc:
        return rpc.response(request, [], exc.error_code, exc.message or None)
    return rpc.response(request, ongoing)
