"""CreateAcls v1-3: ALTER on the cluster, then the controller's AclControlManager."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import PatternType
from broker.security.authorizer import ResourceType as R
from tests.unit.handlers.acl_support import (
    AUTHORIZER,
    allow,
    create_acls_request,
    dispatch,
    grant,
)


@pytest.mark.parametrize("v", [1, 2, 3])
def test_create_and_validate(node_factory, v: int) -> None:
    node = node_factory(AUTHORIZER)
    good = allow("User:alice", O.READ, R.TOPIC, "orders", PatternType.PREFIXED)
    bad = allow("User:alice", O.ALTER, R.CLUSTER, "not-the-cluster")
    resp = dispatch(node, 30, v, create_acls_request(v, [good, bad]))
    assert [r.error_code for r in resp.results] == [ErrorCode.none, ErrorCode.invalid_request]
    assert "kafka-cluster" in (resp.results[1].error_message or "")
    assert list(node.metadata.acls.values()) == [good]


def test_needs_alter_on_the_cluster(node_factory) -> None:
    node = node_factory(AUTHORIZER)
    acl = allow("User:bob", O.READ, R.TOPIC, "t")
    resp = dispatch(node, 30, 3, create_acls_request(3, [acl]), principal="User:bob")
    assert [r.error_code for r in resp.results] == [ErrorCode.cluster_authorization_failed]
    assert node.metadata.acls == {}
    grant(node, allow("User:bob", O.ALTER, R.CLUSTER, "kafka-cluster"))
    resp = dispatch(node, 30, 3, create_acls_request(3, [acl]), principal="User:bob")
    assert [r.error_code for r in resp.results] == [ErrorCode.none]


def test_without_an_authorizer_security_is_disabled(node) -> None:
    acl = allow("User:bob", O.READ, R.TOPIC, "t")
    resp = dispatch(node, 30, 3, create_acls_request(3, [acl]), principal="User:ANONYMOUS")
    assert resp.results[0].error_code is ErrorCode.security_disabled
    assert resp.results[0].error_message == "No Authorizer is configured."
    assert node.metadata.acls == {}


def test_v0_creates_literal_acls(node_factory) -> None:
    """v0 (Kafka 3.9 served it) has no pattern type: every creation is LITERAL."""
    node = node_factory(AUTHORIZER)
    acl = allow("User:alice", O.READ, R.TOPIC, "orders")
    resp = dispatch(node, 30, 0, create_acls_request(0, [acl]))
    assert [r.error_code for r in resp.results] == [ErrorCode.none]
    assert list(node.metadata.acls.values()) == [acl]
