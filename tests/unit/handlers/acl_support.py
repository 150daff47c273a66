"""Helpers for the ACL and authorization handler tests: a node with the StandardAuthorizer,
requests through the broker dispatcher (whole-request checks included), contexts with a
principal."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kio.static.primitive import i8

from broker.handlers import broker_dispatcher
from broker.protocol.kio_build import build
from broker.security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType
from broker.security.authorizer import ResourceType as R
from broker.server.context import RequestContext
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
DISPATCHER = broker_dispatcher()


def ctx_of(api_key: int, version: int, principal: str = "User:admin") -> RequestContext:
    return dataclasses.replace(make_ctx(api_key, version), principal=principal)


def dispatch(node: TestNode, api_key: int, version: int, request: Any,
             principal: str = "User:admin") -> Any:
    entry = DISPATCHER.get(api_key)
    assert entry is not None
    resp = asyncio.run(entry.handle(node, ctx_of(api_key, version, principal), request))
    assert int(resp.__version__) == version
    assert roundtrip(resp) == resp
    return resp


def allow(principal: str, op: AclOperation, rtype: R, name: str,
          pattern: PatternType = PatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def grant(node: TestNode, *bindings: AclBinding) -> None:
    results = asyncio.run(node.controller.create_acls(list(bindings)))
    assert all(r.error.name == "none" for r in results), results


def create_acls_request(version: int, bindings: list[AclBinding]) -> Any:
    m = schema_module("create_acls", version)
    return m.CreateAclsRequest(creations=tuple(build(
        m.AclCreation, resource_type=i8(b.resource_type), resource_name=b.resource_name,
        resource_pattern_type=i8(b.pattern_type), principal=b.principal, host=b.host,
        operation=i8(b.operation), permission_type=i8(b.permission)) for b in bindings))
