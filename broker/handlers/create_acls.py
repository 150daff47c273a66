"""CreateAcls (API 30), versions 0-3 (v0, dropped by Kafka 4.0: every creation LITERAL):
ALTER on the cluster (broker/handlers/_authz.py), then
sent on to the active controller, whose AclControlManager validates each ACL and writes
AccessControlEntry records; one result per creation, in order. Without an authorizer
(`authorizer.class.name` empty) every creation is SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.rpc import create_acls as rpc
from broker.handlers._authz import SECURITY_DISABLED_MESSAGE, enabled

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 30
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not enabled(node):
        return rpc.failed(request, ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE)
    if not request.creations:
        return rpc.response(request, [])
    return await rpc.serve(node.controller, request)
