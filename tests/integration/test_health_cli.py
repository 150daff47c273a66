"""`skiff health`: exit 0 when the node's grpc.health.v1 service answers SERVING, 1 when it
answers NOT_SERVING (a node still starting) or cannot be reached; the same for
`--service skiff.readiness`, what the brokers' readiness probe asks."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.node import REPO_ROOT, SkiffNode, free_port

pytestmark = pytest.mark.timeout(120)


def health(address: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "health", "--bootstrap", address,
         "--timeout", "2", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)


def test_health_serving_on_a_ready_node(own_skiff_node: SkiffNode) -> None:
    if not isinstance(own_skiff_node, SkiffNode):
        pytest.skip("needs a node this test starts (SKIFF_TEST_BOOTSTRAP is set)")
    address = f"127.0.0.1:{own_skiff_node.admin_port}"
    deadline = time.monotonic() + 20  # the health service flips right after readiness
    result = health(address)
    while result.returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        result = health(address)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "SERVING"
    quiet = health(address, "--quiet")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    # a lone broker leads each of its partitions: ready (the readiness probe's service)
    ready = health(address, "--service", "skiff.readiness")
    while ready.returncode != 0 and time.monotonic() < deadline + 20:
        time.sleep(0.2)
        ready = health(address, "--service", "skiff.readiness")
    assert (ready.returncode, ready.stdout.strip()) == (0, "SERVING"), ready.stderr


def test_health_unreachable_exits_1() -> None:
    result = health(f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "is not healthy: UNAVAILABLE" in result.stderr


def test_health_not_serving_while_the_node_starts(tmp_path: Path) -> None:
    """A node whose second voter never comes has its admin server up but is not ready."""
    port, cport, aport, absent = free_port(), free_port(), free_port(), free_port()
    log_path = tmp_path / "node.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.main", "dev", "--data", str(tmp_path / "d"),
             "--port", str(port), "--controller-port", str(cport), "--admin-port", str(aport),
             "--override", f"controller.quorum.voters=1@127.0.0.1:{cport},2@127.0.0.1:{absent}"],
            cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while b"admin_listening" not in log_path.read_bytes():
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            result = health(f"127.0.0.1:{aport}")
            assert result.returncode == 1, result.stdout
            assert "NOT_SERVING" in result.stderr
            result = health(f"127.0.0.1:{aport}", "--service", "skiff.readiness")
            assert result.returncode == 1, result.stdout
            assert "NOT_SERVING" in result.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
