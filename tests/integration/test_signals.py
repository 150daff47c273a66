"""SIGTERM stops a node even while it is still starting (here: it never gets a quorum)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.node import REPO_ROOT, free_port

pytestmark = pytest.mark.timeout(120)


def test_sigterm_during_startup_exits_cleanly(tmp_path: Path) -> None:
    port, cport, aport, absent = free_port(), free_port(), free_port(), free_port()
    log_path = tmp_path / "node.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.main", "dev", "--data", str(tmp_path / "d"),
             "--port", str(port), "--controller-port", str(cport), "--admin-port", str(aport),
             "--metrics-port", str(free_port()),
             "--override",
             f"controller.quorum.voters=1@127.0.0.1:{cport},2@127.0.0.1:{absent}"],
            cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while b"raft.leader" not in log_path.read_bytes() and b"listener started" not in \
                    log_path.read_bytes():
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            time.sleep(1.0)  # well inside startup: no quorum, so never unfenced
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, log_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    text = log_path.read_text()
    assert "stop_requested_during_startup" in text
    assert "node_stopped" in text
