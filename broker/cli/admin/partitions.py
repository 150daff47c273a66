"""`skiff partitions reassign|reassignments|elect-leaders`, and the progress of a reassignment."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from broker.cli.admin.common import (
    EXIT_FAILED,
    EXIT_OK,
    Client,
    UsageError,
    _ints,
    print_json,
    print_table,
    to_json,
)

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
