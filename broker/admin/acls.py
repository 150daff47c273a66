"""AclService: ACLs through the admin API, with the same controller operations as the Kafka
CreateAcls/DeleteAcls handlers (the node's ControllerChannel reaches the active controller)
and the broker's image for DescribeAcls."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.pb import acls, acls_grpc, meta
from broker.admin.services import AdminServices
from broker.errors import KafkaError
from broker.security.authorizer import (
    STANDARD_AUTHORIZER,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    validate_new_acl,
)


def _code(enum: Any, value: int, what: str) -> Any:
    try:
        return enum(int(value))
    except ValueError:
        raise AdminError(S.INVALID_ARGUMENT, f"unknown {what} code {value}") from None


def binding_of(e: Any) -> AclBinding:
    return AclBinding(
        _code(ResourceType, e.resource_type, "resource type"), e.resource_name,
        _code(PatternType, e.pattern_type, "pattern type"), e.principal, e.host,
        _code(AclOperation, e.operation, "operation"),
        _code(AclPermissionType, e.permission_type, "permission type"))


def filter_of(f: Any) -> AclFilter:
    return AclFilter(
        _code(ResourceType, f.resource_type or ResourceType.ANY, "resource type"),
        f.resource_name if f.HasField("resource_name") else None,
        _code(PatternType, f.pattern_type or PatternType.ANY, "pattern type"),
        f.principal if f.HasField("principal") else None,
        f.host if f.HasField("host") else None,
        _code(AclOperation, f.operation or AclOperation.ANY, "operation"),
        _code(AclPermissionType, f.permission_type or AclPermissionType.ANY,
              "permission type"))


def entry_of(b: AclBinding, acl_id: uuid.UUID | None = None) -> Any:
    e = meta.AccessControlEntry(
        resource_type=int(b.resource_type), resource_name=b.resource_name,
        pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
        operation=int(b.operation), permission_type=int(b.permission))
    if acl_id is not None:
        e.id = acl_id.bytes
    return e


class AclService(acls_grpc.AclServiceServicer):  # type: ignore[misc]
    """Every call needs the authorizer on (`authorizer.class.name`), as Kafka's ACL APIs
    answer SECURITY_DISABLED without one."""

    def __init__(self, node: AdminServices) -> None:
        self.node = node

    def _check_enabled(self) -> None:
        if not AuthorizerSettings.from_config(self.node.config).enabled:
            raise AdminError(S.FAILED_PRECONDITION,
                             "No Authorizer is configured: set authorizer.class.name="
                             f"{STANDARD_AUTHORIZER} (and super.users) on every node")

    @rpc_errors
    async def DescribeAcls(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self._check_enabled()
        f = filter_of(request.filter)
        found = sorted(((i, b) for i, b in self.node.metadata.acls.items() if f.matches(b)),
                       key=lambda ib: (ib[1].resource_type, ib[1].resource_name,
                                       ib[1].pattern_type, ib[1].principal, ib[1].operation))
        return acls.DescribeAclsResponse(acls=[entry_of(b, i) for i, b in found])

    @rpc_errors
    async def CreateAcls(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self._check_enabled()
        bindings = [binding_of(e) for e in request.acls]
        if not bindings:
            raise AdminError(S.INVALID_ARGUMENT, "no ACLs given")
        for b in bindings:  # all or nothing: refuse before anything is written
            problem = validate_new_acl(b)
            if problem is not None:
                raise AdminError(S.INVALID_ARGUMENT, f"{b}: {problem}")
        results = await self.node.controller.create_acls(bindings)
        for b, r in zip(bindings, results, strict=True):
            if r.error is not ErrorCode.none:
                raise KafkaError(r.error, f"{b}: {r.message or r.error.name}")
        return acls.CreateAclsResponse()

    @rpc_errors
    async def DeleteAcls(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self._check_enabled()
        filters = [filter_of(f) for f in request.filters]
        if not filters:
            raise AdminError(S.INVALID_ARGUMENT, "no ACL filters given")
        results = await self.node.controller.delete_acls(filters)
        deleted: list[Any] = []
        for r in results:
            if r.error is not ErrorCode.none:
                raise KafkaError(r.error, r.message or r.error.name)
            deleted.extend(entry_of(b) for b in r.matching)
        return acls.DeleteAclsResponse(deleted=deleted)
