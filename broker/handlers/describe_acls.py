"""DescribeAcls (API 29), versions 0-3 (v0, dropped by Kafka 4.0, has no pattern type: its
filter is LITERAL, as Kafka 3.9 read it): DESCRIBE on the cluster (broker/handlers/_authz.py),
then the ACLs matching the filter, from this broker's metadata image, grouped by resource
pattern. A filter with an UNKNOWN part is INVALID_REQUEST, as Kafka answers it; without an
authorizer the answer is SECURITY_DISABLED."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.controller.rpc.delete_acls import filter_of
from broker.handlers._authz import enabled
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.authorizer import AclBinding

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 29
# Kafka's AclApis words DescribeAcls' refusal so (CreateAcls and DeleteAcls say "No Authorizer
# is configured.", SECURITY_DISABLED_MESSAGE).
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def _response(request: Any, code: ErrorCode, message: str | None,
              resources: dict[tuple[int, str, int], list[AclBinding]]) -> Any:
    mod = response_module(request)
    return build(mod.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=code,
                 error_message=message, resources=tuple(
                     build(mod.DescribeAclsResource, resource_type=i8(rtype),
                           resource_name=name, pattern_type=i8(pattern), acls=tuple(
                               build(mod.AclDescription, principal=b.principal, host=b.host,
                                     operation=i8(b.operation),
                                     permission_type=i8(b.permission))
                               for b in acls))
                     for (rtype, name, pattern), acls in resources.items()))


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _response(request, code, None, {})


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not enabled(node):
        return _response(request, ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE, {})
    f = filter_of(request)
    unknown = f.unknown_part()
    if unknown is not None:
        return _response(request, ErrorCode.invalid_request, f"Unknown {unknown}.", {})
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in node.metadata.acls.values():
        if f.matches(b):
            key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
            grouped.setdefault(key, []).append(b)
    ordered = {k: sorted(v, key=lambda b: (b.principal, b.host, b.operation, b.permission))
               for k, v in sorted(grouped.items())}
    return _response(request, ErrorCode.none, None, ordered)
