"""The `skiff` admin CLI against a real cluster: 3 dedicated controllers (1-3) and 3 brokers
(4-6), one cluster for the module; broker 7 is formatted but started only when a test
expands the cluster.

Every CLI call is a subprocess (`python -m broker.cli.main`), and its effect is checked in
its output and through a Kafka client (confluent-kafka: metadata, producing, consuming,
consumer groups). The tests run in file order and share the cluster; each uses its own
topics and groups. docs/operations.md names the test that ran each documented command;
with ADMIN_CLUSTER_TRANSCRIPT=<file> every command and its output are appended to that file.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.testing.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERS = [1, 2, 3]
BROKERS = [4, 5, 6]
SPARE = 7

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("admin-cluster"), controllers=3, brokers=4,
                overrides={"offsets.topic.replication.factor": "1",
                           "offsets.topic.num.partitions": "3",
                           "group.initial.rebalance.delay.ms": "0",
                           # leaders move only when a test elects them
                           "auto.leader.rebalance.enable": "false"})
    try:
        c.format()
        for node_id in [*CONTROLLERS, *BROKERS]:
            c.start_node(node_id)
        c.wait_for(lambda: all(c.metadata_brokers(b, timeout=2) == set(BROKERS)
                               for b in BROKERS), 60, "brokers 4-6 registered and unfenced")
        yield c
    finally:
        c.stop()


def skiff(cluster: Cluster, node: int, *args: str,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    p = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args,
         "--bootstrap", cluster.admin_address(node)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    transcript = os.environ.get("ADMIN_CLUSTER_TRANSCRIPT")
    if transcript:
        with open(transcript, "a") as f:
            f.write(f"$ skiff {' '.join(args)}   # node {node}, exit {p.returncode}\n"
                    f"{p.stdout}{p.stderr}\n")
    return p


def ok(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def table(out: str) -> list[dict[str, str]]:
    """A `skiff` table as rows keyed by header (columns are split on 2+ spaces)."""
    import re

    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:(?<=\s\s)|^)\S", head)]
    names = [head[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [{n: ln[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None],
                                                    strict=True)}
            for ln in lines[1:]]


def produce(cluster: Cluster, topic: str, n: int, partition: int = 0,
            timestamp_base_ms: int | None = None) -> None:
    """`n` records k<i>/v<i>; with a base, record i has the timestamp base + 1000 * i."""
    p = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all",
                  "log_level": 0})
    for i in range(n):
        extra = {} if timestamp_base_ms is None else {"timestamp": timestamp_base_ms + 1000 * i}
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition, **extra)
    assert p.flush(20) == 0


def partition_md(cluster: Cluster, broker: int, topic: str, partition: int = 0) -> Any:
    return cluster.metadata(broker).topics[topic].partitions[partition]


def fresh_partition_md(cluster: Cluster, broker: int, topic: str, partition: int = 0) -> Any:
    """Through a new client that knows only `broker` (so its first request goes there, not
    to a stopped broker a long-lived client is connected to)."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": cluster.nodes[broker].bootstrap,
                          "log_level": 0})
    return client.list_topics(timeout=5).topics[topic].partitions[partition]


def consume_all(cluster: Cluster, topic: str, expected: int, partition: int = 0,
                timeout: float = 20) -> list[bytes]:
    c = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": f"read-{topic}",
                  "enable.auto.commit": False, "log_level": 0})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        return values
    finally:
        c.close()


@contextlib.contextmanager
def paused(cluster: Cluster, node: int) -> Iterator[None]:
    cluster.pause(node)
    try:
        yield
    finally:
        cluster.resume(node)


def read_pty(master: int) -> bytes:
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other end is closed
            return seen
        if not chunk:
            return seen
        seen += chunk


# ---- (1) reassignment with progress ----------------------------------------------------


def test_reassign_copies_data_shows_progress_and_removes_the_old_replica(
        cluster: Cluster) -> None:
    import pty

    ok(skiff(cluster, 1, "topics", "create", "moved", "--replica-assignment", "4:5"))
    cluster.wait_for(lambda: partition_md(cluster, 4, "moved").leader == 4, 20, "moved led")
    produce(cluster, "moved", 300)
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with paused(cluster, 6):
        # broker 6 cannot fetch while stopped: the reassignment stays in progress
        waiter = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.main", "partitions", "reassign", "--topic",
             "moved", "--partition", "0", "--replicas", "6,5", "--wait", "--wait-timeout",
             "60", "--bootstrap", cluster.admin_address(2)],
            stdout=subprocess.PIPE, stderr=slave, text=True, env=env, cwd=ROOT)
        os.close(slave)
        try:
            def listed() -> dict[str, str] | None:
                rows = table(ok(skiff(cluster, 5, "partitions", "reassignments")))
                return next((r for r in rows if r["TOPIC"] == "moved"), None)

            # node 5 is a follower: the progress comes from the leader (4)'s admin listener
            row = cluster.wait_for(listed, 20, "the reassignment listed")
            assert row["STATUS"] == "in progress"
            assert row["ADDING"] == "6" and row["REMOVING"] == "4"
            assert row["LEADER LEO"] == "300"
            progress = dict(x.split("@") for x in row["REPLICA@LEO"].split(","))
            assert progress["4"] == "300" and progress["5"] == "300"
            assert int(progress["6"]) < 300
            doc = json.loads(ok(skiff(cluster, 1, "partitions", "reassignments",
                                      "--output", "json")))
            [r] = [r for r in doc["reassignments"] if r["topic"] == "moved"]
            assert r["in_progress"] and r["leader_log_end_offset"] == 300
            # (librdkafka may pick the stopped broker for a metadata request: retried)
            md = cluster.wait_for(lambda: fresh_partition_md(cluster, 5, "moved"), 20,
                                  "metadata")
            assert sorted(md.replicas) == [4, 5, 6] and 6 not in md.isrs
        except BaseException:
            waiter.kill()
            raise
    out, _ = waiter.communicate(timeout=60)
    seen = read_pty(master)
    os.close(master)
    assert waiter.returncode == 0, (out, seen)
    transcript = os.environ.get("ADMIN_CLUSTER_TRANSCRIPT")
    if transcript:
        with open(transcript, "a") as f:
            f.write("$ skiff partitions reassign --topic moved --partition 0 --replicas 6,5 "
                    "--wait   # node 2; the terminal's lines (each \\r as a new line):\n"
                    + seen.decode(errors="replace").replace("\r", "\n") + out + "\n")
    # the live line showed the leader's real offsets while 6 was copying
    assert b"reassigning: 0/1 partitions done; moved-0 leader 4 LEO 300 adding 6@" in seen
    assert b"reassigning: 1/1 partitions done" in seen
    [row] = table(out)
    assert row["REPLICAS"] == "6,5" and row["STATUS"] == "done"
    assert set(row["ISR"].split(",")) == {"5", "6"}
    assert row["LEADER LEO"] == "300"
    progress = dict(x.split("@") for x in row["REPLICA@LEO"].split(","))
    assert progress == {"6": "300", "5": "300"}

    # through the Kafka client: target replicas and ISR, the old replica gone from disk
    def moved() -> Any:
        md = partition_md(cluster, 4, "moved")
        return md if list(md.replicas) == [6, 5] and sorted(md.isrs) == [5, 6] else None

    cluster.wait_for(moved, 20, "metadata shows replicas [6, 5]")
    cluster.wait_for(lambda: not (cluster.nodes[4].directory / "logs" / "moved-0").exists(),
                     20, "broker 4 deleted its replica of moved-0")
    # read everything back from the new replicas: the preferred leader is 6 now
    elected = ok(skiff(cluster, 3, "partitions", "elect-leaders", "--topic", "moved",
                       "--partition", "0"))
    assert table(elected)[0]["LEADER"] == "6"
    cluster.wait_for(lambda: partition_md(cluster, 5, "moved").leader == 6, 20, "6 leads")
    values = consume_all(cluster, "moved", 300)
    assert values == [b"v%d" % i for i in range(300)]


def test_reassign_from_kafka_json_file_listed_then_cancelled(cluster: Cluster,
                                                            tmp_path: Path) -> None:
    ok(skiff(cluster, 4, "topics", "create", "cancelled", "--replica-assignment",
             "5:4,4:5"))
    cluster.wait_for(lambda: partition_md(cluster, 4, "cancelled", 1).leader == 4, 20,
                     "cancelled led")
    produce(cluster, "cancelled", 50, partition=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cancelled", "partition": 1, "replicas": [6, 4], "log_dirs": ["any", "any"]},
    ]}))
    with paused(cluster, 6):
        started = table(ok(skiff(cluster, 5, "partitions", "reassign",
                                 "--reassignment-json-file", str(plan))))
        assert started[0]["STATUS"] == "in progress" and started[0]["ADDING"] == "6"
        rows = table(ok(skiff(cluster, 2, "partitions", "reassignments", "--topic",
                              "cancelled", "--partition", "1")))
        assert [(r["PARTITION"], r["ADDING"], r["REMOVING"]) for r in rows] == \
            [("1", "6", "5")]
        md = cluster.wait_for(lambda: fresh_partition_md(cluster, 4, "cancelled", 1), 20,
                              "metadata")
        assert sorted(md.replicas) == [4, 5, 6]
        cancelled = table(ok(skiff(cluster, 1, "partitions", "reassign",
                                   "--reassignment-json-file", str(plan), "--cancel",
                                   "--wait", "--wait-timeout", "20")))
        assert cancelled[0]["REPLICAS"] == "4,5" and cancelled[0]["STATUS"] == "done"
    assert table(ok(skiff(cluster, 4, "partitions", "reassignments"))) == []
    cluster.wait_for(lambda: list(partition_md(cluster, 5, "cancelled", 1).replicas) == [4, 5],
                     20, "metadata shows the original replicas again")
    assert consume_all(cluster, "cancelled", 50, partition=1) == \
        [b"v%d" % i for i in range(50)]


# ---- (2) group RPCs answered by the group's coordinator ----------------------------------


def _group_coordinated_by_other_than(cluster: Cluster, avoid: int) -> tuple[str, int]:
    """A group id whose __consumer_offsets partition is led by a broker other than `avoid`."""
    from broker.coordinator.partitioning import partition_for
    from broker.group.records import OFFSETS_TOPIC

    parts = cluster.metadata(avoid).topics[OFFSETS_TOPIC].partitions
    for i in range(200):
        gid = f"orders-{i}"
        leader = parts[partition_for(gid, len(parts))].leader
        if leader not in (avoid, -1):
            return gid, leader
    raise AssertionError("no group id maps to another broker")


def _committed(cluster: Cluster, group: str, topic: str, n: int) -> list[int]:
    c = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": group,
                  "log_level": 0})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)
        return [tp.offset for tp in got]
    finally:
        c.close()


def test_group_rpcs_are_answered_by_the_remote_coordinator(cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    ok(skiff(cluster, 4, "topics", "create", "orders", "--partitions", "3",
             "--replication-factor", "2"))
    cluster.wait_for(lambda: all(p.leader >= 0 for p in
                                 cluster.metadata(4).topics["orders"].partitions.values()),
                     20, "orders led")
    t0 = (int(time.time()) - 100) * 1000
    for p in range(3):
        produce(cluster, "orders", 10, partition=p, timestamp_base_ms=t0)
    # __consumer_offsets is created by the first group (this one commits nothing)
    warm = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": "warm-up",
                     "log_level": 0})
    try:
        warm.commit(offsets=[TopicPartition("orders", 0, 1)], asynchronous=False)
    finally:
        warm.close()
    gid, coordinator = _group_coordinated_by_other_than(cluster, avoid=4)

    consumer = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": gid,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "log_level": 0})
    try:
        consumer.subscribe(["orders"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen += 1
        assert seen == 30
        consumer.commit(offsets=[TopicPartition("orders", 0, 10), TopicPartition("orders", 1, 6),
                                 TopicPartition("orders", 2, 4)], asynchronous=False)
        committed = _committed(cluster, gid, "orders", 3)
        assert committed == [10, 6, 4]

        # broker 4 does not coordinate the group: it forwards to the coordinator
        out = ok(skiff(cluster, 4, "groups", "describe", gid))
        head, rest = out.split("\n", 1)
        assert f"State: Stable\tCoordinator: {coordinator}" in head
        rows = table(rest)
        assert [int(r["CURRENT-OFFSET"]) for r in rows] == committed
        # log end offsets come from each partition's leader, wherever it is
        assert [r["LOG-END-OFFSET"] for r in rows] == ["10", "10", "10"]
        assert sum(int(r["LAG"]) for r in rows) == 10
        assert all(r["MEMBER"] != "-" for r in rows)
        # a controller-only node has no coordinator at all: it forwards too
        doc = json.loads(ok(skiff(cluster, 2, "groups", "describe", gid, "-o", "json")))
        assert doc["coordinator_id"] == coordinator and len(doc["members"]) == 1
        listed = {r["GROUP"]: r["STATE"] for r in table(ok(skiff(cluster, 1, "groups",
                                                                  "list")))}
        assert listed[gid] == "Stable" and "warm-up" in listed
        refused = skiff(cluster, 3, "groups", "reset-offsets", "--group", gid, "--topic",
                        "orders", "--to-earliest", "--execute")
        assert refused.returncode == 1 and "active member" in refused.stderr
    finally:
        consumer.close()

    def empty() -> bool:
        return "State: Empty" in ok(skiff(cluster, 5, "groups", "describe", gid))

    cluster.wait_for(empty, 20, "the group is empty after its consumer left", interval=0.2)
    out = ok(skiff(cluster, 1, "groups", "reset-offsets", "--group", gid, "--topic", "orders",
                   "--to-earliest"))
    assert out.rstrip().endswith("(dry run: nothing changed; add --execute to apply)")
    assert [r["NEW-OFFSET"] for r in table(out)[:3]] == ["0", "0", "0"]
    assert _committed(cluster, gid, "orders", 3) == committed  # a dry run changes nothing
    ok(skiff(cluster, 1, "groups", "reset-offsets", "--group", gid, "--topic", "orders",
             "--to-latest", "--execute"))
    assert _committed(cluster, gid, "orders", 3) == [10, 10, 10]
    ok(skiff(cluster, 4, "groups", "reset-offsets", "--group", gid, "--topic", "orders:1",
             "--shift-by", "-4", "--execute"))
    assert _committed(cluster, gid, "orders", 3) == [10, 6, 10]
    # to a time: the first record at or after it, asked of each partition's leader (the
    # coordinator does not lead them all: the others answer Kafka's ListOffsets)
    from datetime import UTC, datetime

    when = datetime.fromtimestamp((t0 + 5500) / 1000, UTC).isoformat()
    out = ok(skiff(cluster, 2, "groups", "reset-offsets", "--group", gid, "--topic", "orders",
                   "--to-datetime", when, "--execute"))
    assert [r["NEW-OFFSET"] for r in table(out)] == ["6", "6", "6"]
    assert _committed(cluster, gid, "orders", 3) == [6, 6, 6]
    leaders = {p.leader for p in cluster.metadata(4).topics["orders"].partitions.values()}
    assert leaders - {coordinator}, "every partition led by the coordinator: nothing remote"
    out = ok(skiff(cluster, 4, "groups", "delete", "--group", gid, "--topic", "orders:0"))
    assert f"Deleted offsets of orders-0 in group {gid}." in out
    assert _committed(cluster, gid, "orders", 3)[0] < 0  # no committed offset any more
    ok(skiff(cluster, 2, "groups", "delete", "--group", gid))
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap(), "log_level": 0})
    groups = admin.list_consumer_groups(request_timeout=10).result()
    assert gid not in {g.group_id for g in groups.valid}
    assert "warm-up" in {g.group_id for g in groups.valid}
    missing = skiff(cluster, 6, "groups", "describe", gid)
    assert missing.returncode == 1 and "no group" in missing.stderr


# ---- (3) cluster and quorum describe ---------------------------------------------------


def cluster_rows(cluster: Cluster, node: int) -> tuple[str, dict[int, dict[str, str]]]:
    out = ok(skiff(cluster, node, "cluster", "describe"))
    head, _, rest = out.partition("\n\n")
    return head, {int(r["BROKER"]): r for r in table(rest)}


def test_cluster_and_quorum_describe_from_brokers_and_controllers(cluster: Cluster) -> None:
    active = cluster.active_controller()
    assert active in CONTROLLERS
    head, rows = cluster_rows(cluster, 4)
    assert f"ControllerId:    {active}" in head
    assert sorted(rows) == BROKERS
    assert all(r["STATE"] == "unfenced" for r in rows.values())
    epochs = {b: r["EPOCH"] for b, r in rows.items()}
    assert all(int(e) >= 0 for e in epochs.values())
    # a controller-only node has the same view
    follower = next(c for c in CONTROLLERS if c != active)
    head2, rows2 = cluster_rows(cluster, follower)
    assert f"ControllerId:    {active}" in head2
    assert {b: r["EPOCH"] for b, r in rows2.items()} == epochs
    assert set(cluster.metadata(4).brokers) == set(BROKERS)

    # the quorum leader is a dedicated controller: brokers and follower controllers ask it.
    # Under CI load an election can move the leadership between two reads, so the leader is
    # read again until every node's answer names the same one (bounded).
    deadline = time.monotonic() + 60
    while True:
        active = cluster.active_controller()
        if active not in CONTROLLERS and time.monotonic() < deadline:
            time.sleep(0.5)  # an election under way: no leader known yet
            continue
        follower = next(c for c in CONTROLLERS if c != active)
        outs = [ok(skiff(cluster, node, "quorum", "describe")) for node in (5, follower, active)]
        doc = json.loads(ok(skiff(cluster, 6, "quorum", "describe", "-o", "json")))
        agreed = all(f"LeaderId:               {active}\n" in out for out in outs)
        if (agreed and doc["leader_id"] == active) or time.monotonic() > deadline:
            break
        time.sleep(1)
    for out in outs:
        assert f"LeaderId:               {active}\n" in out
        assert "CurrentVoters:          [1, 2, 3]\n" in out
        assert "CurrentObservers:       [4, 5, 6]\n" in out
    hw = doc["high_watermark"]
    assert doc["leader_id"] == active and hw > 0
    observers = {o["replica_id"]: o for o in doc["observers"]}
    assert sorted(observers) == BROKERS
    for o in observers.values():
        assert 0 < o["log_end_offset"] <= hw + 1
        assert o["lag"] == max(0, hw - o["log_end_offset"])
        assert o["last_fetch_timestamp_ms"] > 1_700_000_000_000
    voters = {v["replica_id"]: v for v in doc["voters"]}
    assert sorted(voters) == CONTROLLERS and voters[active]["lag"] == 0


# ---- (4) the operations of docs/operations.md --------------------------------------------


def _topic_config(cluster: Cluster, topic: str, key: str) -> Any:
    from confluent_kafka.admin import ConfigResource, ResourceType

    res = ConfigResource(ResourceType.TOPIC, topic)
    [fut] = cluster.admin(4).describe_configs([res]).values()
    return fut.result(timeout=10)[key]


def test_ops_add_modify_delete_topics(cluster: Cluster) -> None:
    out = ok(skiff(cluster, 4, "topics", "create", "ops-events", "--partitions", "2",
                   "--replication-factor", "3", "--config", "retention.ms=3600000"))
    assert "Created topic ops-events" in out
    md = cluster.wait_for(lambda: cluster.metadata(5).topics.get("ops-events"), 20, "created")
    assert len(md.partitions) == 2
    assert all(sorted(p.replicas) == BROKERS for p in md.partitions.values())
    assert _topic_config(cluster, "ops-events", "retention.ms").value == "3600000"

    ok(skiff(cluster, 5, "topics", "alter", "ops-events", "--partitions", "4"))
    cluster.wait_for(lambda: len(cluster.metadata(6).topics["ops-events"].partitions) == 4,
                     20, "4 partitions")
    ok(skiff(cluster, 2, "configs", "set", "--topic", "ops-events", "retention.ms=7200000"))
    assert _topic_config(cluster, "ops-events", "retention.ms").value == "7200000"
    ok(skiff(cluster, 2, "configs", "delete", "--topic", "ops-events", "retention.ms"))
    assert _topic_config(cluster, "ops-events", "retention.ms").is_default
    ok(skiff(cluster, 1, "topics", "delete", "ops-events"))
    cluster.wait_for(lambda: "ops-events" not in cluster.metadata(4).topics, 20, "deleted")


def _broker_states(cluster: Cluster, node: int) -> dict[int, int]:
    resp = cluster.describe_cluster(node, timeout=2)
    return {b.registration.broker_id: b.state for b in resp.brokers}


def test_ops_graceful_shutdown_and_balancing_leadership(cluster: Cluster) -> None:
    import threading

    from broker.admin import pb

    ok(skiff(cluster, 4, "topics", "create", "ops-lead", "--replica-assignment", "5:4,5:6"))
    cluster.wait_for(lambda: all(p.leader == 5 and len(p.isrs) == 2 for p in
                                 cluster.metadata(4).topics["ops-lead"].partitions.values()),
                     20, "5 leads ops-lead with a full ISR")
    for p in range(2):
        produce(cluster, "ops-lead", 20, partition=p)

    # graceful shutdown (SIGTERM): broker 5 hands its leaderships over before it exits
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                state = _broker_states(cluster, 2).get(5)
                if state is not None and (not seen or seen[-1] != state):
                    seen.append(state)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        cluster.wait_for(lambda: seen, 10, "the watcher's first sample")
        assert cluster.terminate(5) == 0
        cluster.wait_for(lambda: _broker_states(cluster, 2).get(5) ==
                         pb.cluster.BROKER_STATE_FENCED, 20, "5 fenced after its shutdown")
    finally:
        stop.set()
        watcher.join()
    # unfenced, then shutting down while its leaderships moved, then fenced (wait_for above)
    assert seen[:2] == [pb.cluster.BROKER_STATE_UNFENCED,
                        pb.cluster.BROKER_STATE_SHUTTING_DOWN], seen
    _, rows = cluster_rows(cluster, 4)
    assert rows[5]["STATE"] == "fenced" and rows[5]["LEADERS"] == "0"
    leaders = {i: p.leader for i, p in cluster.metadata(4).topics["ops-lead"].partitions.items()}
    assert leaders == {0: 4, 1: 6}

    cluster.start_node(5)

    def all_in_sync() -> bool:
        md = cluster.metadata(4)
        return 5 in md.brokers and all(
            sorted(p.replicas) == sorted(p.isrs)
            for t in md.topics.values() for p in t.partitions.values())

    cluster.wait_for(all_in_sync, 30, "5 back in every ISR")
    out = ok(skiff(cluster, 6, "partitions", "elect-leaders", "--all-topic-partitions"))
    rows = {(r["TOPIC"], r["PARTITION"]): r for r in table(out)}
    assert rows[("ops-lead", "0")]["OUTCOME"] == "elected"
    assert rows[("ops-lead", "0")]["LEADER"] == "5"
    cluster.wait_for(lambda: all(p.leader == 5 for p in
                                 cluster.metadata(4).topics["ops-lead"].partitions.values()),
                     20, "5 leads ops-lead again")
    for p in range(2):
        assert consume_all(cluster, "ops-lead", 20, partition=p) == \
            [b"v%d" % i for i in range(20)]


def test_ops_expand_increase_replication_and_decommission(cluster: Cluster,
                                                          tmp_path: Path) -> None:
    from broker.admin import pb

    ok(skiff(cluster, 4, "topics", "create", "ops-grow", "--replica-assignment", "4:5"))
    cluster.wait_for(lambda: partition_md(cluster, 4, "ops-grow").leader == 4, 20, "led")
    produce(cluster, "ops-grow", 100)

    # expanding the cluster: a new broker registers, then partitions are moved onto it
    cluster.start_node(SPARE)
    cluster.wait_for(lambda: _broker_states(cluster, 1).get(SPARE) ==
                     pb.cluster.BROKER_STATE_UNFENCED, 30, "broker 7 registered and unfenced")
    _, rows = cluster_rows(cluster, 1)
    assert rows[SPARE]["STATE"] == "unfenced" and rows[SPARE]["REPLICAS"] == "0"
    assert SPARE in cluster.metadata(4).brokers
    out = ok(skiff(cluster, 4, "partitions", "reassign", "--topic", "ops-grow", "--partition",
                   "0", "--replicas", "7,5", "--wait", "--wait-timeout", "30"))
    assert table(out)[0]["REPLICAS"] == "7,5"
    cluster.wait_for(lambda: list(partition_md(cluster, 4, "ops-grow").replicas) == [7, 5],
                     20, "ops-grow on 7,5")

    # increasing the replication factor: the same partition with one more replica
    out = ok(skiff(cluster, 7, "partitions", "reassign", "--topic", "ops-grow", "--partition",
                   "0", "--replicas", "7,5,6", "--wait", "--wait-timeout", "30"))
    assert set(table(out)[0]["ISR"].split(",")) == {"5", "6", "7"}

    def three() -> bool:
        md = partition_md(cluster, 4, "ops-grow")
        return list(md.replicas) == [7, 5, 6] and sorted(md.isrs) == [5, 6, 7]

    cluster.wait_for(three, 20, "ops-grow with 3 in-sync replicas")

    # decommissioning broker 7: move everything away, then stop it
    plan = tmp_path / "away.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "ops-grow", "partition": 0, "replicas": [4, 5, 6]}]}))
    [row] = table(ok(skiff(cluster, 2, "partitions", "reassign", "--reassignment-json-file",
                           str(plan), "--wait", "--wait-timeout", "30")))
    # the new leader (4) reports every copy at its log end
    assert row["LEADER LEO"] == "100"
    assert dict(x.split("@") for x in row["REPLICA@LEO"].split(",")) == \
        {"4": "100", "5": "100", "6": "100"}
    _, rows = cluster_rows(cluster, 2)
    assert rows[SPARE]["REPLICAS"] == "0" and rows[SPARE]["LEADERS"] == "0"
    assert cluster.terminate(SPARE) == 0
    cluster.wait_for(lambda: _broker_states(cluster, 1).get(SPARE) ==
                     pb.cluster.BROKER_STATE_FENCED, 20, "7 fenced once stopped")
    _, rows = cluster_rows(cluster, 3)
    assert rows[SPARE]["STATE"] == "fenced"
    cluster.wait_for(lambda: SPARE not in cluster.metadata(4).brokers, 20, "7 not listed")
    md = partition_md(cluster, 4, "ops-grow")
    assert list(md.replicas) == [4, 5, 6] and sorted(md.isrs) == [4, 5, 6]
    assert consume_all(cluster, "ops-grow", 100) == [b"v%d" % i for i in range(100)]


def test_killed_broker_shows_fenced_and_comes_back_with_a_new_epoch(cluster: Cluster) -> None:
    from broker.admin import pb

    _, before = cluster_rows(cluster, 4)
    cluster.kill(6)
    cluster.wait_for(lambda: _broker_states(cluster, 1).get(6) ==
                     pb.cluster.BROKER_STATE_FENCED, 20, "6 fenced after its session expired")
    _, rows = cluster_rows(cluster, 5)
    assert rows[6]["STATE"] == "fenced" and rows[6]["EPOCH"] == before[6]["EPOCH"]
    assert rows[4]["STATE"] == rows[5]["STATE"] == "unfenced"
    cluster.wait_for(lambda: set(cluster.metadata(4).brokers) == {4, 5}, 20, "6 unlisted")
    doc = json.loads(ok(skiff(cluster, 2, "quorum", "describe", "-o", "json")))
    assert 6 in {o["replica_id"] for o in doc["observers"]}  # it fetched in this epoch

    cluster.start_node(6)
    cluster.wait_for(lambda: _broker_states(cluster, 1).get(6) ==
                     pb.cluster.BROKER_STATE_UNFENCED, 30, "6 unfenced again")
    _, rows = cluster_rows(cluster, 6)
    assert int(rows[6]["EPOCH"]) > int(before[6]["EPOCH"])
    cluster.wait_for(lambda: set(cluster.metadata(4).brokers) == {4, 5, 6}, 20, "6 listed")
