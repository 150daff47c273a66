# mypy: disable-error-code="no-any-return"
"""DeleteAcls (API 31), handled by broker/controller/acl_control.py. The codec both the
client-facing handler (broker/handlers/delete_acls.py, versions 0-3) and the controller
listener (v3) use; the answer is of the request's version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.delete_acls.v3 import request as kreq
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.controller.acl_control import AclDeletionResult
from broker.controller.api import ControllerApi
from broker.controller.rpc._common import ControllerNode, on_active
from broker.controller.rpc.create_acls import _code
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Q: Any = kreq

API_KEY = 31
VERSION = 3


def filter_of(f: Any) -> AclFilter:
    """A DeleteAclsFilter or a DescribeAclsRequest of any version (v0: LITERAL patterns)."""
    return AclFilter(
        _code(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _code(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        f.principal_filter, f.host_filter, _code(AclOperation, f.operation),
        _code(AclPermissionType, f.permission_type))


def request(filters: Sequence[AclFilter]) -> kreq.DeleteAclsRequest:
    return Q.DeleteAclsRequest(filters=tuple(Q.DeleteAclsFilter(
        resource_type_filter=i8(f.resource_type), resource_name_filter=f.resource_name,
        pattern_type_filter=i8(f.pattern_type), principal_filter=f.principal,
        host_filter=f.host, operation=i8(f.operation), permission_type=i8(f.permission))
        for f in filters))


def parse(r: Any) -> list[AclFilter]:
    return [filter_of(f) for f in r.filters]


def response(request: Any, results: Sequence[AclDeletionResult]) -> Any:
    """The answer to `request`, of its version: one result per filter, in order."""
    mod = response_module(request)
    return build(mod.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
        build(mod.DeleteAclsFilterResult, error_code=x.error, error_message=x.message,
              matching_acls=tuple(
                  build(mod.DeleteAclsMatchingAcl, error_code=ErrorCode.none,
                        error_message=None, resource_type=i8(b.resource_type),
                        resource_name=b.resource_name, pattern_type=i8(b.pattern_type),
                        principal=b.principal, host=b.host, operation=i8(b.operation),
                        permission_type=i8(b.permission))
                  for b in x.matching))
        for x in results))


def results_of(r: Any) -> list[AclDeletionResult]:
    return [AclDeletionResult(x.error_code, x.error_message, tuple(
        AclBinding(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type),
                   m.principal, m.host, AclOperation(m.operation),
                   AclPermissionType(m.permission_type)) for m in x.matching_acls))
        for x in r.filter_results]


def error_code_of(r: Any) -> ErrorCode:
    return next((x.error_code for x in r.filter_results
                 if x.error_code is ErrorCode.not_controller), ErrorCode.none)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    """Every filter of `r` answered `code`."""
    return response(r, [AclDeletionResult(code, message) for _ in r.filters])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, await controller.delete_acls(parse(r)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    return await on_active(node, r, serve, failed)
