"""AclControlManager: CreateAcls/DeleteAcls records, the image they build, snapshots."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.features import MV_4_4_IV0, MV_4_4_IV1
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


def _with_metadata_version(level: int) -> Harness:
    h = Harness(cluster(1))
    h.image = apply_records(h.image, [rec.feature_level_record("metadata.version", level)],
                            h.image.offset + 1, 1)
    return h


def test_cidr_hosts_are_gated_by_metadata_version_and_validated() -> None:
    """KIP-1276: below 4.4-IV1 a CIDR host is UNSUPPORTED_VERSION, at it a bad block is
    INVALID_REQUEST with AclControlManager's words; plain hosts are unaffected."""
    cidr = dataclasses.replace(READ_ORDERS, host="127.0.0.0/8")
    old = _with_metadata_version(MV_4_4_IV0)
    r = old.controller.create_acls(old.image, [cidr, READ_ORDERS])
    assert r.response[0].error is ErrorCode.unsupported_version
    assert r.response[0].message == ("CIDR-based ACL host patterns require metadata version "
                                     "4.4-IV1 or higher.")
    assert r.response[1].error is ErrorCode.none and len(r.records) == 1
    h = _with_metadata_version(MV_4_4_IV1)
    bad = [dataclasses.replace(READ_ORDERS, host=x) for x in
           ("10.0.0.0/33", "300.0.0.0/8", "10.0.0/8", "2001:db8::/129", "2001:zz::/32",
            "2001:db8::/", "::ffff:10.0.0.0/104", "1.2.3.4/-1")]
    # accepted by Kafka 4.4 too: a host address with its prefix, two-digit prefixes, zones
    fine = [dataclasses.replace(READ_ORDERS, host=x, operation=AclOperation.WRITE) for x in
            ("10.1.2.3/8", "10.0.0.0/08", "2001:db8::1/64", "fe80::1%eth0/64")]
    r = h.controller.create_acls(h.image, [cidr, *bad, *fine])
    assert [x.error for x in r.response[len(bad) + 1:]] == [ErrorCode.none] * len(fine)
    r = dataclasses.replace(r, response=r.response[:len(bad) + 1])
    assert r.response[0].error is ErrorCode.none and len(r.records) == 1 + len(fine)
    assert [(x.error, x.message) for x in r.response[1:]] == [
        (ErrorCode.invalid_request, "Invalid CIDR notation '10.0.0.0/33': "
                                    "Value [33] not in range [0,32]"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '300.0.0.0/8': "
                                    "Value [300] not in range [0,255]"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '10.0.0/8': "
                                    "Could not parse [10.0.0/8]"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '2001:db8::/129': Could not parse "
                                    "[2001:db8::/129] - prefix length must be between 0 and 128"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '2001:zz::/32': "
                                    "Could not parse [2001:zz::]"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '2001:db8::/': "
                                    "Could not parse [2001:db8::/] - invalid prefix length"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '::ffff:10.0.0.0/104': "
                                    "Could not parse [::ffff:10.0.0.0] - not an IPv6 address"),
        (ErrorCode.invalid_request, "Invalid CIDR notation '1.2.3.4/-1': "
                                    "Could not parse [1.2.3.4/-1]")]
    h.commit(r)
    on = AuthorizerSettings(enabled=True)
    for host, allowed in (("127.0.0.1", True), ("127.255.255.255", True), ("10.0.0.1", False),
                          ("::1", False)):
        assert authorize(on, h.image.acl_index, "User:alice", host, AclOperation.READ,
                         ResourceType.TOPIC, "orders") is allowed, host
