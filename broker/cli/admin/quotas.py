"""`skiff quotas describe|alter`: client quotas, as `kafka-configs.sh --entity-type
users/clients/ips` does them (--add-config producer_byte_rate=..., --delete-config ...)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from broker.cli.admin.common import (
    EXIT_OK,
    Client,
    UsageError,
    _kv,
    print_json,
    print_table,
    to_json,
)

# (option stem, entity type)
_TYPES = (("user", "user"), ("client", "client-id"), ("ip", "ip"))


def add_entity_options(p: argparse.ArgumentParser) -> None:
    # kafka-configs.sh's shorthand options
    p.add_argument("--user", help="a user (principal name)")
    p.add_argument("--user-defaults", dest="user_default", action="store_true",
                   help="the default user")
    p.add_argument("--client", help="a client id")
    p.add_argument("--client-defaults", dest="client_default", action="store_true",
                   help="the default client id")
    p.add_argument("--ip", help="an IP address (connection_creation_rate only)")
    p.add_argument("--ip-defaults", dest="ip_default", action="store_true",
                   help="the default IP")


def _chosen(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) for each type named on the command line."""
    out: list[tuple[str, str | None]] = []
    for stem, etype in _TYPES:
        name, default = getattr(args, stem), getattr(args, f"{stem}_default")
        if name is not None and default:
            raise UsageError(f"give --{stem} or --{stem}-defaults, not both")
        if name is not None or default:
            out.append((etype, name))
    return out


def _entity_text(parts: Any) -> str:
    return ", ".join(
        f"{p.entity_type}={p.entity_name if p.HasField('entity_name') else '<default>'}"
        for p in parts)


def cmd_quotas_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    q = c.pb.quotas
    req = q.DescribeQuotasRequest(strict=args.strict)
    for etype, name in _chosen(args):
        if name is None:
            req.components.append(q.QuotaFilterComponent(entity_type=etype,
                                                          match_type=q.MATCH_TYPE_DEFAULT))
        else:
            req.components.append(q.QuotaFilterComponent(
                entity_type=etype, match_type=q.MATCH_TYPE_EXACT, match=name))
    resp = c.call(c.quotas.DescribeQuotas, req)
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    rows = [[_entity_text(e.entity), ",".join(f"{k}={_number(v)}"
                                              for k, v in sorted(e.values.items()))]
            for e in resp.entries]
    print_table(["ENTITY", "QUOTAS"], rows, out)
    return EXIT_OK


def _number(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def cmd_quotas_alter(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    q = c.pb.quotas
    entity = _chosen(args)
    if not entity:
        raise UsageError("name the entity: --user/--user-defaults, --client/--client-defaults "
                         "or --ip/--ip-defaults")
    adds = _kv([x for item in args.add_config or () for x in item.split(",") if x],
               "quota")
    deletes = [k for item in args.delete_config or () for k in item.split(",") if k]
    if not adds and not deletes:
        raise UsageError("give --add-config KEY=VALUE and/or --delete-config KEY")
    ops = []
    for key, text in adds.items():
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"quota {key}: {text!r} is not a number") from None
        ops.append(q.QuotaOp(key=key, value=value))
    ops.extend(q.QuotaOp(key=key) for key in deletes)
    parts = [q.QuotaEntityPart(entity_type=t, **({} if n is None else {"entity_name": n}))
             for t, n in entity]
    c.call(c.quotas.AlterQuotas, q.AlterQuotasRequest(
        validate_only=args.validate_only, alterations=[q.QuotaAlteration(entity=parts, ops=ops)]))
    text = _entity_text(parts)
    if args.output == "json":
        print_json({"entity": [to_json(p) for p in parts], "add": adds, "delete": deletes,
                    "validate_only": args.validate_only}, out)
    else:
        verb = "Validated" if args.validate_only else "Updated"
        out.write(f"{verb} quotas of {text}.\n")
    return EXIT_OK
