"""AlterClientQuotas (API 49), versions 0-1: sent on to the active controller, which
checks the alterations and writes ClientQuota records (broker/controller/
client_quota_control.py). With an authorizer, ALTER_CONFIGS on the cluster is needed
(broker/handlers/_authz.py); a refusal answers every entry CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import alter_client_quotas as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 49
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await rpc.serve(node.controller, request)
