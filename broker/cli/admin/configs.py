"""`skiff configs get|set|delete`."""

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

# ---- configs ---------------------------------------------------------------------------


def _resource(c: Client, args: argparse.Namespace) -> Any:
    cfg = c.pb.configs
    chosen = [x is not None and x is not False
              for x in (args.topic, args.broker, args.broker_defaults)]
    if sum(chosen) != 1:
        raise UsageError("choose one of --topic NAME, --broker ID, --broker-defaults")
    if args.topic is not None:
        return cfg.ConfigResource(type=cfg.RESOURCE_TYPE_TOPIC, name=args.topic)
    if args.broker is not None:
        return cfg.ConfigResource(type=cfg.RESOURCE_TYPE_BROKER, name=str(args.broker))
    return cfg.ConfigResource(type=cfg.RESOURCE_TYPE_BROKER, name="")


def cmd_configs_get(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    cfg = c.pb.configs
    names = [n for item in args.names or () for n in item.split(",") if n]
    resp = c.call(c.configs.DescribeConfigs, cfg.DescribeConfigsRequest(
        resource=_resource(c, args), names=names, include_synonyms=args.synonyms,
        dynamic_only=args.dynamic))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    src = {v: k.removeprefix("CONFIG_SOURCE_") for k, v in cfg.ConfigSource.items()}
    headers = ["NAME", "VALUE", "SOURCE", "READ-ONLY"] + (["SYNONYMS"] if args.synonyms else [])
    rows = []
    for e in resp.entries:
        value = e.value if e.HasField("value") else ("(sensitive)" if e.sensitive else "null")
        row = [e.name, value, src[e.source], "yes" if e.read_only else "no"]
        if args.synonyms:
            row.append(" ".join(f"{src[s.source]}:{s.name}="
                                f"{s.value if s.HasField('value') else 'null'}"
                                for s in e.synonyms) or "-")
        rows.append(row)
    print_table(headers, rows, out)
    return EXIT_OK


def _alter(c: Client, args: argparse.Namespace, out: TextIO,
           changes: dict[str, str | None]) -> int:
    res = _resource(c, args)
    req = c.pb.configs.AlterConfigsRequest(validate_only=args.validate_only)
    for name, value in changes.items():
        change = c.pb.meta.Config(resource_type=res.type, resource_name=res.name, name=name)
        if value is not None:
            change.value = value
        req.changes.append(change)
    c.call(c.configs.AlterConfigs, req)
    what = f"topic {res.name}" if res.type == c.pb.configs.RESOURCE_TYPE_TOPIC else (
        f"broker {res.name}" if res.name else "the cluster-wide broker default")
    if args.output == "json":
        print_json({"resource": to_json(res), "changes": changes,
                    "validate_only": args.validate_only}, out)
    else:
        verb = "Validated" if args.validate_only else "Updated"
        out.write(f"{verb} {len(changes)} config(s) of {what}.\n")
    return EXIT_OK


def cmd_configs_set(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    changes: dict[str, str | None] = dict(_kv(args.pairs, "config"))
    return _alter(c, args, out, changes)


def cmd_configs_delete(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    return _alter(c, args, out, dict.fromkeys(args.keys))
