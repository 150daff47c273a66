"""Runs a Skiff network server in its own process, for integration tests.

As a program (``python -m tests.integration.serverproc``) it serves ApiVersions on one
listener with a trivial node and prints one JSON line ``{"host": ..., "port": ...}`` on stdout
once it listens; SIGTERM stops it. `ServerProcess` starts and stops it from a test. The node
assembled by broker/node.py (``skiff dev``) can replace it: `ServerProcess` only needs a
command that prints that line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[2]


class TrivialNode:
    """Stands in for broker.node.Node: the ApiVersions handler does not use it."""


async def _serve(args: argparse.Namespace) -> None:
    from broker.handlers import broker_dispatcher
    from broker.protocol.api import BROKER_APIS
    from broker.server import ListenerSpec, Server, ServerConfig

    config = ServerConfig(
        socket_request_max_bytes=args.socket_request_max_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
    )
    server = Server(
        TrivialNode(),
        [ListenerSpec("PLAINTEXT", args.host, args.port, BROKER_APIS, broker_dispatcher())],
        config,
    )
    await server.start()
    host, port = server.address("PLAINTEXT")
    print(json.dumps({"host": host, "port": port}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--socket-request-max-bytes", type=int, default=104857600)
    p.add_argument("--connections-max-idle-ms", type=int, default=600000)
    args = p.parse_args(argv)
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(_serve(args))


class ServerProcess:
    """A server process started by a test; stopped (SIGTERM, then SIGKILL) by PID only."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        start_timeout_s: float = 20,
        log_path: Path | None = None,
    ) -> None:
        self.command = list(command or [sys.executable, "-m", "tests.integration.serverproc"])
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self.port = 0

    def __enter__(self) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with contextlib.ExitStack() as stack:
            stderr = (
                stack.enter_context(open(self.log_path, "wb"))
                if self.log_path is not None
                else subprocess.DEVNULL
            )
            self.proc = subprocess.Popen(
                self.command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr
            )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"server did not start: {self.command}")
            if sel.select(remaining):
                ch = os.read(self.proc.stdout.fileno(), 1)
                if not ch:
                    continue
                line += ch
        sel.close()
        info = json.loads(line)
        self.host, self.port = info["host"], int(info["port"])
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    main()
