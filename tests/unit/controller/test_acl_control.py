"""AclControlManager: CreateAcls/DeleteAcls records, the image they build, snapshots."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata import records as rec
from broker.metadata.snapshot import decode_snapshot, encode_snapshot
from broker.security.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    authorize,
)
from tests.unit.controller.conftest import Harness, cluster

READ_ORDERS = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
GROUP = AclBinding(ResourceType.GROUP, "app-", PatternType.PREFIXED, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW)


def test_create_then_authorize_then_delete() -> None:
    h = Harness(cluster(1))
    results = h.commit(h.controller.create_acls(h.image, [READ_ORDERS, GROUP]))
    assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
    assert set(h.image.acls.values()) == {READ_ORDERS, GROUP}
    on = AuthorizerSettings(enabled=True)
    assert authorize(on, h.image.acl_index, "User:alice", "h", AclOperation.READ,
                     ResourceType.GROUP, "app-1")
    # the same ACL again: answered as created, nothing written
    again = h.controller.create_acls(h.image, [READ_ORDERS])
    assert again.records == [] and again.response[0].error is ErrorCode.none
    deleted = h.commit(h.controller.delete_acls(h.image, [
        AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH),
        AclFilter(ResourceType.ANY)]))
    assert deleted[0].matching == (READ_ORDERS,)
    assert deleted[1].matching == (GROUP,)  # READ_ORDERS went with the first filter
    assert h.image.acls == {}


def test_invalid_acls_and_filters() -> None:
    h = Harness(cluster(1))
    bad = AclBinding(ResourceType.CLUSTER, "other", PatternType.LITERAL, "User:a", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    result = h.controller.create_acls(h.image, [bad, READ_ORDERS])
    assert result.response[0].error is ErrorCode.invalid_request
    assert "kafka-cluster" in (result.response[0].message or "")
    assert result.response[1].error is ErrorCode.none and len(result.records) == 1
    d = h.controller.delete_acls(h.image, [AclFilter(operation=AclOperation.UNKNOWN)])
    assert d.records == [] and d.response[0].error is ErrorCode.invalid_request


def test_acls_survive_snapshot_and_record_encoding() -> None:
    h = Harness(cluster(1))
    result = h.controller.create_acls(h.image, [READ_ORDERS, GROUP])
    h.commit(type(result)([rec.decode(rec.encode(r)) for r in result.records],
                          result.response))
    again = decode_snapshot(encode_snapshot(h.image))
    assert again.acls == h.image.acls
