"""CreateAcls (API 30), versions 0-3 (v0, dropped by Kafka 4.0: every creation LITERAL):
ALTER on the cluster (broker/handlers/_authz.py), then
sent on to the active controller, whose AclControlManager validates each ACL and writes
AccessControlEntry records; one result per creation, in order. Without an authorizer
(`authorizer.class.name` empty) every creation is SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import ApiError
from broker.controller.rpc import create_acls as rpc
from broker.errors import KafkaError
from broker.handlers._authz import SECURITY_DISABLED_MESSAGE, enabled
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 30


def _response(request: Any, results: Sequence[ApiError]) -> Any:
    mod = response_module(request)
    return build(mod.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.AclCreationResult, error_code=r.error, error_message=r.message)
        for r in results))


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _response(request, [ApiError(code) for _ in request.creations])


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not enabled(node):
        return _response(request, [ApiError(ErrorCode.security_disabled,
                                            SECURITY_DISABLED_MESSAGE)
                                   for _ in request.creations])
    if not request.creations:
        return _response(request, [])
    try:
        results = await node.controller.create_acls(rpc.parse(request))
    except KafkaError as exc:
        return _response(request, [ApiError(exc.error_code, exc.message or None)
                                   for _ in request.creations])
    return _response(request, results)
