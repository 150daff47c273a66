# mypy: disable-error-code="no-any-return"
"""CreateAcls (API 30) on the controller listener (broker/controller/acl_control.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.create_acls.v3 import request as kreq
from kio.schema.create_acls.v3 import response as kresp
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.controller.requests import ApiError
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Q: Any = kreq
P: Any = kresp

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


def response(results: Sequence[ApiError]) -> kresp.CreateAclsResponse:
    return P.CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(
        P.AclCreationResult(error_code=x.error, error_message=x.message) for x in results))


def results_of(r: Any) -> list[ApiError]:
    return [ApiError(x.error_code, x.error_message) for x in r.results]


def error_code_of(r: Any) -> ErrorCode:
    return next((x.error_code for x in r.results if x.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def _failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    return response([ApiError(code, message) for _ in r.creations])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: Any) -> Any:
    try:
        return response(await active_service(node).create_acls(parse(r)))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
