"""The Kafka 4.4 reference itself: its jars resolve, its node and cluster start, its tools run.

Every test in tests/compat/kafka builds on these fixtures; this module fails first and
clearly when the reference cannot be had (Java, Maven, Maven Central).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.kafka_ref import KAFKA_VERSION, KafkaCluster, KafkaNode, tool


def test_tools_report_kafka_4_4() -> None:
    proc = tool("kafka-topics", "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(KAFKA_VERSION), proc.stdout


def test_reference_node_serves_clients(kafka_ref: KafkaNode) -> None:
    md = AdminClient({"bootstrap.servers": kafka_ref.bootstrap}).list_topics(timeout=30)
    assert [b.port for b in md.brokers.values()] == [kafka_ref.port]
    created = tool("kafka-topics", "--bootstrap-server", kafka_ref.bootstrap,
                   "--create", "--topic", "reference-smoke", "--partitions", "2")
    assert created.returncode == 0, created.stderr
    listed = tool("kafka-topics", "--bootstrap-server", kafka_ref.bootstrap, "--list")
    assert "reference-smoke" in listed.stdout.split()


@pytest.mark.timeout(600)  # the cluster may start here: up to 240 s on a loaded machine
def test_reference_cluster_has_three_voters(kafka_ref_cluster: KafkaCluster) -> None:
    proc = tool("kafka-metadata-quorum", "--bootstrap-server", kafka_ref_cluster.bootstrap,
                "describe", "--status")
    assert proc.returncode == 0, proc.stderr
    voters_line = next(line for line in proc.stdout.splitlines()
                       if line.startswith("CurrentVoters"))
    assert voters_line.count('"id"') == 3, voters_line


def test_unreachable_bootstrap_fails_with_kafkas_error(tmp_path: Path) -> None:
    short = tmp_path / "short.properties"
    short.write_text("default.api.timeout.ms=3000\nrequest.timeout.ms=2000\n")
    proc = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--list",
                "--command-config", str(short), timeout=120)
    assert proc.returncode == 1
    assert "Timed out waiting for a node assignment. Call: listTopics" in proc.stdout + proc.stderr


def test_wrong_option_fails_with_kafkas_error() -> None:
    proc = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--frobnicate")
    assert proc.returncode == 1
    assert "frobnicate is not a recognized option" in proc.stdout + proc.stderr
