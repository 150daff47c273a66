"""DeleteAcls (API 31), versions 0-3 (v0, dropped by Kafka 4.0: LITERAL filters):
ALTER on the cluster (broker/handlers/_authz.py), then
sent on to the active controller, which removes every ACL each filter matches
(RemoveAccessControlEntry records) and lists them per filter. Without an authorizer every
filter is SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.controller.acl_control import AclDeletionResult
from broker.controller.rpc import delete_acls as rpc
from broker.errors import KafkaError
from broker.handlers._authz import SECURITY_DISABLED_MESSAGE, enabled
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 31


def _response(request: Any, results: Sequence[AclDeletionResult]) -> Any:
    mod = response_module(request)
    return build(mod.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
        build(mod.DeleteAclsFilterResult, error_code=r.error, error_message=r.message,
              matching_acls=tuple(
                  build(mod.DeleteAclsMatchingAcl, error_code=ErrorCode.none,
                        error_message=None, resource_type=i8(b.resource_type),
                        resource_name=b.resource_name, pattern_type=i8(b.pattern_type),
                        principal=b.principal, host=b.host, operation=i8(b.operation),
                        permission_type=i8(b.permission))
                  for b in r.matching))
        for r in results))


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _response(request, [AclDeletionResult(code) for _ in request.filters])


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not enabled(node):
        return _response(request, [AclDeletionResult(ErrorCode.security_disabled,
                                                      SECURITY_DISABLED_MESSAGE)
                                   for _ in request.filters])
    if not request.filters:
        return _response(request, [])
    try:
        results = await node.controller.delete_acls(rpc.parse(request))
    except KafkaError as exc:
        return _response(request, [AclDeletionResult(exc.error_code, exc.message or None)
                                   for _ in request.filters])
    return _response(request, results)
