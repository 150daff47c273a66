"""`skiff topics create|delete|list|describe|alter`."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from broker.cli.admin.common import (
    EXIT_OK,
    Client,
    UsageError,
    _kv,
    kafka_uuid,
    parse_kafka_uuid,
    parse_replica_assignment,
    print_json,
    print_table,
    to_json,
)

# ---- topics ----------------------------------------------------------------------------


def cmd_topics_create(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.topics
    req = pb.CreateTopicRequest(
        name=args.topic, num_partitions=args.partitions or 0,
        replication_factor=args.replication_factor or 0, configs=_kv(args.config, "--config"),
        validate_only=args.validate_only)
    if args.replica_assignment:
        for i, replicas in enumerate(parse_replica_assignment(args.replica_assignment)):
            req.assignments.append(pb.ReplicaAssignment(partition=i, replicas=replicas))
    resp = c.call(c.topics.CreateTopic, req)
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        verb = "Validated" if args.validate_only else "Created"
        out.write(f"{verb} topic {resp.topic.name} (id {kafka_uuid(resp.topic.topic_id) or '-'},"
                  f" {resp.num_partitions} partitions, replication factor "
                  f"{resp.replication_factor}).\n")
    return EXIT_OK


def cmd_topics_delete(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.topics
    req = (pb.DeleteTopicRequest(topic_id=parse_kafka_uuid(args.topic_id)) if args.topic_id
           else pb.DeleteTopicRequest(name=args.topic or ""))
    if not args.topic and not args.topic_id:
        raise UsageError("give a topic name or --topic-id")
    resp = c.call(c.topics.DeleteTopic, req)
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        out.write(f"Deleted topic {resp.topic.name} (id {kafka_uuid(resp.topic.topic_id)}).\n")
    return EXIT_OK


def cmd_topics_list(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.topics.ListTopics,
                  c.pb.topics.ListTopicsRequest(include_internal=args.include_internal))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    print_table(["TOPIC", "ID", "PARTITIONS", "RF", "UNDER-REPLICATED", "OFFLINE"],
                ([t.topic.name, kafka_uuid(t.topic.topic_id), t.num_partitions,
                  t.replication_factor, t.under_replicated_partitions, t.offline_partitions]
                 for t in resp.topics), out)
    return EXIT_OK


def _offset(p: Any, name: str) -> Any:
    return getattr(p, name) if p.HasField(name) else "-"


def cmd_topics_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.topics.DescribeTopics, c.pb.topics.DescribeTopicsRequest(
        names=args.topics, include_internal=args.include_internal))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    for i, t in enumerate(resp.topics):
        if i:
            out.write("\n")
        rf = max((len(p.partition.replicas) for p in t.partitions), default=0)
        cfg = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
        out.write(f"Topic: {t.topic.name}\tTopicId: {kafka_uuid(t.topic.topic_id)}\t"
                  f"PartitionCount: {len(t.partitions)}\tReplicationFactor: {rf}\t"
                  f"Configs: {cfg}\n")
        print_table(
            ["PARTITION", "LEADER", "LEADER EPOCH", "REPLICAS", "ISR", "ELR", "OFFLINE",
             "ADDING", "REMOVING", "LOG START", "HIGH WATERMARK", "LOG END"],
            ([p.partition.partition_id, p.partition.leader, p.partition.leader_epoch,
              list(p.partition.replicas), list(p.partition.isr), list(p.partition.elr),
              list(p.offline_replicas), list(p.partition.adding_replicas),
              list(p.partition.removing_replicas), _offset(p, "log_start_offset"),
              _offset(p, "high_watermark"), _offset(p, "log_end_offset")]
             for p in t.partitions), out)
    return EXIT_OK


def cmd_topics_alter(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    if not (args.partitions or args.config or args.delete_config):
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    result: dict[str, Any] = {"topic": args.topic}
    if args.config or args.delete_config:
        changes = [c.pb.meta.Config(resource_type=2, resource_name=args.topic, name=k, value=v)
                   for k, v in _kv(args.config, "--config").items()]
        changes += [c.pb.meta.Config(resource_type=2, resource_name=args.topic, name=k)
                    for k in args.delete_config or ()]
        c.call(c.configs.AlterConfigs, c.pb.configs.AlterConfigsRequest(
            changes=changes, validate_only=args.validate_only))
        result["configs_changed"] = len(changes)
    if args.partitions:
        req = c.pb.topics.CreatePartitionsRequest(
            topic=args.topic, total_count=args.partitions, validate_only=args.validate_only)
        if args.replica_assignment:
            resp = c.call(c.topics.DescribeTopics,
                          c.pb.topics.DescribeTopicsRequest(names=[args.topic]))
            first = len(resp.topics[0].partitions)
            for i, replicas in enumerate(parse_replica_assignment(args.replica_assignment)):
                req.assignments.append(c.pb.topics.ReplicaAssignment(
                    partition=first + i, replicas=replicas))
        resp = c.call(c.topics.CreatePartitions, req)
        result["partitions"] = len(resp.topic.partitions)
    if args.output == "json":
        print_json(result, out)
    else:
        what = []
        if "configs_changed" in result:
            what.append(f"{result['configs_changed']} config change(s)")
        if "partitions" in result:
            what.append(f"{args.partitions} partitions")
        verb = "Validated" if args.validate_only else "Altered"
        out.write(f"{verb} topic {args.topic}: {', '.join(what)}.\n")
    return EXIT_OK
