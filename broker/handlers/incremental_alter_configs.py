"""IncrementalAlterConfigs (API 44), versions 0-1: SET, DELETE, APPEND, SUBTRACT per key.

TOPIC and BROKER resources go to the controller, which applies the operations to the
resource's current dynamic configs, checks the result and answers per resource once the
change is committed and applied here. An unknown operation code is INVALID_REQUEST for its
resource (the controller checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import incremental_alter_configs as rpc
from broker.handlers.alter_configs import authorized_alter

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 44


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    results = await authorized_alter(
        node, ctx, "incremental_alter_configs", rpc.parse(request),
        lambda ok: node.controller.incremental_alter_configs(
            ok, validate_only=request.validate_only))
    return rpc.response(request, results)
