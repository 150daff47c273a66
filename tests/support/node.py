"""The tests' side of broker/testing/node.py: what it provides, plus `ExternalBroker`, a
broker someone else started (the SKIFF_TEST_BOOTSTRAP environment variable), which cannot be
stopped or restarted, so tests that need that skip."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import pytest

from broker.config import NodeConfig, build_config
from broker.metadata.storage import format_storage
from broker.node import data_dir_overrides
from broker.testing.node import (
    EXTERNAL_ENV,
    READY_TIMEOUT_S,
    REPO_ROOT,
    STOP_TIMEOUT_S,
    NodeT,
    SkiffNode,
    admin_answers,
    free_port,
    ready,
    started_node,
    tcp_connects,
)
from broker.testing.ports import free_ports

__all__ = [
    "EXTERNAL_ENV",
    "READY_TIMEOUT_S",
    "REPO_ROOT",
    "STOP_TIMEOUT_S",
    "ExternalBroker",
    "NodeT",
    "SkiffNode",
    "admin_answers",
    "external_bootstrap",
    "formatted_inprocess_config",
    "free_port",
    "ready",
    "started_node",
    "tcp_connects",
]


class ExternalBroker:
    """A broker this test run did not start: usable, but not stoppable or restartable."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.data_dir: Path | None = None
        pid = os.environ.get("SKIFF_TEST_BROKER_PID")
        self.pid: int | None = int(pid) if pid else None

    @property
    def reason(self) -> str:
        return (f"{EXTERNAL_ENV}={self.bootstrap}: an external broker cannot be "
                "stopped, killed or restarted by the tests")

    def start(self) -> None:
        pytest.skip(self.reason)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        pytest.skip(self.reason)

    def kill(self) -> int:
        pytest.skip(self.reason)

    def close(self) -> None:
        pass

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        host, _, port = self.bootstrap.rpartition(":")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if tcp_connects(host, int(port)) and admin_answers(self.bootstrap, timeout=5):
                return
            time.sleep(0.2)
        raise TimeoutError(f"external broker {self.bootstrap} not ready after {timeout:.0f}s")

    def log_tail(self, lines: int = 60) -> str:
        return f"(external broker {self.bootstrap}: no log)"


def external_bootstrap() -> str | None:
    value = os.environ.get(EXTERNAL_ENV, "").strip()
    return value or None


def formatted_inprocess_config(data_dir: Path, **overrides: str) -> tuple[NodeConfig, int]:
    """A combined node's config under `data_dir` on free ports, its storage formatted, for a
    `broker.node.Node` run in the test's own event loop; and the client listener's port."""
    port, controller_port = free_ports(2)
    cfg = build_config({**data_dir_overrides(data_dir, port, controller_port), **overrides},
                       warn=lambda m: None)
    format_storage(cfg, "MkU3OEVBNTcwNTJENDM2Qg", out=io.StringIO())
    return cfg, port
