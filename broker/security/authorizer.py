"""Authorization: Kafka's StandardAuthorizer semantics, pure.

Every decision is `authorize(settings, index, principal, host, operation, type, name)`:

  1. authorization off (`authorizer.class.name` empty)          -> allowed
  2. the principal is in `super.users`                          -> allowed
  3. ACLs on the resource: a LITERAL ACL with the resource's name, a LITERAL `*` ACL,
     a PREFIXED ACL whose name starts the resource's name. Of those, the ones for this
     principal or `User:*`, this host or `*`, and this operation:
       any DENY (operation equal, or ALL)                       -> denied
       else any ALLOW (operation equal, ALL, or one implying it) -> allowed
  4. no ACL at all on the resource (whoever it names)           -> allow.everyone.if.no.acl.found
  5. otherwise                                                  -> denied

A host is `*`, one address, or (KIP-1276, metadata.version 4.4-IV1 and later) an IPv4 or
IPv6 CIDR block such as `10.0.0.0/8` or `2001:db8::/32` that matches every client address
inside it, as Kafka's CidrUtils (Apache Commons Net's SubnetUtils/SubnetUtils6) does.

Implied operations (ALLOW only, as Kafka): DESCRIBE by READ, WRITE, DELETE and ALTER;
DESCRIBE_CONFIGS by ALTER_CONFIGS. A DENY of READ does not deny DESCRIBE.

`AclFilter` is Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): ANY matches every
value; a MATCH pattern filter matches the ACLs that would apply to the named resource.

The codes (ResourceType, PatternType, AclOperation, AclPermissionType) are Kafka's, as
the wire and the metadata log (AccessControlEntryRecord) carry them.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from broker.config.types import ConfigError


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SKIFF_AUTHORIZER = "skiff.StandardAuthorizer"
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, SKIFF_AUTHORIZER)

_O = AclOperation
# An ALLOW of the key also allows these (Kafka's AclEntry implied operations).
_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.ALTER_CONFIGS}),
}

# The operations each resource type supports (Kafka's AclEntry.supportedOperations):
# what "authorized operations" fields report, as a bitfield of 1 << code.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                         _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    # DESCRIBE_CONFIGS/ALTER_CONFIGS: a group's configs (GROUP config resources, Kafka 4)
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                           _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's AclBinding; AccessControlEntryRecord without its id)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"({self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}, "
                f"{self.principal} {self.permission.name} {self.operation.name} "
                f"from {self.host})")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None for a name, principal or host matches any."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def unknown_part(self) -> str | None:
        """'patternFilter'/'entryFilter' when a part carries an UNKNOWN code (Kafka then
        refuses the filter), else None."""
        if self.resource_type is ResourceType.UNKNOWN or \
                self.pattern_type is PatternType.UNKNOWN:
            return "patternFilter"
        if self.operation is AclOperation.UNKNOWN or \
                self.permission is AclPermissionType.UNKNOWN:
            return "entryFilter"
        return None

    def matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        p = self.pattern_type
        if p not in (PatternType.ANY, PatternType.MATCH) and p != b.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if p is PatternType.ANY or p == b.pattern_type:
            return self.resource_name == b.resource_name
        if b.pattern_type is PatternType.LITERAL:  # p is MATCH
            return b.resource_name in (self.resource_name, WILDCARD)
        return self.resource_name.startswith(b.resource_name)

    def matches_entry(self, b: AclBinding) -> bool:
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation is AclOperation.ANY or self.operation == b.operation)
                and (self.permission is AclPermissionType.ANY
                     or self.permission == b.permission))

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b) and self.matches_entry(b)


def validate_new_acl(b: AclBinding) -> str | None:
    """Why Kafka refuses to create this ACL (INVALID_REQUEST), or None."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return f"Invalid permissionType {b.permission.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type is ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{b.principal}` (no colon is present " \
               "separating the principal type from the principal name)"
    if not b.host:
        return "Host pattern cannot be null or empty"
    return None


# -- host patterns (KIP-1276) ------------------------------------------------------------

_IPV4_CIDR = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})")


def is_cidr(host: str) -> bool:
    """Kafka's test: a host pattern with a `/` is a CIDR block."""
    return "/" in host


def cidr_problem(host: str) -> str | None:
    """Why `host` is not a CIDR block Kafka accepts (SubnetUtils / SubnetUtils6's wording),
    None when it is one."""
    if ":" not in host:  # SubnetUtils: a strict dotted quad and a one- or two-digit prefix
        m = _IPV4_CIDR.fullmatch(host)
        if m is None:
            return f"Could not parse [{host}]"
        for part in m.groups()[:4]:
            if not 0 <= int(part) <= 255:
                return f"Value [{int(part)}] not in range [0,255]"
        if not 0 <= int(m.group(5)) <= 32:
            return f"Value [{int(m.group(5))}] not in range [0,32]"
        return None
    # SubnetUtils6, as Kafka 4.4 words it (checked against it with kafka-acls)
    address, _, prefix = host.partition("/")
    try:
        length = int(prefix)
    except ValueError:
        return f"Could not parse [{host}] - invalid prefix length"
    if not 0 <= length <= 128:
        return f"Could not parse [{host}] - prefix length must be between 0 and 128"
    try:
        parsed = ipaddress.IPv6Address(address)
    except ValueError:
        return f"Could not parse [{address}]"
    if parsed.ipv4_mapped is not None:  # Java's InetAddress reads it as IPv4
        return f"Could not parse [{address}] - not an IPv6 address"
    return None


@functools.lru_cache(maxsize=4096)
def _network(acl_host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if cidr_problem(acl_host) is not None:
        return None
    address, _, prefix = acl_host.partition("/")
    return ipaddress.ip_network(f"{address.split('%', 1)[0]}/{int(prefix)}", strict=False)


@functools.lru_cache(maxsize=4096)
def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def cidr_contains(acl_host: str, host: str) -> bool:
    """Kafka's CidrUtils.isInRange: the client address inside the block (network and
    broadcast addresses included); an address of the other family never is."""
    net = _network(acl_host)
    addr = _address(host)
    return net is not None and addr is not None and addr.version == net.version \
        and addr in net


# -- settings -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    # A Python authorizer (broker/security/plugins.py AuthorizerAdapter) that decides
    # instead of the ACLs; None for the StandardAuthorizer.
    plugin: Any = field(default=None, compare=False)

    @staticmethod
    def from_values(class_name: str | None, super_users: str | None,
                    allow_everyone: bool,
                    configs: Mapping[str, str] | None = None) -> AuthorizerSettings:
        """`authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
        `authorizer.class.name` is empty (no authorization), Kafka's StandardAuthorizer, or a
        Python class (`module:Class`, broker/security/plugins.py); one that cannot be
        imported is refused (ConfigError), never ignored. With `configs` (the node's
        settings) a plugin is made and configured."""
        name = (class_name or "").strip()
        plugin = None
        if name and name not in AUTHORIZER_CLASSES:
            from broker.security import plugins

            if configs is None:
                plugins.authorizer_class(name)
            else:
                plugin = plugins.authorizer_adapter(name, configs)
        users = frozenset(u.strip() for u in (super_users or "").split(";") if u.strip())
        for u in users:
            kind, sep, rest = u.partition(":")
            if not sep or not kind or not rest:
                raise ConfigError("super.users", super_users or "",
                                  f"principals as Type:name separated by ';' ({u!r} is not)")
        return AuthorizerSettings(bool(name), users, bool(allow_everyone), plugin)

    @staticmethod
    def from_config(cfg: Mapping[str, object] | object) -> AuthorizerSettings:
        get = getattr(cfg, "get", None)
        if get is None:
            return AuthorizerSettings()
        originals = getattr(cfg, "originals", None)
        return AuthorizerSettings.from_values(
            get("authorizer.class.name"), get("super.users"),
            bool(get("allow.everyone.if.no.acl.found") or False),
            originals if isinstance(originals, Mapping) else {})


# -- the index ----------------------------------------------------------------------------


class AclIndex:
    """The ACLs by resource type, literal name and prefix, for fast decisions."""

    __slots__ = ("_by_type", "_literal", "_prefix_lengths", "_prefixed", "count")

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self.count = 0
        lengths: dict[ResourceType, set[int]] = {}
        for b in bindings:
            self.count += 1
            self._by_type.setdefault(b.resource_type, []).append(b)
            key = (b.resource_type, b.resource_name)
            if b.pattern_type is PatternType.PREFIXED:
                self._prefixed.setdefault(key, []).append(b)
                lengths.setdefault(b.resource_type, set()).add(len(b.resource_name))
            elif b.pattern_type is PatternType.LITERAL:
                self._literal.setdefault(key, []).append(b)
        self._prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}

    def on_resource(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL that applies to the resource, whoever it names."""
        out = list(self._literal.get((rtype, name), ()))
        if name != WILDCARD:
            out.extend(self._literal.get((rtype, WILDCARD), ()))
        for n in self._prefix_lengths.get(rtype, ()):
            if n > len(name):
                break
            out.extend(self._prefixed.get((rtype, name[:n]), ()))
        return out

    def of_type(self, rtype: ResourceType) -> list[AclBinding]:
        return self._by_type.get(rtype, [])


EMPTY_INDEX = AclIndex(())


def _principal_matches(acl_principal: str, principal: str) -> bool:
    return acl_principal in (principal, WILDCARD_PRINCIPAL)


def _host_matches(acl_host: str, host: str) -> bool:
    return acl_host in (WILDCARD, host) or (is_cidr(acl_host) and cidr_contains(acl_host, host))


def _op_matches(b: AclBinding, op: AclOperation) -> bool:
    if b.operation is AclOperation.ALL or b.operation == op:
        return True
    return b.permission is AclPermissionType.ALLOW and b.operation in _IMPLIES.get(op, ())


def authorize(settings: AuthorizerSettings, index: AclIndex, principal: str, host: str,
              op: AclOperation, rtype: ResourceType, name: str) -> bool:
    if settings.plugin is not None:
        standard = replace(settings, plugin=None)
        return bool(settings.plugin.authorize(
            principal, host, op, rtype, name,
            lambda o, t, n: authorize(standard, index, principal, host, o, t, n),
            lambda o, t: authorize_any(standard, index, principal, host, o, t)))
    if not settings.enabled or principal in settings.super_users:
        return True
    acls = index.on_resource(rtype, name)
    if not acls:
        return settings.allow_everyone_if_no_acl_found
    allowed = False
    for b in acls:
        if not (_principal_matches(b.principal, principal) and _host_matches(b.host, host)
                and _op_matches(b, op)):
            continue
        if b.permission is AclPermissionType.DENY:
            return False
        if b.permission is AclPermissionType.ALLOW:
            allowed = True
    return allowed


def authorize_any(settings: AuthorizerSettings, index: AclIndex, principal: str, host: str,
                  op: AclOperation, rtype: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: may the principal do `op` on at least one resource
    of the type? True when an ALLOW (literal or prefixed) is not wholly covered by a DENY
    (a literal `*`, a literal of the same name, or a prefix of it)."""
    if settings.plugin is not None:
        standard = replace(settings, plugin=None)
        return bool(settings.plugin.authorize_any(
            principal, host, op, rtype,
            lambda o, t, n: authorize(standard, index, principal, host, o, t, n),
            lambda o, t: authorize_any(standard, index, principal, host, o, t)))
    if not settings.enabled or principal in settings.super_users:
        return True
    # As Kafka: first whether some resource nobody named would be allowed (wildcard ACLs,
    # allow.everyone.if.no.acl.found), then the ALLOWs not wholly covered by a DENY.
    if authorize(settings, index, principal, host, op, rtype, "hardcode"):
        return True
    acls = index.of_type(rtype)

    def applies(b: AclBinding) -> bool:
        return (_principal_matches(b.principal, principal) and _host_matches(b.host, host)
                and _op_matches(b, op))

    denies = [b for b in acls if b.permission is AclPermissionType.DENY and applies(b)]
    if any(d.pattern_type is PatternType.LITERAL and d.resource_name == WILDCARD
           for d in denies):
        return False
    deny_literal = {d.resource_name for d in denies if d.pattern_type is PatternType.LITERAL}
    deny_prefixes = [d.resource_name for d in denies if d.pattern_type is PatternType.PREFIXED]
    for b in acls:
        if b.permission is not AclPermissionType.ALLOW or not applies(b):
            continue
        if b.pattern_type is PatternType.LITERAL and b.resource_name in deny_literal:
            continue
        if any(b.resource_name.startswith(p) for p in deny_prefixes):
            continue
        return True
    return False


def authorized_operations(settings: AuthorizerSettings, index: AclIndex, principal: str,
                          host: str, rtype: ResourceType, name: str) -> int:
    """The bitfield (1 << AclOperation code) of the supported operations the principal
    may do on the resource, as Metadata, DescribeGroups and DescribeCluster report it."""
    out = 0
    for op in SUPPORTED_OPERATIONS.get(rtype, ()):
        if authorize(settings, index, principal, host, op, rtype, name):
            out |= 1 << int(op)
    return out
