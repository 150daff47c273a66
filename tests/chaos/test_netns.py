"""The test network itself: hosts reach each other through the bridge, a blocked pair
does not (one direction at a time), healing restores it, and nothing of it shows in the
root namespace or outlives destroy()."""

from __future__ import annotations

import subprocess
import sys

from tests.chaos.netns import TestNetwork, list_namespaces, unavailable_reason
from tests.support.requires import require_tool

SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{addr}", 9000)); s.listen()
print("up", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""
CLIENT = """
import socket, sys
try:
    with socket.create_connection(("{addr}", 9000), timeout=0.5) as c:
        sys.exit(0 if c.recv(2) == b"hi" else 2)
except OSError:
    sys.exit(1)
"""


def reaches(net: TestNetwork, src: str, dst: str) -> bool:
    code = subprocess.run([*net.hosts[src].exec_prefix(), sys.executable, "-c",
                           CLIENT.format(addr=net.hosts[dst].address)], timeout=10).returncode
    assert code in (0, 1), code
    return code == 0


def root_sees_test_subnet() -> bool:
    """Whether the root namespace has an address or a route on 10.213.0.0/24 (other jobs
    on the machine may add links of their own meanwhile, so links are not compared)."""
    out = [subprocess.run(args, capture_output=True, text=True, check=True).stdout
           for args in (["ip", "-o", "addr"], ["ip", "route"])]
    return any("10.213.0." in text for text in out)


def test_blocks_heals_and_leaves_the_root_namespace_alone() -> None:
    reason = unavailable_reason()
    require_tool("netns", reason or "", available=reason is None)
    assert not root_sees_test_subnet()
    net = TestNetwork.create(tag="selftest")
    servers: list[subprocess.Popen[bytes]] = []
    try:
        for name, octet in (("a", 21), ("b", 22), ("c", 23)):
            net.add_host(name, octet)
        for name in ("b", "c"):
            proc = subprocess.Popen([*net.hosts[name].exec_prefix(), sys.executable, "-c",
                                     SERVER.format(addr=net.hosts[name].address)],
                                    stdout=subprocess.PIPE)
            servers.append(proc)
            assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        assert not root_sees_test_subnet()
        assert reaches(net, "a", "b") and reaches(net, "a", "c")
        net.set_blocked({("a", "b")})          # a -> b dropped: no handshake either way
        assert not reaches(net, "a", "b") and reaches(net, "a", "c")
        net.partition([["a", "c"], ["b"]])
        assert not reaches(net, "c", "b") and reaches(net, "a", "c")
        net.heal()
        assert reaches(net, "a", "b") and reaches(net, "c", "b")
    finally:
        for proc in servers:
            proc.kill()
            proc.wait(10)
        net.destroy()
    assert not [n for n in list_namespaces() if n.startswith(net.prefix)]
    assert not root_sees_test_subnet()
