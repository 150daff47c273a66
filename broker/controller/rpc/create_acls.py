# mypy: disable-error-code="no-any-return"
"""CreateAcls (API 30), handled by broker/controller/acl_control.py. The codec both the
client-facing handler (broker/handlers/create_acls.py, versions 0-3) and the controller
listener (v3) use; the answer is of the request's version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.create_acls.v3 import request as kreq
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.controller.api import ControllerApi
from broker.controller.requests import ApiError
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Q: Any = kreq

API_KEY = 30
VERSION = 3


def _code(enum: Any, value: int) -> Any:
    """An enum member, UNKNOWN for a code Kafka does not define (refused as invalid)."""
    try:
        return enum(int(value))
    except ValueError:
        return enum.UNKNOWN


def binding_of(c: Any) -> AclBinding:
    """One AclCreation of any version (v0 has no pattern type: LITERAL)."""
    return AclBinding(
        _code(ResourceType, c.resource_type), c.resource_name,
        _code(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
        c.principal, c.host, _code(AclOperation, c.operation),
        _code(AclPermissionType, c.permission_type))


def request(bindings: Sequence[AclBinding]) -> kreq.CreateAclsRequest:
    return Q.CreateAclsRequest(creations=tuple(Q.AclCreation(
        resource_type=i8(b.resource_type), resource_name=b.resource_name,
        resource_pattern_type=i8(b.pattern_type), principal=b.principal, host=b.host,
        operation=i8(b.operation), permission_type=i8(b.permission)) for b in bindings))


def parse(r: Any) -> list[AclBinding]:
    return [binding_of(c) for c in r.creations]


def response(request: Any, results: Sequence[ApiError]) -> Any:
    """The answer to `request`, of its version: one result per creation, in order."""
    mod = response_module(request)
    return build(mod.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.AclCreationResult, error_code=x.error, error_message=x.message)
        for x in results))


def results_of(r: Any) -> list[ApiError]:
    return [ApiError(x.error_code, x.error_message) for x in r.results]


def error_code_of(r: Any) -> ErrorCode:
    return next((x.error_code for x in r.results if x.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    """Every creation of `r` answered `code`."""
    return response(r, [ApiError(code, message) for _ in r.creations])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, await controller.create_acls(parse(r)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    return await on_active(node, r, serve, failed)
