"""UpdateFeatures (API 57), versions 0-2 (Kafka 4.1's): sent on to the active controller,
which checks the updates and writes FeatureLevel records (broker/controller/
feature_control.py), or moves kraft.version through Raft. ALTER on the cluster is needed
(broker/handlers/_authz.py); a refusal answers CLUSTER_AUTHORIZATION_FAILED. The whole
request succeeds or fails together: the outcome is the top-level error (v0-v1 list each
feature with NONE, as Kafka 3.9+ does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.rpc import update_features as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 57
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not request.feature_updates:
        return rpc.failed(request, ErrorCode.invalid_request, "No feature updates were given.")
    return await rpc.serve(node.controller, request)
