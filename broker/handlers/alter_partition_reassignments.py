"""AlterPartitionReassignments (API 45, KIP-455), version 0: start (target replicas) or
cancel (null replicas) partition reassignments, sent on to the active controller. The new
replicas join at once and fetch; the old ones leave once the new ones are in the ISR."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.deadline import within as await_controller
from broker.controller.rpc import alter_partition_reassignments as rpc
from broker.errors import KafkaError
from broker.protocol.durations import to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 45


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    items = rpc.parse(request)
    try:
        results = await await_controller(
            lambda: node.controller.alter_partition_reassignments(items), to_ms(request.timeout, 0))
    except KafkaError as exc:
        return rpc.response([], exc.error_code, exc.message or None)
    return rpc.response(results)
