"""kafka-reassign-partitions and kafka-leader-election (Kafka 4.4's tools) on three nodes:
the reference `kafka_ref_cluster` (three combined Kafka 4.4 nodes, ids 1-3) and a Skiff
cluster of three combined nodes (ids 1-3), step by step, outputs compared as in
test_tools_admin.py (the nodes' addresses become <broker0..2> on both sides).

Covered: --generate (the current assignment it prints; its proposal is random on both),
--execute (a move, a reorder with --throttle, an unknown broker), --verify, --list and
--cancel once the moves are done, and kafka-leader-election preferred (needed and not),
preferred over every partition, unclean, an unknown partition and a bad election type.
Not covered: --list and --cancel of a move still in progress. Kafka holds one with a
replication throttle, which Skiff does not implement (tool_differences), and a Skiff move
to a stopped broker cannot be made with the tool (it refuses an id describeCluster does not
list: "Unknown broker id 2"); Skiff's answers for that are in the unit tests of
ListPartitionReassignments and AlterPartitionReassignments.

The reference cluster is the session's, shared with test_reference.py (one xdist group):
the topic is this module's own, and an election over every partition is filtered to it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing.cluster import Cluster
from tests.compat.kafka.tool_differences import CLUSTER
from tests.support.kafka_ref import KafkaCluster, tool
from tests.support.kafka_tools import BrokerPair

pytestmark = [pytest.mark.timeout(900)]

B = "--bootstrap-server"
T = "reassign-t"


@pytest.fixture(scope="module")
def skiff(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("tools-cluster"), controllers=3, combined=True)
    with cluster:
        cluster.start(180.0)  # three Python nodes at once: slow to start on a loaded machine
        yield cluster


@pytest.fixture(scope="module")
def pair(kafka_ref_cluster: KafkaCluster, skiff: Cluster) -> BrokerPair:
    knodes = [n.bootstrap for n in kafka_ref_cluster.nodes]
    snodes = [skiff.nodes[i].bootstrap for i in sorted(skiff.broker_ids)]
    return BrokerPair(kafka=knodes[0], skiff=snodes[0], kafka_others=knodes[1:],
                      skiff_others=snodes[1:], differences=CLUSTER)


def _until_done(pair: BrokerPair, plan: Path) -> None:
    """--verify until both report the reassignment complete (bounded)."""
    deadline = time.monotonic() + 120
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
    pair.same("election.preferred.not_needed", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--topic", T, "--partition", "0")
    # a reorder of partition 2's replicas ([3, 1] -> [1, 3]) with a replication throttle: the
    # leader stays 3, so the preferred leader (1) is not the leader until an election
    reorder = tmp_path / "reorder.json"
    reorder.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": T, "partition": 2, "replicas": [1, 3]}]}))
    pair.same("reassign.execute.throttle", "kafka-reassign-partitions", B, "{bootstrap}",
              "--execute", "--reassignment-json-file", str(reorder), "--throttle", "10000000",
              normalise=_log_dirs)
    # Skiff refused the throttle before starting the move: the same move without it
    moved = tool("kafka-reassign-partitions", B, pair.skiff, "--execute",
                 "--reassignment-json-file", str(reorder))
    assert moved.returncode == 0, moved.stdout + moved.stderr
    _until_done(pair, reorder)
    pair.same("reassign.describe.reordered", "kafka-topics", B, "{bootstrap}", "--describe",
              "--topic", T)
    pair.same("election.preferred", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--topic", T, "--partition", "2")
    pair.same("election.describe.after", "kafka-topics", B, "{bootstrap}", "--describe",
              "--topic", T)
    pair.same("election.preferred.all", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "preferred", "--all-topic-partitions",
              normalise=_only_topic)
    pair.same("election.unclean", "kafka-leader-election", B, "{bootstrap}",
              "--election-type", "unclean", "--topic", T, "--partition", "1")
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


def _only_topic(text: str) -> str:
    """An election over all partitions ("... for partitions t-0, u-1" and errors naming one
    partition each): keep what concerns this module's topic; the reference cluster is shared
    with other modules."""
    kept = []
    for line in text.splitlines():
        m = re.match(r"^(.* for partitions? )(.*)$", line)
        if m is None:
            kept.append(line)
            continue
        mine = sorted(x for x in m.group(2).split(", ") if x.startswith(f"{T}-"))
        if mine:
            kept.append(m.group(1) + ", ".join(mine))
    return "\n".join(kept)


def test_share_group_lag_of_partitions_led_by_other_brokers(skiff: Cluster) -> None:
    """kafka-share-groups --describe on three Skiff nodes: the lag of a share-partition led
    by a broker other than the group's coordinator comes from that leader (ListOffsets, as
    Kafka 4.4's coordinator asks), not -1."""
    from confluent_kafka import Producer

    from tests.support.kafka_ref import run_program

    bootstrap, t, g = skiff.bootstrap_servers, "share-lag-t", "share-lag-g"
    # share.version is 2 from the start: the cluster is formatted at the default, 4.4
    for args in (("kafka-topics", B, bootstrap, "--create", "--topic", t, "--partitions", "6",
                  "--replication-factor", "1"),
                 ("kafka-configs", B, bootstrap, "--alter", "--entity-type", "groups",
                  "--entity-name", g, "--add-config", "share.auto.offset.reset=earliest")):
        proc = tool(*args, timeout=120)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    leaders = skiff.wait_for(lambda: (lambda m: m if len(m) == 6 else None)(
        skiff.partition_leaders(t)), 60, "leaders of every partition")
    assert leaders is not None and len(set(leaders.values())) > 1, leaders  # some led away

    def produce(per_partition: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        for part in range(6):
            for i in range(per_partition):
                p.produce(t, value=b"v%d" % i, partition=part)
        assert p.flush(30) == 0

    produce(2)
    proc = run_program("skiff.compat.share.ShareCases", bootstrap, f"drain:{t}:{g}:12:1000",
                       timeout=180)
    drained = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and len(drained[-1]["offsets"]) == 12, proc.stdout[-2000:]
    produce(3)

    seen: list[str] = []

    def lags() -> dict[int, str] | None:
        out = tool("kafka-share-groups", B, bootstrap, "--describe", "--group", g, timeout=60)
        seen[:] = [out.stdout + out.stderr]
        rows = [ln.split() for ln in out.stdout.splitlines() if ln.strip()]
        header = next((r for r in rows if "LAG" in r and "PARTITION" in r), None)
        if header is None:
            return None
        found = {int(d["PARTITION"]): d["LAG"] for d in (
            dict(zip(header, r, strict=False)) for r in rows[rows.index(header) + 1:])
            if d.get("TOPIC") == t}
        return found if found == dict.fromkeys(range(6), "3") else None

    try:
        skiff.wait_for(lags, 60, "every partition's lag is 3 (5 records, 2 delivered)",
                       interval=1.0)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nlast describe:\n{seen[0] if seen else ''}") from None


RESTART_COUNT, RESTART_ACCEPT = 60, 25


def test_share_coordinator_node_killed_loses_no_acknowledgement(skiff: Cluster) -> None:
    """Kafka 4.4's share consumer ACCEPTs 25 of 60 records and leaves the rest unacknowledged;
    the node leading the share-partition's __share_group_state partition (its share
    coordinator) is killed -9. Once another node leads that partition and the killed one is
    back, a new consumer gets the 35 others, each once, and none of the 25. (Last in the
    module: it kills one of the module's nodes.)"""
    from broker.coordinator.partitioning import partition_for
    from tests.support.kafka_ref import run_program

    bootstrap, t, g = skiff.bootstrap_servers, "share-kill-t", "share-kill-g"
    program = "skiff.compat.share.ShareCases"
    # share.version is 2 from the start: the cluster is formatted at the default, 4.4
    proc = run_program(program, bootstrap, f"accept:{t}:{g}:{RESTART_COUNT}:{RESTART_ACCEPT}",
                       timeout=180)
    first = {c["case"]: c for c in (json.loads(x) for x in proc.stdout.splitlines()
                                    if x.startswith("{"))}
    assert proc.returncode == 0 and "accept" in first, proc.stdout[-3000:] + proc.stderr[-2000:]
    accepted = first["accept"]["accepted"]
    assert first["accept"]["commit_errors"] == 0 and len(set(accepted)) == RESTART_ACCEPT

    described = tool("kafka-topics", B, bootstrap, "--describe", "--topic", t, timeout=60)
    topic_id = re.search(r"TopicId:\s*(\S+)", described.stdout)
    assert topic_id, described.stdout + described.stderr
    state_partitions = skiff.partition_leaders("__share_group_state")
    p = partition_for(f"{g}:{topic_id.group(1)}:0", len(state_partitions))
    victim = state_partitions[p]
    assert victim in skiff.broker_ids, state_partitions
    skiff.kill(victim)
    via = next(b for b in skiff.broker_ids if b != victim)
    skiff.wait_for(lambda: skiff.partition_leaders("__share_group_state", via=via).get(p, -1)
                   not in (-1, victim), 60, f"__share_group_state-{p} led by another node")
    skiff.start_node(victim)
    skiff.wait_ready(180.0)

    expected = RESTART_COUNT - RESTART_ACCEPT
    proc = run_program(program, bootstrap, f"drain:{t}:{g}:{expected}:3000", timeout=180)
    second = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and second, proc.stdout[-3000:] + proc.stderr[-2000:]
    drained = second[-1]["offsets"]
    assert not set(drained) & set(accepted), (accepted, drained)
    assert sorted(drained) == sorted(set(range(RESTART_COUNT)) - set(accepted)), \
        (accepted, drained)
