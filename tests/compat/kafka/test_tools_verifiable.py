"""Kafka's system-test clients against Skiff (issue 30): kafka-verifiable-producer and
kafka-verifiable-consumer (JSON events on stdout) on a 3-node Skiff cluster, across a kill -9
of the node leading the partition and its restart. Every record the producer saw
acknowledged (acks=all) must be consumed afterwards; duplicates are counted and reported.

The cluster: three combined nodes (broker and controller each), the topic at replication
factor 3 with min.insync.replicas=2, so an acknowledged record is on two nodes at least."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster
from tests.compat.kafka.tools_support import ok
from tests.support.kafka_ref import TOOL_JVM_OPTS, TOOLS, kafka_classpath

pytestmark = pytest.mark.timeout(900)
TOPIC = "verifiable"
MESSAGES = 4000
THROUGHPUT = 200  # records/s: the run spans the kill and the restart
READY_S = 180.0


class JsonTool:
    """One of Kafka's verifiable clients as a background process; its JSON events
    collected from stdout by a thread. Stopped by its own PID."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-cp", kafka_classpath(), TOOLS[name], *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    continue

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e.get("name") == name]

    def wait(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"not within {timeout:.0f}s: {what}; "
                                   f"exit={self.proc.poll()} events={len(self.events)}")
            time.sleep(0.2)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the tools close their client on SIGTERM
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._log.close()
        return int(self.proc.returncode)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("verifiable"), controllers=3, combined=True)
    try:
        c.start(timeout=READY_S)
        yield c
    finally:
        c.stop()


def test_no_acknowledged_record_lost_across_a_leader_kill(cluster: Cluster,
                                                          tmp_path: Path) -> None:
    ok("kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic",
       TOPIC, "--partitions", "2", "--replication-factor", "3", "--config",
       "min.insync.replicas=2")
    producer = JsonTool("kafka-verifiable-producer", [
        "--bootstrap-server", cluster.bootstrap_servers, "--topic", TOPIC,
        "--max-messages", str(MESSAGES), "--throughput", str(THROUGHPUT), "--acks", "-1"],
        tmp_path / "producer.log")
    killed = -1
    try:
        producer.wait(lambda: len(producer.named("producer_send_success")) >= MESSAGES // 5,
                      120, "a fifth of the records acknowledged")
        leaders = cluster.partition_leaders(TOPIC)
        killed = leaders[0]
        assert cluster.kill(killed) == -signal.SIGKILL
        before_restart = len(producer.named("producer_send_success"))
        time.sleep(3.0)
        cluster.start_node(killed)
        cluster.wait_ready(READY_S)
        producer.wait(lambda: producer.proc.poll() is not None, 600,
                      "the producer sending every record")
    finally:
        producer.stop()
    acked = producer.named("producer_send_success")
    errors = producer.named("producer_send_error")
    assert producer.named("shutdown_complete"), "the producer did not finish"
    assert len(acked) + len(errors) == MESSAGES
    assert len(acked) > before_restart, "nothing was acknowledged after the kill"
    acked_values = {str(e["value"]) for e in acked}

    consumer = JsonTool("kafka-verifiable-consumer", [
        "--bootstrap-server", cluster.bootstrap_servers, "--topic", TOPIC, "--group-id",
        f"verifiable-{time.time_ns()}", "--reset-policy", "earliest", "--verbose"],
        tmp_path / "consumer.log")
    try:
        def seen() -> set[str]:
            return {str(e["value"]) for e in consumer.named("record_data")}

        consumer.wait(lambda: acked_values <= seen(), 180, "every acknowledged value consumed")
        time.sleep(2.0)  # anything written but not acknowledged comes too
    finally:
        consumer.stop()
    consumed = Counter(str(e["value"]) for e in consumer.named("record_data"))
    lost = acked_values - set(consumed)
    duplicates = {v: n for v, n in consumed.items() if n > 1}
    offsets = Counter((e["partition"], e["offset"]) for e in consumer.named("record_data"))
    print(f"verifiable: {len(acked)} acknowledged, {len(errors)} send errors, "
          f"{len(consumed)} distinct values consumed, {len(duplicates)} duplicated values, "
          f"{len(set(consumed) - acked_values)} unacknowledged values in the log, "
          f"killed node {killed}; send errors by exception: "
          f"{dict(Counter(str(e.get('exception')) for e in errors))}")
    assert not lost, f"{len(lost)} acknowledged records lost: {sorted(lost)[:20]}"
    # an offset is read once by one consumer: a duplicate value is a second write
    assert max(offsets.values()) == 1
    # the producer is idempotent by default (Kafka 3+): a retried batch is not written twice
    assert not duplicates, f"duplicated values: {list(duplicates.items())[:20]}"
    assert consumer.named("partitions_assigned")
