"""KIP-1331 with Kafka Streams 4.4 (issue 34): StreamsGroupHeartbeat and StreamsGroupDescribe
v1, and StreamsGroupTopologyDescriptionUpdate (93).

tests/java/src/skiff/compat/streams/TopologyDescriptionApp.java runs one Streams instance
with group.protocol=streams (a global store, a join, a count with a store, a sink) and asks
Admin.describeStreamsGroups with includeTopologyDescription until the status is AVAILABLE.
With `group.streams.topology.description.plugin.class` set to Kafka's
InMemoryTopologyDescriptionPlugin, on a Skiff node and on a Kafka 4.4 node: the broker asks
the member in a v1 heartbeat answer, the member pushes its description, and Admin gets the
same AVAILABLE description, assignor and `kafka-streams-groups --describe --topology` output
from both. Without the plugin (Kafka's default) both answer NOT_STORED.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.kafka.tools_support import ok
from tests.support.kafka_ref import (
    TOOL_JVM_OPTS,
    KafkaNode,
    java_program_classpath,
    started_kafka,
    tool,
)
from tests.support.node import SkiffNode, started_node

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.streams.TopologyDescriptionApp"
PLUGIN = "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"
DESCRIBED = re.compile(r"^DESCRIBED (.*)$", re.M)
FAILED = "DESCRIBE FAILED"  # e.g. a broker without StreamsGroupDescribe v1


@pytest.fixture(scope="module")
def skiff_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = started_node(tmp_path_factory.mktemp("skiff-plugin"), config_env={
        "SKIFF_GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS": "0",
        "SKIFF_GROUP_STREAMS_TOPOLOGY_DESCRIPTION_PLUGIN_CLASS": PLUGIN})
    try:
        ok("kafka-features", "--bootstrap-server", n.bootstrap, "upgrade", "--feature",
           "streams.version=1")
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def kafka_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    node = started_kafka(tmp_path_factory.mktemp("kafka-plugin"), overrides={
        "group.streams.topology.description.plugin.class": PLUGIN,
        "group.streams.initial.rebalance.delay.ms": "0"})
    try:
        yield node
    finally:
        node.close()


def run_app(bootstrap: str, work: Path, wait_s: int = 30) -> tuple[str, str]:
    """(the app's DESCRIBED line, kafka-streams-groups --describe --topology) for one run of
    the application, under fixed names so the two brokers' answers compare equal."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topics = ["td-input", "td-output", "td-names"]
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        try:
            f.result(30)
        except Exception as exc:  # already there from the other test of this module
            assert "TOPIC_ALREADY_EXISTS" in str(exc), exc
    app_id = f"td-app-{uuid.uuid4().hex[:6]}"
    log = work / f"{app_id}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-cp", java_program_classpath(), PROGRAM, bootstrap,
             app_id, *topics, str(work / f"state-{app_id}"), str(wait_s)],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while not DESCRIBED.search(text := log.read_text(errors="replace")):
                assert FAILED not in text, text[-3000:]
                assert proc.poll() is None and time.monotonic() < deadline, \
                    log.read_text(errors="replace")[-6000:]
                time.sleep(0.3)
            described = tool("kafka-streams-groups", "--bootstrap-server", bootstrap,
                             "--describe", "--group", app_id, "--topology")
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    line = DESCRIBED.findall(log.read_text(errors="replace"))[-1]
    # the repartition topic is named after the application id
    return line.replace(app_id, "APP"), (described.stdout + described.stderr).replace(app_id,
                                                                                    "APP")


def test_pushed_description_is_described_as_kafka_does(
        skiff_plugin: SkiffNode, kafka_plugin: KafkaNode, tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        on_kafka = pool.submit(run_app, kafka_plugin.bootstrap, tmp_path)
        skiff_line, skiff_tool = run_app(skiff_plugin.bootstrap, tmp_path)
        kafka_line, kafka_tool = on_kafka.result()
    assert kafka_line.startswith("status=AVAILABLE assignor=sticky description="), kafka_line
    assert "KSTREAM-SOURCE" in kafka_line and "name-counts" in kafka_line
    assert skiff_line == kafka_line
    assert "KSTREAM-SOURCE" in kafka_tool, kafka_tool
    assert skiff_tool == kafka_tool


def test_without_a_plugin_nothing_is_stored(kafka_ref: KafkaNode, tmp_path: Path) -> None:
    """Kafka 4.4's default: the broker never asks; Admin gets NOT_STORED from both."""
    with ThreadPoolExecutor(2) as pool:
        on_kafka = pool.submit(run_app, kafka_ref.bootstrap, tmp_path, 0)
        node = started_node(tmp_path / "skiff", config_env={
            "SKIFF_GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS": "0"})
        try:
            ok("kafka-features", "--bootstrap-server", node.bootstrap, "upgrade", "--feature",
               "streams.version=1")
            skiff_line, _ = run_app(node.bootstrap, tmp_path, 0)
        finally:
            node.close()
        kafka_line, _ = on_kafka.result()
    assert kafka_line == "status=NOT_STORED assignor=sticky description=none"
    assert skiff_line == kafka_line
