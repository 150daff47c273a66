"""Ports for the nodes tests and benchmarks start on 127.0.0.1.

Asking the kernel for port 0 hands out a port of the ephemeral range, which the kernel
also gives every outgoing connection as its local port: between the test closing its probe
socket and the node binding the port, a client connection of any process may take it
(CI, 2026-12-03: "cannot bind the metrics listener ... Address already in use"). So ports
come from below the ephemeral range, each pytest-xdist worker from a slice of its own, and
each process walks its slice from a random start, never handing out a port twice and
checking that each one binds.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import threading
from pathlib import Path

_LOWEST = 10_000
_SLICES = 12  # xdist workers 0-7; processes outside xdist pick one of the last four
_lock = threading.Lock()
_handed_out: set[int] = set()
_cursor: int | None = None


@functools.cache  # read once per process, not for every port
def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _slice() -> range | None:
    """This process's ports, or None when the ephemeral range leaves too few below it."""
    top = _ephemeral_floor()
    size = (top - _LOWEST) // _SLICES
    if size < 200:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) < _SLICES - 4:
        index = int(worker[2:])
    else:  # the suite's part-2 streams run side by side outside xdist
        index = _SLICES - 4 + os.getpid() % 4
    start = _LOWEST + index * size
    return range(start, start + size)


def _binds(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    """A port on 127.0.0.1 that binds now and that this process has not handed out before."""
    global _cursor
    ports = _slice()
    if ports is None:
        return _kernel_port()
    with _lock:
        if _cursor is None:
            _cursor = random.randrange(len(ports))
        for _ in range(len(ports)):
            port = ports[_cursor % len(ports)]
            _cursor += 1
            if port not in _handed_out and _binds(port):
                _handed_out.add(port)
                return port
        _handed_out.clear()  # every port of the slice was handed out: start over
    return _kernel_port()


def free_ports(n: int) -> list[int]:
    """`n` distinct ports, as free_port()."""
    return [free_port() for _ in range(n)]
