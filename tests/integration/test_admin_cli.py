"""The `skiff` admin verbs as subprocesses against real nodes: a `skiff dev` node
(tests/support/node.py SkiffNode), and a cluster of three `skiff server start` processes
(broker/testing/cluster.py) for what needs several leaders. Results are checked with Kafka
clients (kafka-python, confluent-kafka) where the CLI's own word is not enough.

The same verbs against an in-process admin server, with the node's state checked directly:
tests/unit/admin/test_cli_inprocess.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing.cluster import Cluster
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
GROUP_ENV = {"SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}


def skiff(admin: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    return subprocess.run([sys.executable, "-m", "broker.cli.main", *args, "--bootstrap", admin],
                          capture_output=True, text=True, timeout=120, env=env, input=stdin,
                          cwd=ROOT)


def ok(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def failed(p: subprocess.CompletedProcess[str], code: int) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skiff: error: "), p.stderr
    return lines[0]


def admin_of(node: SkiffNode) -> str:
    return f"127.0.0.1:{node.admin_port}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = SkiffNode(tmp_path_factory.mktemp("admin-cli-node"), config_env=GROUP_ENV)
    n.start()
    try:
        n.wait_ready(timeout=120)
        yield n
    finally:
        n.close()


def test_cli_against_a_real_node_checked_with_a_kafka_client(node: SkiffNode) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    admin = admin_of(node)

    def cli(*args: str, stdin: str | None = None) -> str:
        return ok(skiff(admin, *args, stdin=stdin))

    out = cli("cluster", "describe")
    assert f"ADMIN://{admin}" in out and "unfenced" in out
    assert "LeaderId:               1" in cli("quorum", "describe")
    cli("topics", "create", "real", "--partitions", "2", "--config", "retention.ms=600000")
    assert cli("produce", "--topic", "real", "--partition", "1",
               stdin="one\ntwo\n").split() == ["real-1@0", "real-1@1"]
    cli("configs", "set", "--topic", "real", "cleanup.policy=delete,compact")
    cli("topics", "alter", "real", "--partitions", "3")
    kadmin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        assert "real" in kadmin.list_topics()
        [desc] = kadmin.describe_topics(["real"])
        assert len(desc["partitions"]) == 3
    finally:
        kadmin.close()
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, consumer_timeout_ms=3000)
    try:
        consumer.assign([TopicPartition("real", 1)])
        consumer.seek_to_beginning()
        assert [m.value for m in consumer] == [b"one", b"two"]
    finally:
        consumer.close()
    cli("topics", "delete", "real")
    kadmin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        assert "real" not in kadmin.list_topics()
    finally:
        kadmin.close()


def test_refusals_exit_1_usage_errors_exit_2(node: SkiffNode) -> None:
    """Issue 31: a refusal of the server (an invalid replication factor, Kafka's
    INVALID_REPLICATION_FACTOR) is exit 1; exit 2 is the command line's own usage error."""
    admin = admin_of(node)
    line = failed(skiff(admin, "topics", "create", "rf-x", "--replication-factor", "5"), 1)
    assert "replication factor" in line.lower() and "[INVALID_ARGUMENT]" in line, line
    failed(skiff(admin, "topics", "create", "rf-x", "--replica-assignment", "1:x"), 2)
    p = skiff(admin, "topics", "create")
    assert p.returncode == 2 and "usage:" in p.stderr


def test_deleting_an_unknown_topic_says_it_does_not_exist(node: SkiffNode) -> None:
    admin = admin_of(node)
    described = failed(skiff(admin, "topics", "describe", "nosuch"), 1)
    deleted = failed(skiff(admin, "topics", "delete", "nosuch"), 1)
    assert "topic 'nosuch' does not exist" in described
    assert "topic 'nosuch' does not exist" in deleted, deleted


def test_bootstrap_at_the_kafka_port_is_named_and_the_node_logs_it(node: SkiffNode) -> None:
    """`--bootstrap` given the Kafka listener: the CLI says so, and the node logs the
    HTTP/2 preface it received on a Kafka listener in one line and closes that connection
    (a raw preface here, and the CLI's own gRPC connections)."""
    mark = len(node.log_path.read_bytes())
    line = failed(skiff(node.bootstrap, "topics", "list"), 3)
    assert (f"{node.bootstrap} is a Kafka listener; the admin API is on admin.listeners "
            "(9094 by default)") in line, line
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        s.settimeout(10)
        assert s.recv(100) == b""  # closed by the node
    deadline = time.monotonic() + 10
    while True:
        lines = [x for x in node.log_path.read_bytes()[mark:].decode(errors="replace")
                 .splitlines() if "http2_on_kafka_listener" in x]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert lines, node.log_tail()
    assert "the gRPC admin API (skiff --bootstrap) is on admin.listeners" in lines[-1]
    assert not [x for x in node.log_path.read_bytes()[mark:].decode(errors="replace")
                .splitlines() if "request frame refused" in x]
    # the node still serves Kafka clients
    from confluent_kafka.admin import AdminClient

    assert AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=20).brokers


def _consume(bootstrap: str, group: str, topic: str, want: int, *,
             commit: bool) -> list[int]:
    """Offsets a confluent-kafka consumer of `group` reads until it has `want` (bounded)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "latest", "enable.auto.commit": False,
                  "session.timeout.ms": 10000})
    try:
        c.subscribe([topic])
        got: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < want:
            assert time.monotonic() < deadline, f"consumed only {got}"
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.offset())
        if commit:
            c.commit(asynchronous=False)
        return got
    finally:
        c.close()


def test_groups_cli_against_a_real_node_with_a_kafka_consumer(tmp_path: Path) -> None:
    """groups list/describe/reset-offsets/delete with a confluent-kafka consumer; the group
    is named the same way by every verb; a partition with no committed offset shows `-`
    (as kafka-consumer-groups); and the node's shutdown logs one line for the group
    coordinator, not one per __consumer_offsets partition."""
    from confluent_kafka import Consumer, TopicPartition

    n = SkiffNode(tmp_path / "node", config_env=GROUP_ENV)
    n.start()
    try:
        n.wait_ready(timeout=120)
        admin, bootstrap = admin_of(n), n.bootstrap

        def cli(*args: str, stdin: str | None = None) -> str:
            return ok(skiff(admin, *args, stdin=stdin))

        cli("topics", "create", "gt", "--partitions", "1")
        cli("produce", "--topic", "gt", stdin="a\nb\nc\nd\ne\n")
        # "latest" would skip these five: the group has no offset yet, so reset first
        cli("groups", "reset-offsets", "G", "--topic", "gt", "--to-earliest", "--execute")
        assert _consume(bootstrap, "G", "gt", 5, commit=True) == [0, 1, 2, 3, 4]
        cli("produce", "--topic", "gt", stdin="f\ng\nh\n")

        rows = [line.split() for line in cli("groups", "list").splitlines()[1:]]
        assert ["G", "Empty", "classic", "consumer"] in rows
        out = cli("groups", "describe", "G")
        assert "State: Empty" in out
        assert ["gt", "0", "5", "8", "3", "-"] in [line.split() for line in out.splitlines()]
        assert cli("groups", "describe", "--group", "G") == out  # Kafka's flag works too

        dry = cli("groups", "reset-offsets", "--group", "G", "--topic", "gt", "--to-earliest")
        assert ["gt", "0", "0"] in [line.split() for line in dry.splitlines()]
        assert "dry run" in dry
        cli("groups", "reset-offsets", "G", "--topic", "gt", "--to-earliest", "--execute")
        assert _consume(bootstrap, "G", "gt", 8, commit=False) == list(range(8))

        # a member owns two partitions, an offset is committed for one only
        cli("topics", "create", "g2", "--partitions", "2")
        cli("produce", "--topic", "g2", "--partition", "0", stdin="x\ny\n")
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "H",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            c.subscribe(["g2"])
            deadline = time.monotonic() + 60
            while len(c.assignment()) < 2:
                assert time.monotonic() < deadline, c.assignment()
                c.poll(0.2)
            c.commit(offsets=[TopicPartition("g2", 0, 1)], asynchronous=False)
            table = [line.split() for line in cli("groups", "describe", "H").splitlines()]
        finally:
            c.close()
        by_partition = {r[1]: r for r in table if r and r[0] == "g2"}
        assert by_partition["0"][2:5] == ["1", "2", "1"], table
        assert by_partition["1"][2:5] == ["-", "0", "-"], table

        assert cli("groups", "delete", "G").strip() == "Deleted group G."
        gone = skiff(admin, "groups", "describe", "G")
        assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr, gone

        mark = len(n.log_path.read_bytes())
        assert n.stop() == 0
        shutdown = n.log_path.read_bytes()[mark:].decode(errors="replace").splitlines()
        unloaded = [x for x in shutdown if "group_coordinator_unloaded" in x]
        assert len(unloaded) == 1, unloaded
        assert "count=50" in unloaded[0] or '"count": 50' in unloaded[0], unloaded
    finally:
        n.close()


def test_topics_describe_asks_every_leader_for_its_offsets(tmp_path: Path) -> None:
    """Three combined nodes, one partition led by each: `topics describe` on any node shows
    log start, high watermark and log end of every partition, not only its own."""
    from confluent_kafka import Producer

    c = Cluster(tmp_path, controllers=3, combined=True)
    try:
        c.start(timeout=180)
        admin = c.admin_address(1)
        ok(skiff(admin, "topics", "create", "spread", "--replica-assignment", "1,2,3"))
        p = Producer({"bootstrap.servers": c.bootstrap_servers})
        for partition, count in ((0, 1), (1, 2), (2, 3)):
            for _ in range(count):
                p.produce("spread", b"v", partition=partition)
        assert p.flush(30) == 0
        out = ok(skiff(admin, "topics", "describe", "spread"))
        rows = {r[0]: r for r in (line.split() for line in out.splitlines()[2:]) if r}
        # PARTITION LEADER LEADER-EPOCH REPLICAS ISR ELR OFFLINE ADDING REMOVING LOG-START
        # HIGH-WATERMARK LOG-END
        assert {k: (r[1], r[-3:]) for k, r in rows.items()} == {
            "0": ("1", ["0", "1", "1"]), "1": ("2", ["0", "2", "2"]),
            "2": ("3", ["0", "3", "3"])}, out
    finally:
        c.stop()
