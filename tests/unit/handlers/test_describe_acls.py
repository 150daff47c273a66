"""DescribeAcls v1-3: DESCRIBE on the cluster; ACLs from the image grouped by pattern."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.protocol.kio_build import build
from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import PatternType
from broker.security.authorizer import ResourceType as R
from tests.unit.handlers.acl_support import AUTHORIZER, allow, dispatch, grant
from tests.unit.handlers.datapath import schema_module


def request(v: int, rtype: int = R.ANY, name: str | None = None,
            pattern: int = PatternType.ANY, principal: str | None = None) -> object:
    m = schema_module("describe_acls", v)
    return build(m.DescribeAclsRequest, resource_type_filter=i8(rtype),
                 resource_name_filter=name, pattern_type_filter=i8(pattern),
                 principal_filter=principal, host_filter=None, operation=i8(O.ANY),
                 permission_type=i8(1))


@pytest.mark.parametrize("v", [1, 2, 3])
def test_describe_groups_by_resource(node_factory, v: int) -> None:
    node = node_factory(AUTHORIZER)
    grant(node, allow("User:a", O.READ, R.TOPIC, "orders"),
          allow("User:b", O.WRITE, R.TOPIC, "orders"),
          allow("User:a", O.READ, R.GROUP, "app", PatternType.PREFIXED))
    resp = dispatch(node, 29, v, request(v))
    assert resp.error_code is ErrorCode.none
    got = {(r.resource_type, r.resource_name, r.pattern_type):
           sorted((a.principal, a.operation) for a in r.acls) for r in resp.resources}
    assert got == {(R.TOPIC, "orders", PatternType.LITERAL): [("User:a", O.READ),
                                                              ("User:b", O.WRITE)],
                   (R.GROUP, "app", PatternType.PREFIXED): [("User:a", O.READ)]}
    only_a = dispatch(node, 29, v, request(v, R.GROUP, "app-1", PatternType.MATCH))
    assert [r.resource_name for r in only_a.resources] == ["app"]


def test_refused_without_describe_and_unknown_filter(node_factory) -> None:
    node = node_factory(AUTHORIZER)
    grant(node, allow("User:a", O.READ, R.TOPIC, "orders"))
    resp = dispatch(node, 29, 3, request(3), principal="User:a")
    assert resp.error_code is ErrorCode.cluster_authorization_failed and resp.resources == ()
    bad = dispatch(node, 29, 3, request(3, R.UNKNOWN))
    assert bad.error_code is ErrorCode.invalid_request


def test_without_an_authorizer_security_is_disabled(node) -> None:
    assert dispatch(node, 29, 3, request(3)).error_code is ErrorCode.security_disabled


def test_v0_sees_literal_acls_only(node_factory) -> None:
    """v0 (Kafka 3.9 served it) has no pattern type: its filter is LITERAL, as Kafka reads
    it, so a prefixed ACL is not described to it, and its answer carries no pattern type."""
    node = node_factory(AUTHORIZER)
    grant(node, allow("User:a", O.READ, R.TOPIC, "orders"),
          allow("User:a", O.READ, R.GROUP, "app", PatternType.PREFIXED))
    resp = dispatch(node, 29, 0, request(0))
    assert resp.error_code is ErrorCode.none
    assert [(r.resource_type, r.resource_name) for r in resp.resources] == [
        (R.TOPIC, "orders")]
    assert not hasattr(resp.resources[0], "pattern_type")
