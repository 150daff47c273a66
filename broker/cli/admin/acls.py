"""`skiff acls list|add|remove`, as kafka-acls.sh: principals, hosts, operations and one
resource (--topic, --group, --cluster, --transactional-id) with --resource-pattern-type.

    skiff acls add --allow-principal User:alice --operation Read --topic orders
    skiff acls add --allow-principal User:alice --consumer --topic orders --group app \\
        --resource-pattern-type prefixed
    skiff acls list --topic orders --resource-pattern-type match
    skiff acls remove --allow-principal User:alice --operation Read --topic orders

`add` makes one ACL per (principal, host, operation) and resource, ALLOW for
--allow-principal and DENY for --deny-principal (hosts: --allow-host / --deny-host, `*` when
none is given). --producer grants WRITE, DESCRIBE and CREATE on the topics (IDEMPOTENT_WRITE
on the cluster with --idempotent); --consumer READ and DESCRIBE on the topics and READ on
the group. `list` with no resource lists every ACL; `remove` deletes every ACL matching the
given resource, principals (`--principal`: ALLOW or DENY), hosts and operations (all of the
resource's ACLs when only the resource is given).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from broker.cli.admin.common import EXIT_OK, Client, UsageError, print_json, print_table, to_json
from broker.security.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

OPERATIONS = [o.name.lower().replace("_", "-") for o in AclOperation
              if o not in (AclOperation.UNKNOWN, AclOperation.ANY)]
PATTERN_TYPES = ["literal", "prefixed", "match", "any"]


def add_arguments(p: argparse.ArgumentParser, *, adding: bool) -> None:
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true", help="the kafka-cluster resource")
    p.add_argument("--resource-pattern-type", default=None,
                   choices=PATTERN_TYPES[:2] if adding else PATTERN_TYPES,
                   help="default literal (list with no resource: any)")
    p.add_argument("--allow-principal", action="append", default=[], metavar="Type:name")
    p.add_argument("--deny-principal", action="append", default=[], metavar="Type:name")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[],
                   type=lambda s: s.lower().replace("_", "-"), choices=OPERATIONS)
    if not adding:
        p.add_argument("--principal", action="append", default=[], metavar="Type:name",
                       help="ACLs of this principal, ALLOW or DENY")
    if adding:
        p.add_argument("--producer", action="store_true",
                       help="WRITE, DESCRIBE, CREATE on the topics")
        p.add_argument("--consumer", action="store_true",
                       help="READ, DESCRIBE on the topics, READ on the groups")
        p.add_argument("--idempotent", action="store_true",
                       help="with --producer: IDEMPOTENT_WRITE on the cluster")


def _op(name: str) -> AclOperation:
    return AclOperation[name.upper().replace("-", "_")]


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _pattern(args: argparse.Namespace, default: PatternType) -> PatternType:
    chosen = args.resource_pattern_type
    return default if chosen is None else PatternType[chosen.upper()]


def _principals(args: argparse.Namespace) -> list[tuple[str, AclPermissionType, list[str]]]:
    out = [(p, AclPermissionType.ALLOW, args.allow_host or ["*"]) for p in args.allow_principal]
    out += [(p, AclPermissionType.DENY, args.deny_host or ["*"]) for p in args.deny_principal]
    return out


def _entry(c: Client, rtype: ResourceType, name: str, pattern: PatternType, principal: str,
           host: str, op: AclOperation, permission: AclPermissionType) -> Any:
    return c.pb.meta.AccessControlEntry(
        resource_type=int(rtype), resource_name=name, pattern_type=int(pattern),
        principal=principal, host=host, operation=int(op), permission_type=int(permission))


def _show(resp_acls: Any, args: argparse.Namespace, out: TextIO, verb: str) -> None:
    if args.output == "json":
        print_json([to_json(a) for a in resp_acls], out)
        return
    rows = [[ResourceType(a.resource_type).name, a.resource_name,
             PatternType(a.pattern_type).name, a.principal, a.host,
             AclOperation(a.operation).name, AclPermissionType(a.permission_type).name]
            for a in resp_acls]
    if verb:
        out.write(f"{verb} {len(rows)} ACL(s).\n")
    if rows:
        print_table(["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION",
                     "PERMISSION"], rows, out)


def cmd_acls_add(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resources = _resources(args)
    principals = _principals(args)
    if not resources:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not principals:
        raise UsageError("name at least one --allow-principal or --deny-principal")
    pattern = _pattern(args, PatternType.LITERAL)
    per_type: dict[ResourceType, list[AclOperation]] = {}
    if args.producer:
        per_type[ResourceType.TOPIC] = [AclOperation.WRITE, AclOperation.DESCRIBE,
                                        AclOperation.CREATE]
        if args.idempotent:
            resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
            per_type[ResourceType.CLUSTER] = [AclOperation.IDEMPOTENT_WRITE]
    if args.consumer:
        per_type.setdefault(ResourceType.TOPIC, []).extend(
            [AclOperation.READ, AclOperation.DESCRIBE])
        per_type[ResourceType.GROUP] = [AclOperation.READ]
    explicit = [_op(o) for o in args.operation]
    if not explicit and not per_type:
        raise UsageError("name --operation (or use --producer / --consumer)")
    entries = []
    for rtype, name in resources:
        ops = explicit or per_type.get(rtype, [])
        rpattern = PatternType.LITERAL if rtype is ResourceType.CLUSTER else pattern
        for principal, permission, hosts in principals:
            for host in hosts:
                for op in dict.fromkeys(ops):
                    entries.append(_entry(c, rtype, name, rpattern, principal, host, op,
                                          permission))
    if not entries:
        raise UsageError("no ACL to add for these resources (--producer needs --topic, "
                         "--consumer needs --topic and --group)")
    c.call(c.acls.CreateAcls, c.pb.acls.CreateAclsRequest(acls=entries))
    _show(entries, args, out, "Added")
    return EXIT_OK


def _filters(c: Client, args: argparse.Namespace, default: PatternType) -> list[Any]:
    base: list[dict[str, Any]] = [{}]
    resources = _resources(args)
    if resources:
        base = [{"resource_type": int(t), "resource_name": n,
                 "pattern_type": int(PatternType.LITERAL if t is ResourceType.CLUSTER
                                     else _pattern(args, default))}
                for t, n in resources]
    elif args.resource_pattern_type is not None:
        base = [{"pattern_type": int(_pattern(args, default))}]
    who: list[dict[str, Any]] = [{}]
    if args.principal or args.allow_principal or args.deny_principal:
        # hosts narrow the filter only when given; else any host matches
        who = [{"principal": p} for p in args.principal]
        for principal, perm, _hosts in _principals(args):
            given = args.allow_host if perm is AclPermissionType.ALLOW else args.deny_host
            who.extend({"principal": principal, "permission_type": int(perm),
                        **({"host": h} if h is not None else {})}
                       for h in (given or [None]))
    ops: list[dict[str, Any]] = [{"operation": int(_op(o))} for o in args.operation] or [{}]
    return [c.pb.acls.AclFilter(**{"resource_type": int(ResourceType.ANY),
                                   "pattern_type": int(PatternType.ANY),
                                   "operation": int(AclOperation.ANY),
                                   "permission_type": int(AclPermissionType.ANY),
                                   **b, **w, **o})
            for b in base for w in who for o in ops]


def cmd_acls_list(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    seen: dict[bytes, Any] = {}
    for f in _filters(c, args, PatternType.LITERAL):
        for a in c.call(c.acls.DescribeAcls, c.pb.acls.DescribeAclsRequest(filter=f)).acls:
            seen.setdefault(bytes(a.id), a)
    _show(list(seen.values()), args, out, "")
    return EXIT_OK


def cmd_acls_remove(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    if not _resources(args) and not (args.principal or args.allow_principal
                                     or args.deny_principal):
        raise UsageError("name a resource or a principal: removing every ACL needs "
                         "--resource-pattern-type any with --topic/--group/... ")
    resp = c.call(c.acls.DeleteAcls,
                  c.pb.acls.DeleteAclsRequest(filters=_filters(c, args, PatternType.LITERAL)))
    _show(resp.deleted, args, out, "Removed")
    return EXIT_OK
