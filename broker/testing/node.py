"""Real broker processes for the tests and the benchmarks.

`SkiffNode` runs `python -m broker.cli.main dev` in its own data directory on free loopback
ports and can be stopped (SIGTERM), killed (SIGKILL) and started again on the same data
directory and ports.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, TypeVar

from broker.config.properties import env_key
from broker.node.shards import WORKERS_KEY
from broker.testing.ports import free_port as free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# The tests' external-broker variable: a node reads every SKIFF_* variable as configuration,
# so its children must not inherit it.
EXTERNAL_ENV = "SKIFF_TEST_BOOTSTRAP"
# `--workers` for every SkiffNode whose config_env leaves skiff.broker.workers alone:
# tests/run.sh sets 2, so the suites run their nodes as brokers of two workers where
# `skiff dev`'s own default on a 2-CPU machine is one process.
DEV_WORKERS_ENV = "SKIFFTESTS_DEV_WORKERS"  # not SKIFF_*: no node reads it as a key
WORKERS_ENV_KEY = env_key(WORKERS_KEY)


def tcp_connects(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def admin_answers(bootstrap: str, timeout: float) -> bool:
    """True when librdkafka's AdminClient gets a Metadata answer naming at least one broker."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception:
        return False
    return len(md.brokers) > 0


class SkiffNode:
    """One `skiff dev` process; restartable on the same data dir and ports."""

    def __init__(self, data_dir: Path, port: int | None = None,
                 controller_port: int | None = None,
                 config_env: dict[str, str] | None = None,
                 release_version: str | None = None) -> None:
        """`config_env`: broker configs as SKIFF_<KEY> environment variables;
        `release_version`: the metadata.version the first start formats at (default the
        latest)."""
        self.data_dir = Path(data_dir)
        self.release_version = release_version
        self.config_env = dict(config_env or {})
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.admin_port = free_port()
        while self.admin_port in (self.port, self.controller_port):
            self.admin_port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port in (self.port, self.controller_port, self.admin_port):
            self.metrics_port = free_port()
        self.log_path = self.data_dir / "skiff-node.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("node is not running")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "broker.cli.main", "dev",
                "--data", str(self.data_dir),
                "--port", str(self.port),
                "--controller-port", str(self.controller_port),
                "--admin-port", str(self.admin_port),
                "--metrics-port", str(self.metrics_port),
                *(["--release-version", self.release_version]
                  if self.release_version is not None and self.starts == 0 else []),
                *self._workers_args()]

    def _workers_args(self) -> list[str]:
        workers = os.environ.get(DEV_WORKERS_ENV)
        if not workers or WORKERS_ENV_KEY in self.config_env:
            return []
        return ["--workers", workers]

    def start(self) -> None:
        if self.running:
            raise RuntimeError(f"node pid {self.pid} is already running")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT)
        env.pop(EXTERNAL_ENV, None)
        env.update(self.config_env)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        self._log.write(f"\n=== start #{self.starts + 1}: {' '.join(self.command())}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            self.command(), cwd=REPO_ROOT, env=env,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.starts += 1

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until a TCP connect succeeds and librdkafka's AdminClient lists topics, bounded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise RuntimeError(
                    f"skiff node exited with {code} before it was ready\n{self.log_tail()}")
            if tcp_connects("127.0.0.1", self.port):
                left = max(0.5, min(5.0, deadline - time.monotonic()))
                if admin_answers(self.bootstrap, timeout=left):
                    return
            time.sleep(0.1)
        raise TimeoutError(
            f"skiff node on {self.bootstrap} not ready after {timeout:.0f}s\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        """Send `sig` and wait for the process to exit; returns its exit status."""
        proc = self._require_proc()
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            self._reap()
            raise TimeoutError(
                f"skiff node pid {proc.pid} ignored signal {sig} for {timeout:.0f}s"
                f"\n{self.log_tail()}") from None
        self._reap()
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL, timeout=10)

    def close(self) -> None:
        """Teardown: end our process if it still runs (SIGTERM, then SIGKILL)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._reap()

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no node log)"
        tail = text.splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path} ---\n" + "\n".join(tail)

    def _require_proc(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("node was never started")
        return self._proc

    def _reap(self) -> None:
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


NodeT = TypeVar("NodeT", bound=SkiffNode)


def ready(node: NodeT) -> NodeT:
    """`node` started and ready; closed again if it does not get ready."""
    node.start()
    try:
        node.wait_ready()
    except BaseException:
        node.close()
        raise
    return node


def started_node(data_dir: Path, config_env: dict[str, str] | None = None) -> SkiffNode:
    """A SkiffNode in `data_dir`, started and ready."""
    return ready(SkiffNode(data_dir, config_env=config_env))
