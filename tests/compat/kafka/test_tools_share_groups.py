"""Kafka 4.4's kafka-share-groups tool (ShareGroupCommand) against Skiff, step by step
beside the Kafka 4.4 reference (tests/support/kafka_tools.py's BrokerPair): --list,
--describe (offsets, members, state), --reset-offsets, --delete-offsets and --delete, with
the outputs normalised (ids, timestamps) and compared, but for the accepted differences in
tool_differences.py (SHARE).

A share group reads a two-partition topic on each broker: a Java KafkaShareConsumer
(tests/java/src/skiff/compat/share/ShareCases.java, case "drain") takes and ACCEPTs every
record, then leaves, so the group is Empty with its share-partition start offsets at the end
of the log; the group's share.auto.offset.reset is earliest on both. Both brokers
start with share.version 2 (formatted at 4.4); the fixture checks that it is finalized.
The Kafka node is the session's `kafka_ref`, shared with other modules: names carry this
module's prefix and listings are filtered to it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.compat.kafka.tool_differences import SHARE
from tests.compat.kafka.tools_support import ok
from tests.support.kafka_ref import KafkaNode, run_program, tool
from tests.support.kafka_tools import BrokerPair, only_lines
from tests.support.node import SkiffNode, started_node

pytestmark = [pytest.mark.timeout(600)]

P = "shr"
B = "--bootstrap-server"
PROGRAM = "skiff.compat.share.ShareCases"
PER_PARTITION = 5
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def skiff(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    node = started_node(tmp_path_factory.mktemp("tools-share-skiff"))
    try:
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def pair(kafka_ref: KafkaNode, skiff: SkiffNode) -> BrokerPair:
    for bootstrap in (kafka_ref.bootstrap, skiff.bootstrap):
        proc = tool("kafka-features", B, bootstrap, "upgrade", "--feature", "share.version=1",
                    timeout=120)
        described = ok("kafka-features", B, bootstrap, "describe").stdout
        assert re.search(r"Feature: share\.version\s+SupportedMinVersion: \d+\s+"
                         r"SupportedMaxVersion: \d+\s+FinalizedVersionLevel: [1-9]",
                         described), proc.stdout + proc.stderr + described
    return BrokerPair(kafka=kafka_ref.bootstrap, skiff=skiff.bootstrap, differences=SHARE)


def _produce(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for part in range(2):
        for i in range(PER_PARTITION):
            p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=part)
    assert p.flush(30) == 0


def _drain(bootstrap: str, topic: str, group: str, expected: int) -> list[int]:
    """Every offset a share consumer got: it polls until `expected` records (or its 90 s
    deadline), then one quiet second for any redelivery."""
    proc = run_program(PROGRAM, bootstrap, f"drain:{topic}:{group}:{expected}:1000",
                       timeout=180)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    offsets: list[int] = lines[-1]["offsets"]
    return offsets


def _member_ids(text: str) -> str:
    """A share member's id is a client-made UUID; its host the client's address."""
    return re.sub(r"/127\.0\.0\.1", "<host>", text)


def test_kafka_share_groups(pair: BrokerPair) -> None:
    t, g = f"{P}-topic", f"{P}-group"
    group = ("--group", g)
    pair.same("share.setup.topic", "kafka-topics", B, "{bootstrap}", "--create", "--topic", t,
              "--partitions", "2")
    pair.same("share.setup.config", "kafka-configs", B, "{bootstrap}", "--alter",
              "--entity-type", "groups", "--entity-name", g, "--add-config",
              "share.auto.offset.reset=earliest")
    for b in (pair.kafka, pair.skiff):
        _produce(b, t)
        got = _drain(b, t, g, 2 * PER_PARTITION)
        assert sorted(got) == sorted(list(range(PER_PARTITION)) * 2), (b, got)

    pair.same("share.list", "kafka-share-groups", B, "{bootstrap}", "--list",
              normalise=only_lines(P))
    pair.same("share.describe.offsets", "kafka-share-groups", B, "{bootstrap}", "--describe",
              *group)
    pair.same("share.describe.offsets.verbose", "kafka-share-groups", B, "{bootstrap}",
              "--describe", *group, "--verbose")
    pair.same("share.describe.members", "kafka-share-groups", B, "{bootstrap}", "--describe",
              *group, "--members", normalise=_member_ids)
    pair.same("share.describe.state", "kafka-share-groups", B, "{bootstrap}", "--describe",
              *group, "--state")
    pair.same("share.reset.earliest.dry_run", "kafka-share-groups", B, "{bootstrap}",
              "--reset-offsets", *group, "--topic", t, "--to-earliest", "--dry-run")
    pair.same("share.reset.earliest", "kafka-share-groups", B, "{bootstrap}",
              "--reset-offsets", *group, "--topic", t, "--to-earliest", "--execute")
    pair.same("share.reset.offset", "kafka-share-groups", B, "{bootstrap}",
              "--reset-offsets", *group, "--topic", f"{t}:1", "--to-offset", "3", "--execute")
    pair.same("share.describe.after_reset", "kafka-share-groups", B, "{bootstrap}",
              "--describe", *group)
    # the reset offsets hold: a consumer gets the records from there again
    for b in (pair.kafka, pair.skiff):
        again = [*range(PER_PARTITION), 3, 4]
        got = _drain(b, t, g, len(again))
        assert sorted(got) == sorted(again), (b, got)
    pair.same("share.delete_offsets", "kafka-share-groups", B, "{bootstrap}",
              "--delete-offsets", *group, "--topic", t)
    pair.same("share.delete_offsets.unknown_topic", "kafka-share-groups", B, "{bootstrap}",
              "--delete-offsets", *group, "--topic", f"{t}-none")
    pair.same("share.describe.after_delete_offsets", "kafka-share-groups", B, "{bootstrap}",
              "--describe", *group)
    pair.same("share.delete", "kafka-share-groups", B, "{bootstrap}", "--delete", *group)
    pair.same("share.list.after_delete", "kafka-share-groups", B, "{bootstrap}", "--list",
              normalise=only_lines(P))
    pair.same("share.delete.missing", "kafka-share-groups", B, "{bootstrap}", "--delete",
              "--group", f"{P}-none")
    pair.same("share.describe.missing", "kafka-share-groups", B, "{bootstrap}", "--describe",
              "--group", f"{P}-none")
    pair.same("share.reset.missing", "kafka-share-groups", B, "{bootstrap}",
              "--reset-offsets", "--group", f"{P}-none2", "--topic", t, "--to-latest",
              "--execute")


def _skiff_cli(node: SkiffNode, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    return subprocess.run([sys.executable, "-m", "broker.cli.main", *args, "--bootstrap",
                           f"127.0.0.1:{node.admin_port}"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)


def _cli_ok(node: SkiffNode, *args: str) -> str:
    p = _skiff_cli(node, *args)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p.stdout


def _start_offsets_by_tool(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """START-OFFSET of each partition as kafka-share-groups --describe prints it."""
    lines = [ln.split() for ln in ok("kafka-share-groups", B, bootstrap, "--describe",
                                     "--group", group).stdout.splitlines() if ln.strip()]
    header = next((ln for ln in lines if "START-OFFSET" in ln), None)
    if header is None:
        return {}
    rows = [dict(zip(header, ln, strict=False)) for ln in lines[lines.index(header) + 1:]]
    return {(r["TOPIC"], int(r["PARTITION"])): int(r["START-OFFSET"]) for r in rows
            if r.get("START-OFFSET", "-").lstrip("-").isdigit()}


def test_skiff_cli_lists_describes_resets_and_deletes_a_share_group(
        pair: BrokerPair, skiff: SkiffNode) -> None:
    """`skiff groups` (the gRPC admin plane) on a share group made by Kafka 4.4's
    KafkaShareConsumer: what it shows matches kafka-share-groups on the same node, and what
    it changes, the share consumer and the tool see."""
    t, g = f"{P}-cli-topic", f"{P}-cli-group"
    ok("kafka-topics", B, skiff.bootstrap, "--create", "--topic", t, "--partitions", "2")
    ok("kafka-configs", B, skiff.bootstrap, "--alter", "--entity-type", "groups",
       "--entity-name", g, "--add-config", "share.auto.offset.reset=earliest")
    _produce(skiff.bootstrap, t)
    got = _drain(skiff.bootstrap, t, g, 2 * PER_PARTITION)
    assert sorted(got) == sorted(list(range(PER_PARTITION)) * 2), got

    listed = json.loads(_cli_ok(skiff, "groups", "list", "-o", "json"))["groups"]
    assert {"group_id": g, "state": "Empty", "protocol_type": "share", "type": "share"} \
        in listed, listed

    def described() -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(_cli_ok(skiff, "groups", "describe", g, "-o", "json"))
        return doc

    def starts(doc: dict[str, Any]) -> dict[tuple[str, int], int]:
        return {(o["topic"], o["partition"]): o["committed_offset"] for o in doc["offsets"]}

    doc = described()
    assert (doc["type"], doc["state"], doc["protocol_type"], doc["members"]) == \
        ("share", "Empty", "share", []), doc
    before = starts(doc)  # where Kafka 4.4 keeps it after the drain, the tool says the same
    assert set(before) == {(t, 0), (t, 1)} and before == _start_offsets_by_tool(
        skiff.bootstrap, g), doc
    assert {(o["partition"], o["log_end_offset"], o["lag"]) for o in doc["offsets"]} == \
        {(0, PER_PARTITION, 0), (1, PER_PARTITION, 0)}, doc
    text = _cli_ok(skiff, "groups", "describe", g)
    assert f"Group: {g}\tType: share\tState: Empty" in text and "START-OFFSET" in text, text

    plan = _cli_ok(skiff, "groups", "reset-offsets", g, "--topic", t, "--to-latest")
    assert "dry run" in plan and [ln.split()[-1] for ln in plan.splitlines()[1:3]] == \
        [str(PER_PARTITION)] * 2, plan
    assert starts(described()) == before
    _cli_ok(skiff, "groups", "reset-offsets", g, "--topic", t, "--to-latest", "--execute")
    assert starts(described()) == {(t, 0): PER_PARTITION, (t, 1): PER_PARTITION} \
        == _start_offsets_by_tool(skiff.bootstrap, g)
    _cli_ok(skiff, "groups", "reset-offsets", g, "--topic", f"{t}:0", "--to-earliest",
            "--execute")
    _cli_ok(skiff, "groups", "reset-offsets", g, "--topic", f"{t}:1", "--to-offset", "3",
            "--execute")
    assert starts(described()) == {(t, 0): 0, (t, 1): 3} \
        == _start_offsets_by_tool(skiff.bootstrap, g)
    shifted = _skiff_cli(skiff, "groups", "reset-offsets", g, "--topic", t, "--shift-by",
                         "1", "--execute")
    assert shifted.returncode != 0 and "not shifted" in shifted.stderr, shifted.stderr
    again = [*range(PER_PARTITION), 3, 4]  # the consumer gets the records from there again
    assert sorted(_drain(skiff.bootstrap, t, g, len(again))) == sorted(again)

    one = _skiff_cli(skiff, "groups", "delete", g, "--topic", f"{t}:0")
    assert one.returncode != 0 and "by whole topic" in one.stderr, one.stderr
    assert _cli_ok(skiff, "groups", "delete", g, "--topic", t).strip() == \
        f"Deleted offsets of topic {t} in group {g}."
    assert starts(described()) == {} == _start_offsets_by_tool(skiff.bootstrap, g)
    assert _cli_ok(skiff, "groups", "delete", g).strip() == f"Deleted group {g}."
    listed = json.loads(_cli_ok(skiff, "groups", "list", "-o", "json"))["groups"]
    assert g not in {x["group_id"] for x in listed}, listed
    missing = _skiff_cli(skiff, "groups", "describe", g)
    assert missing.returncode != 0 and "NOT_FOUND" in missing.stderr, missing.stderr


def test_isolation_levels_as_kafka(pair: BrokerPair) -> None:
    """share.isolation.level (issue 34), with Kafka 4.4's KafkaShareConsumer on both brokers
    (ShareCases.java, case "isolation"): one partition holds a committed transaction, an
    aborted one, a plain record, a committed transaction and one left open. A read_committed
    share group gets the committed and plain records, never the aborted ones or anything past
    the open transaction; a read_uncommitted group gets every record. Each record's commit
    marker is archived after the records ahead of it, never before: a marker read in the
    same fetch as its transaction once archived the committed records too (Skiff)."""
    got = {}
    for name, bootstrap in (("kafka", pair.kafka), ("skiff", pair.skiff)):
        proc = run_program(PROGRAM, bootstrap,
                           f"isolation:{P}-isolation-{name}:{P}-isolation-g:2000", timeout=180)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
        got[name] = {k: lines[-1][k] for k in ("read_committed", "read_uncommitted")}
    assert got["kafka"] == {
        "read_committed": ["c0", "c1", "c2", "p0", "c3"],
        "read_uncommitted": ["c0", "c1", "c2", "a0", "a1", "a2", "p0", "c3", "o0"]}, got
    assert got["skiff"] == got["kafka"], got


def test_renew_disabled_as_kafka(pair: BrokerPair) -> None:
    """share.renew.acknowledge.enable=false (issue 34), with Kafka 4.4's KafkaShareConsumer on
    both brokers (ShareCases.java, case "renew_off"): a RENEW of the record the consumer
    holds fails its commit with InvalidRecordStateException, and what the client does next
    (an ACCEPT of the same record) goes as it goes against Kafka."""
    got = {}
    for name, bootstrap in (("kafka", pair.kafka), ("skiff", pair.skiff)):
        proc = run_program(PROGRAM, bootstrap, f"renew_off:{P}-renew-off-{name}:{P}-renew-off-g",
                           timeout=180)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
        got[name] = {k: lines[-1][k] for k in ("renew_errors", "accept_errors")}
    # the client reports its own words for INVALID_RECORD_STATE, and forgets the record:
    # acknowledging it again throws IllegalStateException
    assert got["kafka"]["renew_errors"][0].startswith("InvalidRecordStateException"), got
    assert got["skiff"] == got["kafka"], got


@pytest.mark.parametrize("copy", [False, True], ids=["headers-only", "copy-record"])
def test_dead_letter_queue_as_kafka(pair: BrokerPair, copy: bool) -> None:
    """Share-group dead-letter queues (KIP-1191, share.version 2, issue 34) with Kafka 4.4's
    KafkaShareConsumer on both brokers (ShareCases.java, case "dlq"): a topic whose group
    names dlq.<topic> (two partitions, errors.deadletterqueue.group.enable=true) as its
    dead-letter topic, with a delivery count limit of 2; the consumer ACCEPTs offsets 0 and 3,
    REJECTs 1 and RELEASEs 2 twice. Both brokers write the same dead letters for 1 and 2:
    the same partition, headers, timestamps (the time of writing) and, with
    errors.deadletterqueue.copy.record.enable, the records' keys and values (never their
    headers)."""
    got = {}
    for name, bootstrap in (("kafka", pair.kafka), ("skiff", pair.skiff)):
        tool("kafka-features", B, bootstrap, "upgrade", "--feature", "share.version=2",
             timeout=120)
        topic = f"{P}-dlq-{'copy' if copy else 'plain'}"
        proc = run_program(PROGRAM, bootstrap, f"dlq:{topic}:{topic}-g:{str(copy).lower()}",
                           timeout=180)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
        got[name] = {k: lines[-1][k] for k in ("steps", "dlq")}
        assert len(got[name]["steps"]) == 5, (name, got[name], proc.stderr[-3000:])
    assert [d["headers"][-1] for d in got["kafka"]["dlq"]] == [
        "__dlq.errors.message=Offset rejected by client.",
        "__dlq.errors.message=Offset delivery count exceeded the threshold."], got
    assert got["skiff"] == got["kafka"], got


def test_share_group_survives_coordinator_restart(pair: BrokerPair, skiff: SkiffNode) -> None:
    """The share group's records in __consumer_offsets (issue 34): after the coordinator
    node stops (SIGTERM) or dies (kill -9) and starts again, kafka-share-groups still lists
    the group and describes its partitions (start offset, lag 0) as before, and a share
    consumer of the group goes on after the records it ACCEPTed before."""
    t, g = f"{P}-restart-topic", f"{P}-restart-group"
    ok("kafka-topics", B, skiff.bootstrap, "--create", "--topic", t, "--partitions", "2")
    ok("kafka-configs", B, skiff.bootstrap, "--alter", "--entity-type", "groups",
       "--entity-name", g, "--add-config", "share.auto.offset.reset=earliest")
    _produce(skiff.bootstrap, t)
    assert sorted(_drain(skiff.bootstrap, t, g, 2 * PER_PARTITION)) == \
        sorted(list(range(PER_PARTITION)) * 2)

    def described() -> list[list[str]]:
        out = ok("kafka-share-groups", B, skiff.bootstrap, "--describe", "--group", g).stdout
        return [ln.split() for ln in out.splitlines() if ln.startswith(g)]

    before = described()
    assert [(row[1], row[2], row[-1]) for row in before] == [(t, "0", "0"), (t, "1", "0")], \
        before
    for restart in (skiff.stop, skiff.kill):
        restart()
        skiff.start()
        skiff.wait_ready()
        assert described() == before
        listed = ok("kafka-share-groups", B, skiff.bootstrap, "--list").stdout.split()
        assert g in listed, listed
    # the records after the restarts, none of those ACCEPTed before them
    p = Producer({"bootstrap.servers": skiff.bootstrap, "log_level": 3})
    for part in range(2):
        p.produce(t, value=b"new", partition=part)
    assert p.flush(30) == 0
    assert _drain(skiff.bootstrap, t, g, 2) == [PER_PARTITION] * 2
