"""DeleteAcls v1-3: ALTER on the cluster, then every matching ACL removed."""

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


def request(v: int, rtype: int, name: str | None, pattern: int) -> object:
    m = schema_module("delete_acls", v)
    return m.DeleteAclsRequest(filters=(build(
        m.DeleteAclsFilter, resource_type_filter=i8(rtype), resource_name_filter=name,
        pattern_type_filter=i8(pattern), principal_filter=None, host_filter=None,
        operation=i8(O.ANY), permission_type=i8(1)),))


@pytest.mark.parametrize("v", [1, 2, 3])
def test_delete_matching(node_factory, v: int) -> None:
    node = node_factory(AUTHORIZER)
    keep = allow("User:a", O.READ, R.GROUP, "g")
    gone = allow("User:a", O.WRITE, R.TOPIC, "orders", PatternType.PREFIXED)
    grant(node, keep, gone)
    resp = dispatch(node, 31, v, request(v, R.TOPIC, "orders-1", PatternType.MATCH))
    [result] = resp.filter_results
    assert result.error_code is ErrorCode.none
    assert [(m.resource_name, m.pattern_type, m.principal, m.operation)
            for m in result.matching_acls] == [("orders", PatternType.PREFIXED, "User:a",
                                                O.WRITE)]
    assert list(node.metadata.acls.values()) == [keep]


def test_refused_without_alter(node_factory) -> None:
    node = node_factory(AUTHORIZER)
    grant(node, allow("User:a", O.READ, R.GROUP, "g"))
    resp = dispatch(node, 31, 3, request(3, R.ANY, None, PatternType.ANY), principal="User:a")
    assert resp.filter_results[0].error_code is ErrorCode.cluster_authorization_failed
    assert len(node.metadata.acls) == 1


def test_without_an_authorizer_security_is_disabled(node) -> None:
    resp = dispatch(node, 31, 3, request(3, R.ANY, None, PatternType.ANY))
    assert resp.filter_results[0].error_code is ErrorCode.security_disabled


def test_unknown_filter_is_invalid(node_factory) -> None:
    node = node_factory(AUTHORIZER)
    resp = dispatch(node, 31, 3, request(3, R.UNKNOWN, None, PatternType.ANY))
    assert resp.filter_results[0].error_code is ErrorCode.invalid_request


def test_v0_deletes_literal_acls_only(node_factory) -> None:
    """v0 (Kafka 3.9 served it) filters LITERAL patterns: a prefixed ACL on the same name
    stays."""
    node = node_factory(AUTHORIZER)
    literal = allow("User:a", O.WRITE, R.TOPIC, "orders")
    prefixed = allow("User:a", O.WRITE, R.TOPIC, "orders", PatternType.PREFIXED)
    grant(node, literal, prefixed)
    resp = dispatch(node, 31, 0, request(0, R.TOPIC, "orders", PatternType.ANY))
    [result] = resp.filter_results
    assert result.error_code is ErrorCode.none
    assert [(m.resource_name, m.principal) for m in result.matching_acls] == [
        ("orders", "User:a")]
    assert list(node.metadata.acls.values()) == [prefixed]
