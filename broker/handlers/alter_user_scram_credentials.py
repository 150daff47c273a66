"""AlterUserScramCredentials (API 51), version 0: ALTER on the cluster (checked before, in
broker/handlers/_authz.py; refused: CLUSTER_AUTHORIZATION_FAILED per user), then sent on to
the active controller, which writes UserScramCredential records
(broker/security/scram_admin.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import alter_user_scram_credentials as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 51


error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await rpc.serve(node.controller, request)
