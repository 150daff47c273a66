"""`skiff groups list|describe|reset-offsets|delete`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from broker.cli.admin.common import (
    EXIT_OK,
    Client,
    UsageError,
    _ints,
    print_json,
    print_table,
    to_json,
)

# ---- groups ----------------------------------------------------------------------------


def cmd_groups_list(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.groups.ListGroups, c.pb.groups.ListGroupsRequest(states=args.state or []))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["GROUP", "STATE", "TYPE", "PROTOCOL TYPE"],
                    ([g.group_id, g.state, g.type, g.protocol_type] for g in resp.groups), out)
    return EXIT_OK


def cmd_groups_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.groups.DescribeGroup, c.pb.groups.DescribeGroupRequest(group_id=group_of(args)))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"Group: {resp.group_id}\tType: {resp.type or '-'}\tState: {resp.state}\t"
              f"Coordinator: {resp.coordinator_id}\tAssignor: {resp.protocol or '-'}\n")
    if resp.type == "share":
        # kafka-share-groups --describe: a share group has a start offset per partition
        # (the first record whose delivery is not complete), shared by its members
        print_table(["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"],
                    ([o.topic, o.partition, _known(o.committed_offset),
                      _known(o.log_end_offset), _known(o.lag)] for o in resp.offsets), out)
        if resp.members:
            out.write("\n")
            print_table(["MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                        ([m.member_id, m.client_id, m.host,
                          ",".join(f"{a.topic}:{a.partition}" for a in m.assignment) or "-"]
                         for m in resp.members), out)
        return EXIT_OK
    # kafka-consumer-groups prints "-" for an offset that is not committed (or not known)
    # and for the lag it leaves undefined
    print_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER"],
                ([o.topic, o.partition, _known(o.committed_offset), _known(o.log_end_offset),
                  _known(o.lag), o.member_id or "-"] for o in resp.offsets), out)
    return EXIT_OK


def _known(value: int) -> int | str:
    return value if value >= 0 else "-"


def group_of(args: argparse.Namespace) -> str:
    """The group, given as the positional argument or as --group (Kafka's flag): one of
    them, once."""
    positional, flag = getattr(args, "group", None), getattr(args, "group_flag", None)
    if positional and flag and positional != flag:
        raise UsageError(f"two groups given: {positional!r} and --group {flag!r}")
    group = positional or flag
    if not group:
        raise UsageError("name the group: GROUP or --group GROUP")
    return str(group)


def _topic_partitions(specs: Sequence[str] | None, pb: Any) -> tuple[list[str], list[Any]]:
    """`--topic t` (all partitions) or `--topic t:0,1`."""
    topics, parts = [], []
    for spec in specs or ():
        name, sep, rest = spec.partition(":")
        if not sep:
            topics.append(name)
        else:
            parts += [pb.TopicPartition(topic=name, partition=p)
                      for p in _ints(rest, "--topic")]
    return topics, parts


def cmd_groups_reset(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    g = c.pb.groups
    group = group_of(args)
    topics, parts = _topic_partitions(args.topic, c.pb.partitions)
    if not topics and not parts:
        raise UsageError("name the topics to reset: --topic T or --topic T:0,1")
    strategy, value = g.RESET_STRATEGY_UNSPECIFIED, 0
    if args.to_earliest:
        strategy = g.RESET_STRATEGY_EARLIEST
    elif args.to_latest:
        strategy = g.RESET_STRATEGY_LATEST
    elif args.to_offset is not None:
        strategy, value = g.RESET_STRATEGY_OFFSET, args.to_offset
    elif args.shift_by is not None:
        strategy, value = g.RESET_STRATEGY_SHIFT, args.shift_by
    elif args.to_datetime is not None:
        try:
            when = datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise UsageError(f"--to-datetime {args.to_datetime!r}: expected ISO 8601, "
                             "e.g. 2026-11-22T04:00:00+00:00") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        strategy, value = g.RESET_STRATEGY_TIMESTAMP, int(when.timestamp() * 1000)
    else:
        raise UsageError("choose --to-earliest, --to-latest, --to-offset, --shift-by or "
                         "--to-datetime")
    resp = c.call(c.groups.ResetOffsets, g.ResetOffsetsRequest(
        group_id=group, topics=topics, partitions=parts, strategy=strategy, value=value,
        dry_run=not args.execute))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["TOPIC", "PARTITION", "NEW-OFFSET"],
                    ([o.topic, o.partition, o.committed_offset] for o in resp.offsets), out)
        if not resp.applied:
            out.write("(dry run: nothing changed; add --execute to apply)\n")
    return EXIT_OK


def cmd_groups_delete(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    g = c.pb.groups
    group = group_of(args)
    if args.topic:
        topics, parts = _topic_partitions(args.topic, c.pb.partitions)
        c.call(c.groups.DeleteOffsets, g.DeleteOffsetsRequest(group_id=group, topics=topics,
                                                              partitions=parts))
        named = [f"topic {t}" for t in topics] + [f"{p.topic}-{p.partition}" for p in parts]
        message = f"Deleted offsets of {', '.join(named)} in group {group}."
    else:
        c.call(c.groups.DeleteGroup, g.DeleteGroupRequest(group_id=group))
        message = f"Deleted group {group}."
    if args.output == "json":
        print_json({"group": group, "deleted": True}, out)
    else:
        out.write(message + "\n")
    return EXIT_OK
