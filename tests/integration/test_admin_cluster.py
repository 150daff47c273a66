"""The `skiff` admin CLI against a real cluster: 3 dedicated controllers (1-3) and 3 brokers
(4-6), one cluster for the module.

Every CLI call is a subprocess (`python -m broker.cli.main`), and its effect is checked in
its output and through a Kafka client (confluent-kafka: metadata, producing, consuming,
consumer groups). The tests run in file order and share the cluster; each uses its own
topics and groups. docs/operations.md names the test that ran each documented command.
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

from tests.support.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERS = [1, 2, 3]
BROKERS = [4, 5, 6]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("admin-cluster"), controllers=3, brokers=3,
                overrides={"offsets.topic.replication.factor": "1",
                           "offsets.topic.num.partitions": "3",
                           "group.initial.rebalance.delay.ms": "0"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def skiff(cluster: Cluster, node: int, *args: str,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args,
         "--bootstrap", cluster.admin_address(node)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


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


def produce(cluster: Cluster, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all",
                  "log_level": 0})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    assert p.flush(20) == 0


def partition_md(cluster: Cluster, broker: int, topic: str, partition: int = 0) -> Any:
    return cluster.metadata(broker).topics[topic].partitions[partition]


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
            md = cluster.wait_for(lambda: partition_md(cluster, 5, "moved"), 20, "metadata")
            assert sorted(md.replicas) == [4, 5, 6] and 6 not in md.isrs
        except BaseException:
            waiter.kill()
            raise
    out, _ = waiter.communicate(timeout=60)
    seen = read_pty(master)
    os.close(master)
    assert waiter.returncode == 0, (out, seen)
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
        md = cluster.wait_for(lambda: partition_md(cluster, 4, "cancelled", 1), 20, "metadata")
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
    from broker.group.hashing import OFFSETS_TOPIC, partition_for

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
    for p in range(3):
        produce(cluster, "orders", 10, partition=p)
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
    out = ok(skiff(cluster, 4, "groups", "delete", "--group", gid, "--topic", "orders:0"))
    assert "Deleted offsets of 1 partition(s)" in out
    assert _committed(cluster, gid, "orders", 3)[0] < 0  # no committed offset any more
    ok(skiff(cluster, 2, "groups", "delete", "--group", gid))
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap(), "log_level": 0})
    groups = admin.list_consumer_groups(request_timeout=10).result()
    assert gid not in {g.group_id for g in groups.valid}
    assert "warm-up" in {g.group_id for g in groups.valid}
    missing = skiff(cluster, 6, "groups", "describe", gid)
    assert missing.returncode == 1 and "no group" in missing.stderr
