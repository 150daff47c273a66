"""The admin verbs of `skiff`, over the gRPC admin API (skiff.admin.v1).

    skiff topics create|delete|list|describe|alter
    skiff partitions reassign|elect-leaders|reassignments
    skiff groups list|describe|reset-offsets|delete
    skiff cluster describe      skiff quorum describe
    skiff configs get|set|delete
    skiff produce               skiff consume

The admin address is `--bootstrap HOST:PORT`, else $SKIFF_ADMIN, else 127.0.0.1:9094.
Output is a table unless `--output json`. Exit codes: 0 success; 1 the cluster refused
(unknown topic, already exists, not supported yet, ...); 2 a bad argument; 3 the admin API
could not be reached or is not ready (unreachable, unavailable, timed out). Failures print
one line, `skiff: error: <reason>`, on stderr.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from broker.protocol.kafka_uuid import kafka_to_uuid, uuid_to_kafka

DEFAULT_BOOTSTRAP = "127.0.0.1:9094"
ENV_BOOTSTRAP = "SKIFF_ADMIN"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """A bad argument found after parsing (exit 2)."""


# ---- plumbing ------------------------------------------------------------------------


class Client:
    """Stubs over one channel; every call has the command's deadline."""

    def __init__(self, address: str, timeout_s: float) -> None:
        import grpc

        from broker.admin import pb

        self.address = address
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(address)
        self.pb = pb
        self.cluster = pb.cluster_grpc.ClusterServiceStub(self.channel)
        self.quorum = pb.cluster_grpc.QuorumServiceStub(self.channel)
        self.topics = pb.topics_grpc.TopicServiceStub(self.channel)
        self.partitions = pb.partitions_grpc.PartitionServiceStub(self.channel)
        self.groups = pb.groups_grpc.GroupServiceStub(self.channel)
        self.configs = pb.configs_grpc.ConfigServiceStub(self.channel)
        self.records = pb.records_grpc.RecordServiceStub(self.channel)

    def call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request, timeout=self.timeout_s)

    def close(self) -> None:
        self.channel.close()


def kafka_uuid(raw: bytes) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding ("" for no id)."""
    return uuid_to_kafka(uuid.UUID(bytes=raw)) if raw else ""


def parse_kafka_uuid(text: str) -> bytes:
    try:
        return kafka_to_uuid(text).bytes
    except ValueError:
        raise UsageError(
            f"{text!r} is not a topic id (22 characters of URL-safe base64)") from None


_UUID_FIELDS = {"topic_id", "incarnation_id"}


def _uuids_as_text(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _uuids_as_text(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_uuids_as_text(v, key) for v in value]
    if key in _UUID_FIELDS and isinstance(value, str):
        return kafka_uuid(base64.b64decode(value))
    return value


def to_json(message: Any) -> Any:
    from google.protobuf.json_format import MessageToDict

    return _uuids_as_text(MessageToDict(message, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True,
                                        unquote_int64_if_possible=True))


def print_json(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2, sort_keys=False)
    out.write("\n")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> None:
    cells = [[str(c) for c in headers], *([_cell(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    if value is None:
        return "-"
    return str(value)


def _kv(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {item!r}: expected key=value")
        out[key] = value
    return out


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected comma-separated integers") from None


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's --replica-assignment: partitions separated by ',', replicas by ':'
    (`1:2,2:3` is two partitions)."""
    out = []
    for part in text.split(","):
        try:
            out.append([int(b) for b in part.split(":")])
        except ValueError:
            raise UsageError(f"--replica-assignment {text!r}: expected e.g. 1:2,2:3") from None
    return out


def _when(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ---- cluster and quorum --------------------------------------------------------------


def cmd_cluster_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb
    resp = c.call(c.cluster.DescribeCluster, pb.cluster.DescribeClusterRequest())
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"ClusterId:       {resp.cluster_id}\n")
    out.write(f"ControllerId:    {resp.controller_id}\n")
    out.write(f"MetadataOffset:  {resp.metadata_offset} (epoch {resp.metadata_epoch})\n")
    feats = ", ".join(f"{f.name}={f.feature_level}" for f in resp.finalized_features)
    out.write(f"Features:        {feats or '-'}\n\n")
    states = {v: k.removeprefix("BROKER_STATE_").replace("_", " ").lower()
              for k, v in pb.cluster.BrokerState.items()}
    print_table(
        ["BROKER", "STATE", "EPOCH", "CONTROLLER", "LEADERS", "REPLICAS", "RACK", "ENDPOINTS"],
        ([b.registration.broker_id, states[b.state], b.registration.broker_epoch,
          "yes" if b.is_controller else "", b.leader_count, b.replica_count,
          b.registration.rack if b.registration.HasField("rack") else "-",
          [f"{e.name}://{e.host}:{e.port}" for e in b.registration.endpoints]]
         for b in resp.brokers), out)
    return EXIT_OK


def cmd_quorum_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.quorum.DescribeQuorum, c.pb.cluster.DescribeQuorumRequest())
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"ClusterId:              {resp.cluster_id}\n")
    out.write(f"LeaderId:               {resp.leader_id}\n")
    out.write(f"LeaderEpoch:            {resp.leader_epoch}\n")
    out.write(f"HighWatermark:          {resp.high_watermark}\n")
    out.write(f"MaxFollowerLag:         {resp.max_follower_lag}\n")
    out.write(f"MaxFollowerLagTimeMs:   {resp.max_follower_lag_time_ms}\n")
    out.write(f"CurrentVoters:          {[v.replica_id for v in resp.voters]}\n")
    out.write(f"CurrentObservers:       {[o.replica_id for o in resp.observers]}\n\n")
    rows = []
    for kind, reps in (("Voter", resp.voters), ("Observer", resp.observers)):
        for r in reps:
            status = "Leader" if r.replica_id == resp.leader_id else (
                "Follower" if kind == "Voter" else "Observer")
            rows.append([r.replica_id, r.log_end_offset, r.lag,
                         _when(r.last_fetch_timestamp_ms),
                         _when(r.last_caught_up_timestamp_ms), status])
    print_table(["NODE", "LOG END OFFSET", "LAG", "LAST FETCH", "LAST CAUGHT UP", "STATUS"],
                rows, out)
    return EXIT_OK


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


# ---- partitions ------------------------------------------------------------------------


def _reassignments_from_file(path: str) -> list[tuple[str, int, list[int]]]:
    """Kafka's reassignment JSON: {"version":1,"partitions":[{"topic","partition","replicas"}]}"""
    try:
        doc = json.loads(Path(path).read_text())
        return [(str(p["topic"]), int(p["partition"]), [int(r) for r in p["replicas"]])
                for p in doc["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--reassignment-json-file {path}: {exc}") from None


def _status_rows(items: Iterable[Any]) -> list[list[Any]]:
    rows = []
    for s in items:
        progress = ",".join(f"{p.replica_id}@{p.log_end_offset}" for p in s.progress) or "-"
        rows.append([s.topic, s.partition, list(s.replicas), list(s.adding_replicas),
                     list(s.removing_replicas), list(s.isr),
                     "in progress" if s.in_progress else "done",
                     s.leader_log_end_offset if s.HasField("leader_log_end_offset") else "-",
                     progress])
    return rows


_STATUS_HEADERS = ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "ISR", "STATUS",
                   "LEADER LEO", "REPLICA@LEO"]


def cmd_partitions_reassign(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.partitions
    items: list[Any] = []
    if args.reassignment_json_file:
        for topic, part, replicas in _reassignments_from_file(args.reassignment_json_file):
            items.append(pb.Reassignment(topic=topic, partition=part, replicas=replicas,
                                         cancel=args.cancel))
    elif args.topic is not None and args.partition is not None:
        if not args.cancel and not args.replicas:
            raise UsageError("give --replicas, or --cancel")
        items.append(pb.Reassignment(
            topic=args.topic, partition=args.partition, cancel=args.cancel,
            replicas=_ints(args.replicas, "--replicas") if args.replicas else []))
    else:
        raise UsageError("give --topic and --partition, or --reassignment-json-file")
    resp = c.call(c.partitions.AlterPartitionReassignments,
                  pb.AlterPartitionReassignmentsRequest(reassignments=items))
    statuses = list(resp.partitions)
    if args.wait:
        targets = {(r.topic, r.partition): None if r.cancel else list(r.replicas)
                   for r in items}
        statuses = _wait_reassignments(c, targets, args.wait_timeout, sys.stderr)
    if args.output == "json":
        print_json(to_json(pb.AlterPartitionReassignmentsResponse(partitions=statuses)), out)
    else:
        print_table(_STATUS_HEADERS, _status_rows(statuses), out)
    return EXIT_OK


def reassignment_done(s: Any, target: list[int] | None) -> bool:
    """The partition has its target replicas (or, for a cancel, nothing is moving)."""
    if s.in_progress:
        return False
    return target is None or set(s.replicas) == set(target)


def progress_line(statuses: Sequence[Any], targets: dict[tuple[str, int], list[int] | None],
                  limit: int = 3) -> str:
    """One line: partitions done, then the copy progress of the first pending ones."""
    done = sum(1 for s in statuses if reassignment_done(s, targets.get((s.topic, s.partition))))
    parts = [f"reassigning: {done}/{len(targets)} partitions done"]
    pending = [s for s in statuses
               if not reassignment_done(s, targets.get((s.topic, s.partition)))]
    for s in pending[:limit]:
        leo = s.leader_log_end_offset if s.HasField("leader_log_end_offset") else "?"
        copies = " ".join(f"{p.replica_id}@{p.log_end_offset}" for p in s.progress
                          if p.replica_id in s.adding_replicas) or "-"
        parts.append(f"{s.topic}-{s.partition} leader {s.leader} LEO {leo} adding {copies}")
    if len(pending) > limit:
        parts.append(f"+{len(pending) - limit} more")
    return "; ".join(parts)


SETTLE_S = 3.0


def _leader_view_settling(statuses: Sequence[Any]) -> bool:
    """Some replica of a finished move is not yet seen at the leader's log end offset."""
    return any(s.HasField("leader_log_end_offset") and any(
        p.log_end_offset < s.leader_log_end_offset for p in s.progress) for s in statuses)


def _wait_reassignments(c: Client, targets: dict[tuple[str, int], list[int] | None],
                        timeout_s: float, tty: TextIO) -> list[Any]:
    """Poll until every partition has its target replicas, with a live line of real copy
    progress (leader's and adding replicas' log end offsets) on a terminal."""
    pb = c.pb.partitions
    deadline = time.monotonic() + timeout_s
    live = tty.isatty()
    request = pb.ListPartitionReassignmentsRequest(include_completed=True, partitions=[
        pb.TopicPartition(topic=t, partition=p) for t, p in targets])
    width = 0
    settled_by: float | None = None
    while True:
        statuses = list(c.call(c.partitions.ListPartitionReassignments,
                               request).reassignments)
        pending = [s for s in statuses
                   if not reassignment_done(s, targets.get((s.topic, s.partition)))]
        if live:
            line = progress_line(statuses, targets)
            tty.write("\r" + line.ljust(width))
            width = max(width, len(line))
            tty.flush()
        if not pending:
            if settled_by is None:
                # a leader elected by the move knows its followers' offsets only after
                # their next fetch: give that a moment so the final table shows them
                settled_by = time.monotonic() + SETTLE_S
            if not _leader_view_settling(statuses) or time.monotonic() >= settled_by:
                if live:
                    tty.write("\n")
                return statuses
        if time.monotonic() >= deadline:
            if live:
                tty.write("\n")
            raise TimeoutError(f"{len(pending)} reassignment(s) still in progress after "
                               f"{timeout_s:g}s (`skiff partitions reassignments` shows them)")
        time.sleep(0.2)


def cmd_partitions_reassignments(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.partitions
    req = pb.ListPartitionReassignmentsRequest()
    if args.topic is not None:
        if args.partition is None:
            raise UsageError("--topic needs --partition")
        req.partitions.append(pb.TopicPartition(topic=args.topic, partition=args.partition))
    resp = c.call(c.partitions.ListPartitionReassignments, req)
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(_STATUS_HEADERS, _status_rows(resp.reassignments), out)
    return EXIT_OK


def cmd_partitions_elect(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.partitions
    etype = (pb.ELECTION_TYPE_UNCLEAN if args.election_type == "unclean"
             else pb.ELECTION_TYPE_PREFERRED)
    req = pb.ElectLeadersRequest(election_type=etype)
    if args.topic is not None:
        if args.partition is None:
            raise UsageError("--topic needs --partition (or use --all-topic-partitions)")
        req.partitions.append(pb.TopicPartition(topic=args.topic, partition=args.partition))
    elif not args.all_topic_partitions:
        raise UsageError("give --topic and --partition, or --all-topic-partitions")
    resp = c.call(c.partitions.ElectLeaders, req)
    names = {v: k.removeprefix("ELECTION_OUTCOME_").replace("_", " ").lower()
             for k, v in pb.ElectionOutcome.items()}
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["TOPIC", "PARTITION", "OUTCOME", "LEADER", "MESSAGE"],
                    ([r.topic, r.partition, names[r.outcome], r.leader, r.message or "-"]
                     for r in resp.results), out)
    failed = [r for r in resp.results if r.outcome == pb.ELECTION_OUTCOME_FAILED]
    if failed:
        f = failed[0]
        print(f"skiff: error: election failed for {len(failed)} partition(s), e.g. "
              f"{f.topic}-{f.partition}: {f.message}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


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
    resp = c.call(c.groups.DescribeGroup, c.pb.groups.DescribeGroupRequest(group_id=args.group))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"Group: {resp.group_id}\tState: {resp.state}\tCoordinator: "
              f"{resp.coordinator_id}\tAssignor: {resp.protocol or '-'}\n")
    print_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER"],
                ([o.topic, o.partition, o.committed_offset, o.log_end_offset, o.lag,
                  o.member_id or "-"] for o in resp.offsets), out)
    return EXIT_OK


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
        group_id=args.group, topics=topics, partitions=parts, strategy=strategy, value=value,
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
    if args.topic:
        topics, parts = _topic_partitions(args.topic, c.pb.partitions)
        if topics:
            raise UsageError("deleting offsets needs partitions: --topic T:0,1")
        c.call(c.groups.DeleteOffsets, g.DeleteOffsetsRequest(group_id=args.group,
                                                              partitions=parts))
        message = f"Deleted offsets of {len(parts)} partition(s) of group {args.group}."
    else:
        c.call(c.groups.DeleteGroup, g.DeleteGroupRequest(group_id=args.group))
        message = f"Deleted group {args.group}."
    if args.output == "json":
        print_json({"group": args.group, "deleted": True}, out)
    else:
        out.write(message + "\n")
    return EXIT_OK


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


# ---- produce and consume -----------------------------------------------------------------


def _decode_value(text: str, fmt: str) -> bytes:
    if fmt == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except ValueError:
            raise UsageError(f"not base64: {text[:40]!r}") from None
    if fmt == "hex":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise UsageError(f"not hex: {text[:40]!r}") from None
    return text.encode()


def _encode_value(raw: bytes | None, fmt: str) -> str | None:
    if raw is None:
        return None
    if fmt == "base64":
        return base64.b64encode(raw).decode()
    if fmt == "hex":
        return raw.hex()
    return raw.decode("utf-8", errors="backslashreplace")


def cmd_produce(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.records
    headers = [pb.Header(key=k, value=v.encode())
               for k, v in _kv(args.header, "--header").items()]
    lines: Iterable[str] = args.value if args.value else sys.stdin
    recs = []
    for line in lines:
        line = line.rstrip("\n")
        if not line and not args.value:
            continue
        r = pb.ProducerRecord(headers=headers)
        if args.parse_key:
            key, sep, value = line.partition(args.key_separator)
            if not sep:
                raise UsageError(f"no key separator {args.key_separator!r} in {line[:40]!r}")
            r.key = _decode_value(key, args.format)
            line = value
        if not (args.null_marker is not None and line == args.null_marker):
            r.value = _decode_value(line, args.format)
        if args.partition is not None:
            r.partition = args.partition
        recs.append(r)
    if not recs:
        raise UsageError("no records: give --value or lines on stdin")
    # The node's own replication timeout ends before the call's deadline, so a slow ISR is
    # reported as such rather than as a silent deadline.
    resp = c.call(c.records.Produce, pb.ProduceRequest(
        topic=args.topic, records=recs, acks=args.acks,
        timeout_ms=max(1, int(c.timeout_s * 800))))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        for r in resp.records:
            out.write(f"{args.topic}-{r.partition}@{r.offset}\n")
    return EXIT_OK


def cmd_consume(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.records
    req = pb.ConsumeRequest(topic=args.topic, max_records=args.max_messages,
                            max_wait_ms=args.timeout_ms)
    if args.partition is not None:
        req.partitions.append(args.partition)
    if args.offset is not None:
        if args.partition is None:
            raise UsageError("--offset needs --partition")
        req.offset = args.offset
    elif args.from_timestamp is not None:
        req.timestamp_ms = args.from_timestamp
    else:
        req.position = (pb.START_POSITION_EARLIEST if args.from_beginning
                        else pb.START_POSITION_LATEST)
    # The stream ends by itself (max records, or max_wait_ms without a new record): the
    # deadline only has to cover the waiting.
    stream = c.records.Consume(req, timeout=c.timeout_s + args.timeout_ms / 1000)
    count = 0
    for r in stream:
        count += 1
        if args.output == "json":
            out.write(json.dumps({
                "topic": r.topic, "partition": r.partition, "offset": r.offset,
                "timestamp": r.timestamp_ms, "timestamp_type": r.timestamp_type,
                "key": _encode_value(r.key if r.HasField("key") else None, args.format),
                "value": _encode_value(r.value if r.HasField("value") else None, args.format),
                "headers": {h.key: _encode_value(h.value if h.HasField("value") else None,
                                                 args.format) for h in r.headers},
            }) + "\n")
            continue
        parts = []
        if args.print_partition:
            parts.append(f"Partition:{r.partition}")
        if args.print_offset:
            parts.append(f"Offset:{r.offset}")
        if args.print_timestamp:
            parts.append(f"{r.timestamp_type}:{r.timestamp_ms}")
        if args.print_headers:
            parts.append(",".join(
                f"{h.key}:{_encode_value(h.value if h.HasField('value') else None, args.format)}"
                for h in r.headers) or "NO_HEADERS")
        if args.print_key:
            parts.append(str(_encode_value(r.key, args.format)) if r.HasField("key") else "null")
        parts.append(str(_encode_value(r.value, args.format)) if r.HasField("value") else "null")
        out.write("\t".join(parts) + "\n")
        out.flush()
    if args.output != "json":
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return EXIT_OK


# ---- the parser ----------------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--bootstrap", default=None,
                   help=f"admin API address HOST:PORT (default ${ENV_BOOTSTRAP}, else "
                        f"{DEFAULT_BOOTSTRAP})")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    return p


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic")
    p.add_argument("--broker", type=int)
    p.add_argument("--broker-defaults", action="store_true",
                   help="the cluster-wide dynamic broker default")


def _verb(group: Any, name: str, fn: Callable[..., int], common: argparse.ArgumentParser,
          help: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=help)
    p.set_defaults(handler=run, admin_fn=fn)
    return p


def add_parsers(sub: Any) -> None:
    common = _common()

    topics = sub.add_parser("topics", help="create, delete, list, describe, alter topics")
    tv = topics.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(tv, "create", cmd_topics_create, common, "create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="manual placement, e.g. 1:2,2:3")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--validate-only", action="store_true")
    p = _verb(tv, "delete", cmd_topics_delete, common, "delete a topic")
    p.add_argument("topic", nargs="?")
    p.add_argument("--topic-id")
    p = _verb(tv, "list", cmd_topics_list, common, "list topics")
    p.add_argument("--include-internal", action="store_true")
    p = _verb(tv, "describe", cmd_topics_describe, common, "describe topics and partitions")
    p.add_argument("topics", nargs="*")
    p.add_argument("--include-internal", action="store_true")
    p = _verb(tv, "alter", cmd_topics_alter, common, "add partitions or change configs")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, help="the new partition count")
    p.add_argument("--replica-assignment", help="placement of the new partitions")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", metavar="KEY")
    p.add_argument("--validate-only", action="store_true")

    parts = sub.add_parser("partitions", help="reassign partitions, elect leaders")
    pv = parts.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(pv, "reassign", cmd_partitions_reassign, common,
              "move partitions to other brokers (or --cancel)")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--replicas", help="target broker ids, e.g. 2,3,1")
    p.add_argument("--reassignment-json-file", help="Kafka's reassignment JSON")
    p.add_argument("--cancel", action="store_true")
    p.add_argument("--wait", action="store_true", help="wait until the data is copied")
    p.add_argument("--wait-timeout", type=float, default=300.0)
    p = _verb(pv, "elect-leaders", cmd_partitions_elect, common, "preferred or unclean")
    p.add_argument("--election-type", choices=["preferred", "unclean"], default="preferred")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--all-topic-partitions", action="store_true")
    p = _verb(pv, "reassignments", cmd_partitions_reassignments, common,
              "list ongoing reassignments")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)

    groups = sub.add_parser("groups", help="consumer groups")
    gv = groups.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(gv, "list", cmd_groups_list, common, "list groups")
    p.add_argument("--state", action="append")
    p = _verb(gv, "describe", cmd_groups_describe, common, "members, offsets and lag")
    p.add_argument("group")
    p = _verb(gv, "reset-offsets", cmd_groups_reset, common,
              "reset committed offsets (dry run unless --execute)")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,..]")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--shift-by", type=int)
    how.add_argument("--to-datetime")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="the default")
    p = _verb(gv, "delete", cmd_groups_delete, common,
              "delete a group, or its offsets with --topic T:P")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", metavar="TOPIC:P,..")

    cluster = sub.add_parser("cluster", help="brokers, controller, features")
    cv = cluster.add_subparsers(dest="verb", metavar="VERB", required=True)
    _verb(cv, "describe", cmd_cluster_describe, common, "describe the cluster")
    quorum = sub.add_parser("quorum", help="the metadata quorum")
    qv = quorum.add_subparsers(dest="verb", metavar="VERB", required=True)
    _verb(qv, "describe", cmd_quorum_describe, common, "leader, epoch, replication status")

    configs = sub.add_parser("configs", help="broker and topic configs")
    fv = configs.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(fv, "get", cmd_configs_get, common, "configs with their sources")
    _target(p)
    p.add_argument("names", nargs="*", help="only these keys")
    p.add_argument("--synonyms", action="store_true")
    p.add_argument("--dynamic", action="store_true", help="only dynamic (altered) configs")
    p = _verb(fv, "set", cmd_configs_set, common, "set dynamic configs")
    _target(p)
    p.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    p.add_argument("--validate-only", action="store_true")
    p = _verb(fv, "delete", cmd_configs_delete, common, "remove dynamic configs")
    _target(p)
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.add_argument("--validate-only", action="store_true")

    p = _verb(sub, "produce", cmd_produce, common,
              "console producer: one record per stdin line (or --value)")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    p.add_argument("--value", action="append", help="a record value instead of stdin")
    p.add_argument("--parse-key", action="store_true", help="lines are KEY<sep>VALUE")
    p.add_argument("--key-separator", default="\t")
    p.add_argument("--header", action="append", metavar="KEY=VALUE")
    p.add_argument("--null-marker", help="a value equal to this is sent as null")
    p.add_argument("--format", choices=["text", "base64", "hex"], default="text")
    p.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    p = _verb(sub, "consume", cmd_consume, common, "console consumer")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--offset", type=int)
    p.add_argument("--from-timestamp", type=int, metavar="MS")
    p.add_argument("--max-messages", type=int, default=10)
    p.add_argument("--timeout-ms", type=int, default=1000,
                   help="stop after this long without a new record")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--format", choices=["text", "base64", "hex"], default="text")


def _status_exit(code_name: str) -> int:
    if code_name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return EXIT_UNREACHABLE
    if code_name in ("INVALID_ARGUMENT", "OUT_OF_RANGE"):
        return EXIT_USAGE
    return EXIT_FAILED


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import grpc

    out = out or sys.stdout
    address = args.bootstrap or os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
    client = None
    try:
        client = Client(address, args.timeout)
        return int(args.admin_fn(client, args, out))
    except UsageError as exc:
        print(f"skiff: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TimeoutError as exc:
        print(f"skiff: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except grpc.RpcError as exc:
        code = exc.code()
        details = (exc.details() or "").replace("\n", " ")
        if code is grpc.StatusCode.UNAVAILABLE and (
                "connect" in details.lower() or "dns" in details.lower()):
            reason = (f"cannot reach the admin API at {address} ({details}); is the node "
                      f"running? Set --bootstrap or ${ENV_BOOTSTRAP}")
        elif code is grpc.StatusCode.DEADLINE_EXCEEDED and details == "Deadline Exceeded":
            # the client's own deadline (the server's timeouts carry their own message)
            reason = f"no answer from {address} within {args.timeout:g}s ({details})"
        else:
            reason = f"{details} [{code.name}]"
        print(f"skiff: error: {reason}", file=sys.stderr)
        return _status_exit(code.name)
    except BrokenPipeError:
        return EXIT_OK
    finally:
        if client is not None:
            client.close()
