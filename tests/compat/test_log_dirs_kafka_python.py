"""JBOD and ListConfigResources with a real client that has them: kafka-python 3.x's
KafkaAdminClient.describe_log_dirs (Skiff offers DescribeLogDirs v5), alter_replica_log_dirs
(AlterReplicaLogDirs v2) and list_config_resources (ListConfigResources v1), against a
`skiff dev` node with two log dirs, while its KafkaProducer writes with acks=all.

The same node shows cordoned.log.dirs (KIP-1066) with Kafka 4.4's kafka-configs and
kafka-features (and side by side with a Kafka 4.4 node with two log dirs, which must print
the same): refused below metadata.version 4.3-IV0, then new partitions avoid the
cordoned directory and, all directories cordoned, topic creation fails as in Kafka (placed
by the controller: INVALID_REPLICATION_FACTOR; a manual assignment naming the broker:
INVALID_REPLICA_ASSIGNMENT)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import NoError

from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(240)
WAIT_S = 60.0
TOPIC = "jbod-kp"


@pytest.fixture(scope="module")
def jbod_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SkiffNode, Path, Path]]:
    tmp_path = tmp_path_factory.mktemp("jbod")
    a, b = (tmp_path / "node" / "a").resolve(), (tmp_path / "node" / "b").resolve()
    # formatted at 4.1, below the cordoned-log-dirs gate (4.3-IV0) that a test upgrades past
    # one process: Kafka's placement order over the dirs is a broker's, and a broker of
    # several workers spreads each process's partitions on its own (test_broker_workers.py)
    node = SkiffNode(tmp_path / "node", config_env={"SKIFF_LOG_DIRS": f"{a},{b}",
                                                    "SKIFF_SKIFF_BROKER_WORKERS": "1"},
                     release_version="4.1")
    node.start()
    try:
        node.wait_ready()
        yield node, a, b
    finally:
        node.close()


def where(admin: KafkaAdminClient) -> dict[tuple[int, bool], str]:
    """(partition, is_future) of TOPIC -> log dir, from describe_log_dirs."""
    [answer] = admin.describe_log_dirs(brokers=[1])
    return {(p["partition_index"], p["is_future_key"]): d["log_dir"]
            for d in answer["log_dirs"] for t in d["topics"] if t["name"] == TOPIC
            for p in t["partitions"]}


def test_describe_move_and_list_with_kafka_python(jbod_node: Any) -> None:
    node, a, b = jbod_node
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap,
                             request_timeout_ms=int(WAIT_S * 1000))
    try:
        # the raw map: kafka-python 3.0.12's api_versions() raises ValueError on an API key
        # its enum lacks (93, StreamsGroupTopologyDescriptionUpdate), against Kafka 4.4 too
        versions = admin.get_broker_version_data(1).api_versions
        assert max(versions[35]) == 5 and max(versions[34]) == 2 and max(versions[74]) == 1
        admin.create_topics([NewTopic(TOPIC, 2, 1)], timeout_ms=int(WAIT_S * 1000))
        [answer] = admin.describe_log_dirs(brokers=[1])
        dirs = {d["log_dir"]: d for d in answer["log_dirs"]}
        assert set(dirs) == {str(a), str(b)}
        assert all(d["error_code"] == 0 and d["total_bytes"] > 0 for d in dirs.values())
        assert where(admin) == {(0, False): str(a), (1, False): str(b)}

        acked: list[bytes] = []
        stop = threading.Event()
        producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", linger_ms=2)

        def write() -> None:
            i = 0
            while not stop.is_set():
                value = b"v%07d" % i
                producer.send(TOPIC, value=value, partition=0).add_callback(
                    lambda _md, v=value: acked.append(v))
                i += 1
                if i % 200 == 0:
                    producer.flush(timeout=WAIT_S)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + WAIT_S
        while len(acked) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        result = admin.alter_replica_log_dirs({(TOPIC, 0, 1): str(b)})
        assert list(result.values()) == [NoError]
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and where(admin) != {(0, False): str(b),
                                                                (1, False): str(b)}:
            time.sleep(0.2)
        assert where(admin) == {(0, False): str(b), (1, False): str(b)}
        moved_at = len(acked)
        deadline = time.monotonic() + WAIT_S
        while len(acked) < moved_at + 1000 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        writer.join(WAIT_S)
        producer.flush(timeout=WAIT_S)
        producer.close(timeout=5)
        assert len(acked) >= moved_at + 1000

        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=100)
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        got: set[bytes] = set()
        want = set(acked)
        deadline = time.monotonic() + WAIT_S
        while not want <= got and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=200).values():
                got.update(m.value for m in msgs)
        consumer.close()
        assert want <= got, f"{len(want - got)} acknowledged records missing"

        listed = admin.list_config_resources()
        assert TOPIC in listed["topic"] and listed["broker"] == ["1"]
        assert admin.list_config_resources(["TOPIC"]) == {"topic": sorted(listed["topic"])}
    finally:
        admin.close()


def test_cordoned_log_dirs_with_kafka_configs(jbod_node: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import InvalidReplicationFactorError

    from tests.support.kafka_ref import tool

    node, a, b = jbod_node
    common = ["--bootstrap-server", node.bootstrap, "--entity-type", "brokers",
              "--entity-name", "1", "--alter", "--add-config"]
    gated = tool("kafka-configs", *common, f"cordoned.log.dirs={a}")
    assert gated.returncode != 0
    assert ("The cordoned.log.dirs configuration value cannot be set because it requires "
            "metadata.version >= 4.3-IV0") in gated.stdout + gated.stderr
    up = tool("kafka-features", "--bootstrap-server", node.bootstrap, "upgrade",
              "--metadata", "4.3-IV0")
    assert up.returncode == 0, up.stdout + up.stderr
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap,
                             request_timeout_ms=int(WAIT_S * 1000))
    try:
        bad = tool("kafka-configs", *common, "cordoned.log.dirs=/nowhere")
        assert bad.returncode != 0
        assert ("InvalidRequestException: requirement failed: All entries in cordoned.log.dirs "
                "must be present in log.dirs or log.dir. Missing entries : /nowhere"
                ) in bad.stdout + bad.stderr
        done = tool("kafka-configs", *common, f"cordoned.log.dirs={a}")
        assert done.returncode == 0, done.stdout + done.stderr
        [answer] = admin.describe_log_dirs(brokers=[1])
        assert {d["log_dir"]: d["is_cordoned"] for d in answer["log_dirs"]} == {
            str(a): True, str(b): False}
        admin.create_topics([NewTopic("cordon-avoid", 4, 1)], timeout_ms=int(WAIT_S * 1000))
        [answer] = admin.describe_log_dirs(brokers=[1])
        placed = {p["partition_index"]: d["log_dir"] for d in answer["log_dirs"]
                  for t in d["topics"] if t["name"] == "cordon-avoid" for p in t["partitions"]}
        assert placed == {i: str(b) for i in range(4)}
        moved = admin.alter_replica_log_dirs({("cordon-avoid", 0, 1): str(a)})
        assert [e.errno for e in moved.values()] == [39]  # INVALID_REPLICA_ASSIGNMENT
        # every directory cordoned: the controller learns it from the next heartbeat
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                            configs={"cordoned.log.dirs": "*"})],
                            raise_on_unknown=False)
        deadline = time.monotonic() + WAIT_S
        refused = None
        n = 0
        while refused is None and time.monotonic() < deadline:
            n += 1
            try:
                admin.create_topics([NewTopic(f"cordon-all-{n}", 1, 1)],
                                    timeout_ms=int(WAIT_S * 1000))
            except InvalidReplicationFactorError as exc:
                refused = exc
            else:
                time.sleep(0.3)
        assert refused is not None
        assert "Unable to replicate the partition 1 time(s): All brokers are currently " \
               "fenced, or have all their log directories cordoned." in str(refused)
        manual = tool("kafka-topics", "--bootstrap-server", node.bootstrap, "--create",
                      "--topic", "cordon-manual", "--replica-assignment", "1")
        assert manual.returncode != 0
        assert ("The manual partition assignment includes broker 1, but all its log "
                "directories are cordoned.") in manual.stdout + manual.stderr
        default = tool("kafka-configs", "--bootstrap-server", node.bootstrap, "--entity-type",
                       "brokers", "--entity-default", "--alter", "--add-config",
                       f"cordoned.log.dirs={a}")
        assert ("InvalidRequestException: Cannot update these configs at default cluster "
                "level, broker id must be specified: [cordoned.log.dirs]"
                ) in default.stdout + default.stderr
    finally:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={
            "cordoned.log.dirs": ("DELETE", None)})], raise_on_unknown=False)
        admin.close()


def test_cordoned_log_dirs_as_kafka(jbod_node: Any,
                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    """The cordoning steps side by side with a Kafka 4.4 node with two log dirs of its own:
    an unknown dir refused, one dir cordoned (and described), new partitions in the other,
    every dir cordoned (placement and a manual assignment refused), the cluster default
    refused; kafka-configs and kafka-topics print the same, each side's dirs and address
    replaced. Kafka's node starts at metadata.version 4.4-IV2; the gate below 4.3-IV0 is
    compared in tests/compat/kafka/test_tools_gates.py (both nodes formatted at 4.2-IV1)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.kafka_ref import started_kafka, tool

    node, a, b = jbod_node
    kdir = tmp_path_factory.mktemp("cordon-kafka")
    ka, kb = (kdir / "logs" / "a").resolve(), (kdir / "logs" / "b").resolve()
    kafka = started_kafka(kdir / "node", overrides={"log.dirs": f"{ka},{kb}"})
    up = tool("kafka-features", "--bootstrap-server", node.bootstrap, "upgrade", "--metadata",
              "4.3-IV0")  # already there when the test above ran first
    assert up.returncode == 0 or "4.3-IV0" in up.stdout + up.stderr, up.stdout + up.stderr
    sides = ((node.bootstrap, a, b), (kafka.bootstrap, ka, kb))

    def run(*args: str) -> Any:
        def one(side: tuple[str, Path, Path]) -> tuple[int, str]:
            bootstrap, first, second = side
            argv = [x.replace("{bootstrap}", bootstrap).replace("{a}", str(first))
                    .replace("{b}", str(second)) for x in args]
            out = tool(*argv)
            text = (out.stdout + out.stderr).replace(str(first), "<a>") \
                .replace(str(second), "<b>").replace(bootstrap, "<bootstrap>")
            lines = [" ".join(line.split()) for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("at ")]
            return out.returncode, "\n".join(lines)
        with ThreadPoolExecutor(2) as pool:
            skiff, ref = pool.map(one, sides)
        assert skiff == ref, (args, skiff, ref)
        return ref

    broker = ("kafka-configs", "--bootstrap-server", "{bootstrap}", "--entity-type", "brokers",
              "--entity-name", "1")
    try:
        code, text = run(*broker, "--alter", "--add-config", "cordoned.log.dirs=/nowhere")
        assert code != 0 and "Missing entries : /nowhere" in text, text
        code, text = run(*broker, "--alter", "--add-config", "cordoned.log.dirs={a}")
        assert code == 0, text
        code, text = run(*broker, "--describe")
        assert "cordoned.log.dirs=<a> sensitive=false" in text, text

        def placed(side: tuple[str, Path, Path]) -> None:
            """New partitions land in the uncordoned dir once the controller knows (from
            the broker's next heartbeat): a topic per try, until one is placed there. Until
            that heartbeat the controller may still hold the test above's "every dir
            cordoned" (its cleanup is a config change too), and refuses the topic."""
            from kafka.errors import InvalidReplicationFactorError

            bootstrap, _, second = side
            admin = KafkaAdminClient(bootstrap_servers=bootstrap,
                                     request_timeout_ms=int(WAIT_S * 1000))
            try:
                deadline = time.monotonic() + WAIT_S
                for n in range(1000):
                    name = f"cordon-side-{n}"
                    try:
                        admin.create_topics([NewTopic(name, 4, 1)],
                                            timeout_ms=int(WAIT_S * 1000))
                    except InvalidReplicationFactorError as exc:
                        assert "log directories cordoned" in str(exc), str(exc)
                        assert time.monotonic() < deadline, f"{bootstrap}: {exc}"
                        time.sleep(0.5)
                        continue
                    [answer] = admin.describe_log_dirs(brokers=[1])
                    dirs = {d["log_dir"] for d in answer["log_dirs"] for t in d["topics"]
                            if t["name"] == name}
                    if dirs == {str(second)}:
                        return
                    assert time.monotonic() < deadline, f"{bootstrap}: {name} in {dirs}"
                    time.sleep(0.5)
            finally:
                admin.close()

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(placed, sides))
        code, text = run(*broker, "--alter", "--add-config", "cordoned.log.dirs=*")
        assert code == 0, text

        def refused(side: tuple[str, Path, Path]) -> None:
            bootstrap = side[0]
            deadline = time.monotonic() + WAIT_S
            while "cordoned" not in (out := tool(
                    "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
                    f"cordon-all-{time.monotonic_ns()}")).stdout + out.stderr:
                assert time.monotonic() < deadline, out.stdout + out.stderr
                time.sleep(0.5)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(refused, sides))
        code, text = run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create",
                         "--topic", "cordon-all", "--partitions", "2")
        assert code != 0 and "have all their log directories cordoned" in text, text
        code, text = run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--create",
                         "--topic", "cordon-manual-both", "--replica-assignment", "1")
        assert code != 0 and "but all its log directories are cordoned" in text, text
        code, text = run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--entity-type",
                         "brokers", "--entity-default", "--alter", "--add-config",
                         "cordoned.log.dirs={a}")
        assert code != 0 and "broker id must be specified" in text, text
    finally:
        for bootstrap, _, _ in sides:
            tool("kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                 "--entity-name", "1", "--alter", "--delete-config", "cordoned.log.dirs")
        kafka.close()
