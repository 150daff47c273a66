"""IncrementalAlterConfigs (API 44), versions 0-1: SET, DELETE, APPEND, SUBTRACT per key.

TOPIC and BROKER resources go to the controller, which applies the operations to the
resource's current dynamic configs, checks the result and answers per resource once the
change is committed and applied here. An unknown operation code is INVALID_REQUEST for its
resource (the controller checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from broker.controller.requests import (
    AlterConfigOp,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from broker.handlers.alter_configs import authorized_alter, responses
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 44


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    wanted = [
        IncrementalAlterConfigsResource(
            ConfigResource(r.resource_type, r.resource_name),
            # the raw code goes through: the controller answers an unknown one per resource
            [(c.name, cast(AlterConfigOp, int(c.config_operation)), c.value) for c in r.configs],
        )
        for r in request.resources
    ]
    results = await authorized_alter(
        node, ctx, wanted, lambda ok: node.controller.incremental_alter_configs(
            ok, validate_only=request.validate_only))
    return build(mod.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE,
                 responses=responses(mod, "AlterConfigsResourceResponse",
                                     [w.resource for w in wanted], results))
