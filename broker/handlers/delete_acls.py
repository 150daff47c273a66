"""DeleteAcls (API 31), versions 0-3 (v0, dropped by Kafka 4.0: LITERAL filters):
ALTER on the cluster (broker/handlers/_authz.py), then
sent on to the active controller, which removes every ACL each filter matches
(RemoveAccessControlEntry records) and lists them per filter. Without an authorizer every
filter is SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.rpc import delete_acls as rpc
from broker.handlers._authz import SECURITY_DISABLED_MESSAGE, enabled

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 31
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not enabled(node):
        return rpc.failed(request, ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE)
    if not request.filters:
        return rpc.response(request, [])
    return await rpc.serve(node.controller, request)
