"""KIP-714 with a real client: librdkafka (confluent-kafka) pushes its telemetry to a node
that requests every metric, and the metrics appear on the node's endpoint with the
client's labels. (That a default node requests nothing is a unit test of the store.)"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(120)


class TelemetryNode(SkiffNode):
    def command(self) -> list[str]:
        return [*super().command(), "--override", "client.telemetry.metrics=*",
                "--override", "client.telemetry.push.interval.ms=500"]


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = TelemetryNode(tmp_path_factory.mktemp("telemetry-node"))
    n.start()
    try:
        n.wait_ready()
        yield n
    finally:
        n.close()


def scrape(node: SkiffNode) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                timeout=10) as resp:
        return resp.read().decode()


def test_librdkafka_pushes_and_its_metrics_are_exported(node: SkiffNode) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": "telemetry-app",
                         "log_level": 3})
    for _ in range(50):
        producer.produce("telemetry-t", b"v" * 50)
    assert producer.flush(15) == 0
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline:
        producer.poll(0.2)
        text = scrape(node)
        if "org_apache_kafka_producer_" in text and 'client_id="telemetry-app"' in text:
            break
    lines = [line for line in text.splitlines()
             if line.startswith("org_apache_kafka_producer_")]
    assert lines, text[-2000:]
    assert all('client_id="telemetry-app"' in line and "client_instance_id=" in line
               for line in lines)
    assert "skiff_client_telemetry_clients 1.0" in text
    del producer  # librdkafka sends a final push with terminating=true

