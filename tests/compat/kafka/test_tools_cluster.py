"""kafka-reassign-partitions and kafka-leader-election (Kafka 4.4's tools) on three nodes:
the reference `kafka_ref_cluster` (three combined Kafka 4.4 nodes, ids 1-3) and a Skiff
cluster of three combined nodes (ids 1-3), step by step, outputs compared as in
test_tools_admin.py (the nodes' addresses become <broker0..2> on both sides).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.kafka.tool_differences import CLUSTER
from broker.testing.cluster import Cluster
from tests.support.kafka_ref import KafkaCluster
from tests.support.kafka_tools import BrokerPair

pytestmark = [pytest.mark.timeout(900)]

B = "--bootstrap-server"
T = "reassign-t"


@pytest.fixture(scope="module")
def pair(kafka_ref_cluster: KafkaCluster,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPair]:
    skiff = Cluster(tmp_path_factory.mktemp("tools-cluster"), controllers=3, combined=True)
    with skiff:
        skiff.start()
        knodes = [n.bootstrap for n in kafka_ref_cluster.nodes]
        snodes = [skiff.nodes[i].bootstrap for i in sorted(skiff.broker_ids)]
        yield BrokerPair(kafka=knodes[0], skiff=snodes[0], kafka_others=knodes[1:],
                         skiff_others=snodes[1:], differences=CLUSTER)


def _until_done(pair: BrokerPair, plan: Path) -> None:
    """--verify until both report the reassignment complete (bounded)."""
    deadline = time.monotonic() + 60
    while True:
        k, s = pair.run("kafka-reassign-partitions", B, "{bootstrap}", "--verify",
                        "--reassignment-json-file", str(plan))
        if all("is still in progress" not in o.stdout for o in (k, s)):
            return
        assert time.monotonic() < deadline, (k.text(), s.text())
        time.sleep(1)


def test_reassign_partitions_and_leader_election(pair: BrokerPair, tmp_path: Path) -> None:
    pair.same("cluster.setup", "kafka-topics", B, "{bootstrap}", "--create", "--topic", T,
              "--replica-assignment", "1:2,2:3,3:1")
    pair.same("cluster.describe", "kafka-topics", B, "{bootstrap}", "--describe", "--topic", T)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": T}]}))
    # --generate proposes a placement of its own (a random start broker on both): the
    # current assignment it prints must agree, and the proposal must be a valid placement
    k, s = pair.run("kafka-reassign-partitions", B, "{bootstrap}", "--generate",
                    "--topics-to-move-json-file", str(move), "--broker-list", "1,2,3")
    assert (k.returncode, s.returncode) == (0, 0), (k.text(), s.text())
    for out in (k, s):
        current, proposed = _generated(out.stdout)
        assert current == {0: [1, 2], 1: [2, 3], 2: [3, 1]}, out.stdout
        assert sorted(proposed) == [0, 1, 2], out.stdout
        assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in proposed.values())
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": T, "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": T, "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}))
    pair.same("reassign.execute", "kafka-reassign-partitions", B, "{bootstrap}", "--execute",
              "--reassignment-json-file", str(plan), normalise=_log_dirs)
    _until_done(pair, plan)
    pair.same("reassign.verify", "kafka-reassign-partitions", B, "{bootstrap}", "--verify",
              "--reassignment-json-file", str(plan))
    pair.same("reassign.list", "kafka-reassign-partitions", B, "{bootstrap}", "--list")
    pair.same("reassign.describe.after", "kafka-topics", B, "{bootstrap}", "--describe",
              "--topic", T)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": T, "partition": 2, "replicas": [1, 9]}]}))
    pair.same("reassign.unknown_broker", "kafka-reassign-partitions", B, "{bootstrap}",
              "--execute", "--reassignment-json-file", str(bad))
    pair.same("reassign.cancel.nothing", "kafka-reassign-partitions", B, "{bootstrap}",
              "--cancel", "--reassignment-json-file", str(plan))
    pair.same("election.preferred", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--topic", T, "--partition", "0",
              normalise=_election)
    pair.same("election.preferred.all", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--all-topic-partitions",
              normalise=_only_topic)
    pair.same("election.unclean", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "unclean", "--topic", T, "--partition", "1",
              normalise=_election)
    pair.same("election.unknown_partition", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--topic", T, "--partition", "7")
    pair.same("election.bad_type", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "sometimes", "--all-topic-partitions")


def _generated(stdout: str) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    docs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert len(docs) == 2, stdout

    def by_partition(doc: dict) -> dict[int, list[int]]:  # type: ignore[type-arg]
        return {p["partition"]: p["replicas"] for p in doc["partitions"]}
    return by_partition(docs[0]), by_partition(docs[1])


def _log_dirs(text: str) -> str:
    """The rollback plan --execute prints names each replica's log directory: the nodes'
    own (temporary) paths."""
    return re.sub(r'"/[^"]*"', '"<dir>"', text)


def _election(text: str) -> str:
    return text


def _only_topic(text: str) -> str:
    """An election over all partitions: keep what concerns this module's topic."""
    kept = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(":", 1)]
        if len(parts) == 2 and "partitions" in parts[0]:
            mine = sorted(x for x in parts[1].split(", ") if x.startswith(T))
            kept.append(f"{parts[0]}: {', '.join(mine)}" if mine else "")
        else:
            kept.append(line)
    return "\n".join(line for line in kept if line)
