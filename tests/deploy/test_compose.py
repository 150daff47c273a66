"""deploy/compose: the 3 controllers + 3 brokers file comes up under podman-compose, a
replication-factor-3 topic takes acks=all writes, a broker container is killed (SIGKILL)
and started again, another is replaced on an empty volume (docs/deploy.md's procedure),
and nothing acknowledged is lost: every acknowledged record is read back, and with the
two other brokers then killed the replaced broker leads every partition and its logs hold
every acknowledged record."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.protocol.kafka_uuid import random_kafka_uuid
from broker.testing import engine
from broker.testing.engine import REPO_ROOT, podman
from tests.deploy.test_image import produce, read_partitions
from tests.support.requires import require_tool

pytestmark = pytest.mark.timeout(900)

COMPOSE_DIR = REPO_ROOT / "deploy" / "compose"
NODES = ["controller-1", "controller-2", "controller-3", "broker-1", "broker-2", "broker-3"]


class Compose:
    def __init__(self, file: Path, project: str, env: dict[str, str]) -> None:
        self.file, self.project = file, project
        self.env = {**os.environ, **env}

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["podman-compose", "-p", self.project, "-f", str(self.file), *args],
            capture_output=True, text=True, timeout=timeout, env=self.env)
        if result.returncode != 0:
            raise RuntimeError(f"podman-compose {' '.join(args)}: {result.returncode}\n"
                               f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"  # podman-compose's naming

    def replace(self, service: str, volume: str) -> None:
        """A broker whose disk is lost: container and volume gone, the service started again
        (it formats the new volume with the cluster's id and rejoins under its node id)."""
        engine.remove(self.container(service))
        podman("volume", "rm", "-f", volume)
        self.run("up", "-d", service)

    def wait_healthy(self, services: list[str], timeout: float = 240) -> None:
        """Until each service's own HEALTHCHECK (`podman healthcheck run`) passes."""
        deadline = time.monotonic() + timeout
        pending = list(services)
        while pending and time.monotonic() < deadline:
            for service in list(pending):
                check = podman("healthcheck", "run", self.container(service), check=False,
                               timeout=60)
                if check.returncode == 0:
                    pending.remove(service)
            if pending:
                time.sleep(1)
        if pending:
            logs = "\n".join(f"--- {s}\n{engine.container_logs(self.container(s), 30)}"
                             for s in pending)
            raise TimeoutError(f"not healthy after {timeout:.0f}s: {pending}\n{logs}")


@pytest.fixture
def cluster(skiff_image: str) -> Iterator[tuple[Compose, list[int]]]:
    require_tool("podman-compose", "podman-compose is not installed (tests/run.sh installs it)")
    ports = engine.free_ports(3)
    project = f"skiff{uuid.uuid4().hex[:8]}"
    compose = Compose(COMPOSE_DIR / "cluster.yml", project, {
        "SKIFF_IMAGE": skiff_image, "SKIFF_CLUSTER_ID": random_kafka_uuid(),
        **{f"BROKER_{i + 1}_PORT": str(p) for i, p in enumerate(ports)}})
    try:
        compose.run("up", "-d")
        yield compose, ports
    finally:
        try:
            compose.run("down", "-v", timeout=300)
        finally:
            engine.remove(*(compose.container(s) for s in NODES))
            for s in NODES:
                podman("volume", "rm", "-f", f"{project}_{s}", check=False)
            podman("network", "rm", "-f", f"{project}_default", check=False)


def wait_full_isr(admin: AdminClient, topic: str, replicas: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            desc = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
            last = [[n.id for n in p.isr] for p in desc.partitions]
            if all(len(isr) == replicas for isr in last):
                return
        except Exception as exc:  # a broker still starting: ask again
            last = repr(exc)
        time.sleep(1)
    raise TimeoutError(f"{topic} ISR not full after {timeout:.0f}s: {last}")


def test_compose_cluster_keeps_acked_records_across_broker_kill_and_replacement(
        cluster: tuple[Compose, list[int]]) -> None:
    compose, ports = cluster
    compose.wait_healthy(NODES)
    bootstrap = ",".join(f"localhost:{p}" for p in ports)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                            config={"min.insync.replicas": "2"})])
    futures[topic].result(60)
    wait_full_isr(admin, topic, 3)

    acked = produce(bootstrap, topic, 300)
    victim = compose.container("broker-2")
    podman("kill", "--signal", "KILL", victim)
    acked += produce(bootstrap, topic, 300, "b")  # two of three replicas: min.insync.replicas=2
    podman("start", victim)
    compose.wait_healthy(["broker-2"])
    wait_full_isr(admin, topic, 3)
    acked += produce(bootstrap, topic, 100, "c")

    # a failed broker replaced on an empty volume copies every partition back
    compose.replace("broker-3", f"{compose.project}_broker-3")
    compose.wait_healthy(["broker-3"])
    wait_full_isr(admin, topic, 3)
    acked += produce(bootstrap, topic, 100, "d")
    # RF=3 with min.insync.replicas=2 promises to survive one broker; for the replaced
    # broker to be the one left, it must be in every ISR when the other two go
    wait_full_isr(admin, topic, 3)

    got = read_partitions(bootstrap, topic, 3, len(acked))
    missing = set(acked) - set(got)
    assert not missing, (f"{len(missing)} acknowledged records not read, e.g. "
                         f"{sorted(missing)[:5]}")

    # with the two others gone, the replaced broker leads every partition and its logs hold
    # every acknowledged record (below min.insync.replicas its high watermark waits, as in
    # Kafka 4's KIP-966, so this reads its log end offsets rather than the records)
    for service in ("broker-1", "broker-2"):
        podman("kill", "--signal", "KILL", compose.container(service))
    described, ends = "", 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        described = podman("exec", compose.container("broker-3"), "skiff", "topics",
                           "describe", topic, check=False).stdout
        rows = [line.split() for line in described.splitlines() if line[:1].isdigit()]
        if len(rows) == 3 and all(r[1] == "6" and r[-1].isdigit() for r in rows):
            ends = sum(int(r[-1]) for r in rows)
            if ends == len(acked):
                break
        time.sleep(1)
    assert ends == len(acked), f"{ends} records in the logs, {len(acked)} acked\n{described}"
    assert len(got) == len(set(got)) == len(acked)  # idempotent producer: no duplicates
