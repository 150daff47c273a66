"""broker/security/authorizer.py: StandardAuthorizer decisions, filters, validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import ConfigError
from broker.security.authorizer import (
    STANDARD_AUTHORIZER,
    AclBinding,
    AclFilter,
    AclIndex,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    authorize,
    authorize_any,
    authorized_operations,
    validate_new_acl,
)

O, P, R, T = AclOperation, AclPermissionType, ResourceType, PatternType  # noqa: E741
ON = AuthorizerSettings(enabled=True)


def acl(name: str = "orders", op: AclOperation = O.READ, perm: AclPermissionType = P.ALLOW,
        principal: str = "User:alice", host: str = "*", rtype: ResourceType = R.TOPIC,
        pattern: PatternType = T.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def ok(acls: list[AclBinding], op: AclOperation = O.READ, name: str = "orders",
       principal: str = "User:alice", host: str = "10.0.0.1",
       rtype: ResourceType = R.TOPIC, settings: AuthorizerSettings = ON) -> bool:
    return authorize(settings, AclIndex(acls), principal, host, op, rtype, name)


def test_disabled_allows_everything() -> None:
    assert ok([acl(perm=P.DENY)], settings=AuthorizerSettings())


def test_literal_allow_and_no_acl() -> None:
    assert ok([acl()])
    assert not ok([acl()], principal="User:bob")
    assert not ok([acl()], op=O.WRITE)
    assert not ok([acl()], name="other")  # no ACL at all: denied by default
    assert ok([acl()], name="other",
              settings=AuthorizerSettings(True, frozenset(), allow_everyone_if_no_acl_found=True))
    # an ACL on the resource for someone else: allow.everyone does not apply
    assert not ok([acl()], principal="User:bob",
                  settings=AuthorizerSettings(True, frozenset(), True))


def test_wildcards_principal_host_resource() -> None:
    assert ok([acl(principal="User:*")], principal="User:bob")
    assert ok([acl(name="*")], name="anything")
    assert ok([acl(host="10.0.0.1")])
    assert not ok([acl(host="10.0.0.2")])


def test_prefixed() -> None:
    rules = [acl(name="ord", pattern=T.PREFIXED)]
    assert ok(rules, name="orders")
    assert ok(rules, name="ord")
    assert not ok(rules, name="or")
    assert not ok(rules, name="xorders")


def test_deny_beats_allow() -> None:
    assert not ok([acl(op=O.ALL), acl(perm=P.DENY)])
    assert not ok([acl(), acl(name="*", perm=P.DENY, principal="User:*")])
    assert not ok([acl(), acl(name="o", pattern=T.PREFIXED, perm=P.DENY, op=O.ALL)])


def test_implied_operations() -> None:
    for op in (O.READ, O.WRITE, O.DELETE, O.ALTER):
        assert ok([acl(op=op)], op=O.DESCRIBE)
    assert ok([acl(op=O.ALTER_CONFIGS)], op=O.DESCRIBE_CONFIGS)
    assert not ok([acl(op=O.DESCRIBE)], op=O.READ)
    # a DENY of READ does not deny DESCRIBE (only ALLOWs imply)
    assert ok([acl(op=O.DESCRIBE), acl(op=O.READ, perm=P.DENY)], op=O.DESCRIBE)
    assert ok([acl(op=O.ALL)], op=O.CLUSTER_ACTION, rtype=R.TOPIC)


def test_super_users() -> None:
    s = AuthorizerSettings.from_values(STANDARD_AUTHORIZER, "User:admin; User:broker", False)
    assert s.enabled and s.super_users == {"User:admin", "User:broker"}
    assert ok([acl(principal="User:admin", perm=P.DENY, op=O.ALL)], principal="User:admin",
              op=O.WRITE, settings=s)


def test_settings_refuse_other_authorizers() -> None:
    with pytest.raises(ConfigError, match="looks like a Java class"):
        AuthorizerSettings.from_values("kafka.security.authorizer.AclAuthorizer", "", False)
    with pytest.raises(ConfigError, match="cannot be imported"):
        AuthorizerSettings.from_values("no_such_module_here:Authorizer", "", False)
    assert not AuthorizerSettings.from_values("", "", False).enabled
    assert AuthorizerSettings.from_values("skiff.StandardAuthorizer", "", False).enabled
    with pytest.raises(ConfigError, match=r"super\.users"):
        AuthorizerSettings.from_values("", "admin", False)


def test_authorize_any() -> None:
    idx = AclIndex([acl(op=O.WRITE)])
    assert authorize_any(ON, idx, "User:alice", "h", O.WRITE, R.TOPIC)
    assert not authorize_any(ON, idx, "User:bob", "h", O.WRITE, R.TOPIC)
    denied = AclIndex([acl(op=O.WRITE), acl(name="*", op=O.WRITE, perm=P.DENY)])
    assert not authorize_any(ON, denied, "User:alice", "h", O.WRITE, R.TOPIC)
    covered = AclIndex([acl(op=O.WRITE),
                        acl(name="ord", pattern=T.PREFIXED, op=O.WRITE, perm=P.DENY)])
    assert not authorize_any(ON, covered, "User:alice", "h", O.WRITE, R.TOPIC)
    assert authorize_any(ON, AclIndex([]), "User:x", "h", O.WRITE, R.TOPIC) is False
    everyone = AuthorizerSettings(True, frozenset(), allow_everyone_if_no_acl_found=True)
    assert authorize_any(everyone, AclIndex([]), "User:x", "h", O.WRITE, R.TOPIC)
    # allow.everyone applies to resources without ACLs, so some topic is writable
    assert authorize_any(everyone, AclIndex([acl(op=O.WRITE, principal="User:y")]),
                         "User:x", "h", O.WRITE, R.TOPIC)
    assert authorize_any(ON, AclIndex([acl(name="*", op=O.WRITE, principal="User:*")]),
                         "User:x", "h", O.WRITE, R.TOPIC)


def test_authorized_operations_bitfield() -> None:
    bits = authorized_operations(ON, AclIndex([acl(op=O.READ)]), "User:alice", "h",
                                 R.TOPIC, "orders")
    assert bits == (1 << O.READ) | (1 << O.DESCRIBE)


def test_filters() -> None:
    lit = acl()
    pre = acl(name="ord", pattern=T.PREFIXED)
    star = acl(name="*")
    other = acl(name="payments")
    everything = [lit, pre, star, other]
    match = AclFilter(R.TOPIC, "orders", T.MATCH)
    assert [b for b in everything if match.matches(b)] == [lit, pre, star]
    assert [b for b in everything if AclFilter(R.TOPIC, "ord", T.ANY).matches(b)] == [pre]
    assert [b for b in everything if AclFilter(R.TOPIC, "orders", T.LITERAL).matches(b)] == [lit]
    assert all(AclFilter().matches(b) for b in everything)
    assert not AclFilter(principal="User:bob").matches(lit)
    assert not AclFilter(permission=P.DENY).matches(lit)
    assert AclFilter(pattern_type=T.UNKNOWN).unknown_part() == "patternFilter"
    assert AclFilter(operation=O.UNKNOWN).unknown_part() == "entryFilter"
    assert AclFilter().unknown_part() is None


def test_validate_new_acl() -> None:
    assert validate_new_acl(acl()) is None
    assert "resourceType" in (validate_new_acl(acl(rtype=R.ANY)) or "")
    assert "patternType" in (validate_new_acl(acl(pattern=T.MATCH)) or "")
    assert "operation" in (validate_new_acl(acl(op=O.ANY)) or "")
    assert "permissionType" in (validate_new_acl(acl(perm=P.ANY)) or "")
    assert "empty" in (validate_new_acl(acl(name="")) or "")
    assert "kafka-cluster" in (validate_new_acl(acl(rtype=R.CLUSTER, name="c")) or "")
    assert "principal" in (validate_new_acl(acl(principal="alice")) or "")
    assert validate_new_acl(acl(rtype=R.CLUSTER, name="kafka-cluster")) is None


# -- properties ---------------------------------------------------------------------------

names = st.text(alphabet="abc*", min_size=1, max_size=4)
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from([O.ALL, O.READ, O.WRITE, O.DESCRIBE, O.ALTER, O.ALTER_CONFIGS])
bindings = st.builds(AclBinding, st.just(R.TOPIC), names,
                     st.sampled_from([T.LITERAL, T.PREFIXED]), principals, hosts, ops,
                     st.sampled_from([P.ALLOW, P.DENY]))
asked_ops = st.sampled_from([O.READ, O.WRITE, O.DESCRIBE, O.DESCRIBE_CONFIGS, O.ALTER])
asked_names = st.text(alphabet="abc", min_size=1, max_size=5)
asked_principals = st.sampled_from(["User:alice", "User:bob"])
asked_hosts = st.sampled_from(["10.0.0.1", "10.0.0.2"])


def _applies(b: AclBinding, principal: str, host: str, op: AclOperation, name: str) -> bool:
    """A reference reading of the rules, one ACL at a time."""
    if b.pattern_type is T.LITERAL:
        on = b.resource_name in (name, "*")
    else:
        on = name.startswith(b.resource_name)
    implied = {O.DESCRIBE: {O.READ, O.WRITE, O.DELETE, O.ALTER},
               O.DESCRIBE_CONFIGS: {O.ALTER_CONFIGS}}.get(op, set())
    op_ok = b.operation in (O.ALL, op) or (b.permission is P.ALLOW and b.operation in implied)
    return (on and b.principal in (principal, "User:*") and b.host in ("*", host) and op_ok)


@given(st.lists(bindings, max_size=8), asked_principals, asked_hosts, asked_ops, asked_names)
def test_property_matches_the_reference(acls: list[AclBinding], principal: str, host: str,
                                        op: AclOperation, name: str) -> None:
    got = authorize(ON, AclIndex(acls), principal, host, op, R.TOPIC, name)
    applying = [b for b in acls if _applies(b, principal, host, op, name)]
    expected = (not any(b.permission is P.DENY for b in applying)
                and any(b.permission is P.ALLOW for b in applying))
    assert got == expected


@given(st.lists(bindings, max_size=8), asked_principals, asked_hosts, asked_ops, asked_names)
def test_property_deny_wins(acls: list[AclBinding], principal: str, host: str,
                            op: AclOperation, name: str) -> None:
    """Adding a DENY that applies never leaves the request allowed, whatever else is there."""
    deny = AclBinding(R.TOPIC, name, T.LITERAL, principal, host, op, P.DENY)
    assert not authorize(ON, AclIndex([*acls, deny]), principal, host, op, R.TOPIC, name)


@given(asked_names, asked_names, asked_principals)
def test_property_prefix_matching(prefix: str, name: str, principal: str) -> None:
    rule = AclBinding(R.TOPIC, prefix, T.PREFIXED, principal, "*", O.READ, P.ALLOW)
    got = authorize(ON, AclIndex([rule]), principal, "h", O.READ, R.TOPIC, name)
    assert got == name.startswith(prefix)
    # the MATCH filter names the same ACLs the decision used
    assert AclFilter(R.TOPIC, name, T.MATCH).matches(rule) == name.startswith(prefix)


def test_cidr_hosts_match_the_client_address() -> None:
    """KIP-1276: IPv4 and IPv6 blocks, ends included, the other family never."""
    allow = [acl(host="10.0.0.0/8"), acl(host="2001:db8::/32", name="v6")]
    assert ok(allow, host="10.255.255.255") and ok(allow, host="10.0.0.0")
    assert not ok(allow, host="11.0.0.1") and not ok(allow, host="::ffff:10.0.0.1")
    assert ok(allow, name="v6", host="2001:db8:1::7")
    assert not ok(allow, name="v6", host="2001:db9::1") and not ok(allow, name="v6",
                                                                    host="10.0.0.1")
    # a DENY block wins over an ALLOW of everyone
    deny = [acl(host="*"), acl(host="192.168.0.0/16", perm=P.DENY)]
    assert ok(deny, host="10.0.0.1") and not ok(deny, host="192.168.3.4")
    # a host that is not an address (never for a TCP client) matches no block
    assert not ok(allow, host="localhost")
