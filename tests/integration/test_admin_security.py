"""The admin plane reached from another host, as from the host of a container through a
published port (docs/deploy.md, issue 31): real `skiff dev` nodes in one network namespace
with their admin listener on its address, the `skiff` CLI run in a second namespace, so the
node sees a caller that is not on loopback.

    unauthenticated, the image's policy (loopback)    UNAUTHENTICATED, pointing at the docs
    TLS + a SCRAM user (`skiff users add`)             --ssl-ca --username --password
    TLS + a client certificate                         --ssl-ca --ssl-cert --ssl-key
    SKIFF_ADMIN_ALLOW_UNAUTHENTICATED=all (dev only)   no credentials needed; warned at start

Three nodes (plaintext with `all`, TLS, TLS requiring client certificates) start together,
once for the module. Every process is started here and stopped by its PID; the namespaces
are deleted at the end (no nftables needed: no faults here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.testing.tls import Pki, add_server_certificate, have_openssl, make_pki
from tests.chaos.netns import remove_stale
from tests.support.requires import require_tool

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
READY_S = 120.0


@dataclass(frozen=True)
class Host:
    netns: str
    address: str

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]


class TwoHosts:
    """Two network namespaces joined by one veth pair (10.213.9.11 "node", .12 "client"):
    nothing is added to the root namespace. Names start `skp<pid>-` as the chaos network's
    do, so tests/chaos/netns.remove_stale() clears them after a killed run."""

    def __init__(self) -> None:
        prefix = f"skp{os.getpid()}-adm"
        self.hosts = {"node": Host(f"{prefix}-node", "10.213.9.11"),
                      "client": Host(f"{prefix}-client", "10.213.9.12")}
        self.made: list[str] = []

    @staticmethod
    def unavailable() -> str | None:
        if os.geteuid() != 0:
            return "network namespaces need root (tests/run.sh runs as root)"
        if subprocess.run(["ip", "netns", "list"], capture_output=True,
                          timeout=20).returncode != 0:
            return "`ip netns` does not work here (apt-get install iproute2)"
        return None

    def create(self) -> None:
        remove_stale()
        node, client = self.hosts["node"], self.hosts["client"]
        for h in (node, client):
            _ip("netns", "add", h.netns)
            self.made.append(h.netns)
            _ip("-n", h.netns, "link", "set", "lo", "up")
        _ip("-n", node.netns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
            "netns", client.netns)
        for h in (node, client):
            _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            _ip("-n", h.netns, "link", "set", "eth0", "up")

    def destroy(self) -> None:
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)
        self.made.clear()


def _ip(*args: str) -> None:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, f"ip {' '.join(args)}: {p.stderr}"


@dataclass
class RemoteNode:
    name: str
    port: int           # Kafka listener (127.0.0.1 in the node's namespace)
    admin: str          # admin listener on the namespace's address
    proc: subprocess.Popen[bytes]
    log_path: Path


def _start(net: TwoHosts, tmp: Path, name: str, port: int, env: dict[str, str],
           overrides: dict[str, str]) -> RemoteNode:
    host = net.hosts["node"]
    admin = f"{host.address}:{port + 2}"
    log_path = tmp / f"{name}.log"
    args = [a for k, v in {"admin.listeners": admin, **overrides}.items()
            for a in ("--override", f"{k}={v}")]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*host.exec_prefix(), sys.executable, "-m", "broker.cli.main", "dev",
             "--data", str(tmp / name), "--port", str(port), "--controller-port",
             str(port + 1), "--admin-port", str(port + 2), "--metrics-port", "0", *args],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return RemoteNode(name, port, admin, proc, log_path)


def _wait_ready(nodes: list[RemoteNode]) -> None:
    deadline = time.monotonic() + READY_S
    for n in nodes:
        while b"skiff_ready" not in n.log_path.read_bytes():
            assert n.proc.poll() is None, n.log_path.read_text()
            assert time.monotonic() < deadline, n.log_path.read_text()[-3000:]
            time.sleep(0.2)


def _stop(nodes: list[RemoteNode]) -> None:
    for n in nodes:
        if n.proc.poll() is None:
            n.proc.terminate()
    for n in nodes:
        try:
            n.proc.wait(30)
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait(10)


@dataclass
class Setup:
    net: TwoHosts
    pki: Pki
    open_node: RemoteNode     # plaintext, admin.allow.unauthenticated=all (by SKIFF_ env)
    tls_node: RemoteNode      # TLS, the image's loopback policy
    mtls_node: RemoteNode     # TLS, client certificates required


@pytest.fixture(scope="module", name="s")
def setup_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    why = TwoHosts.unavailable()
    require_tool("netns", why or "", available=why is None)
    require_tool("openssl", "openssl is not installed (tests/run.sh installs it)",
                 available=have_openssl())
    tmp = tmp_path_factory.mktemp("admin-remote")
    pki = make_pki(tmp / "pki")
    net = TwoHosts()
    nodes: list[RemoteNode] = []
    try:
        net.create()
        node_host = net.hosts["node"]
        cert = add_server_certificate(pki, "remote", f"IP:{node_host.address}")
        key = pki.path("remote.key")
        tls = {"admin.ssl.certificate.location": cert, "admin.ssl.key.location": key}
        nodes = [
            _start(net, tmp, "open", 19092, {"SKIFF_ADMIN_ALLOW_UNAUTHENTICATED": "all"}, {}),
            _start(net, tmp, "tls", 29092, {}, tls),
            _start(net, tmp, "mtls", 39092, {}, {
                **tls, "admin.ssl.truststore.location": pki.ca,
                "admin.ssl.client.auth": "required",
                "admin.ssl.principal.mapping.rules": "RULE:^.*,CN=([^,]+)$/$1/,DEFAULT"}),
        ]
        _wait_ready(nodes)
        # a SCRAM user, made as docs/deploy.md says: inside (the Kafka listener, loopback)
        add = subprocess.run(
            [*node_host.exec_prefix(), sys.executable, "-m", "broker.cli.main", "users",
             "-b", "127.0.0.1:29092", "add", "--user", "alice", "--password", "alice-secret"],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert add.returncode == 0, add.stderr
        yield Setup(net, pki, *nodes)
    finally:
        _stop(nodes)
        net.destroy()


def remote_skiff(s: Setup, node: RemoteNode, *args: str) -> subprocess.CompletedProcess[str]:
    """`skiff ARGS --bootstrap <node's admin address>` from the client namespace."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    return subprocess.run(
        [*s.net.hosts["client"].exec_prefix(), sys.executable, "-m", "broker.cli.main", *args,
         "--bootstrap", node.admin], capture_output=True, text=True, timeout=120, env=env,
        cwd=ROOT)


def test_without_credentials_a_remote_caller_is_refused_but_health_answers(s: Setup) -> None:
    health = remote_skiff(s, s.tls_node, "health", "--ssl-ca", s.pki.ca)
    assert health.returncode == 0 and "SERVING" in health.stdout, health.stderr
    p = remote_skiff(s, s.tls_node, "topics", "list", "--ssl-ca", s.pki.ca)
    assert p.returncode == 1 and "[UNAUTHENTICATED]" in p.stderr, p.stderr
    assert "docs/deploy.md" in p.stderr, p.stderr
    # a password over plaintext from another host: the CLI refuses to send it
    p = remote_skiff(s, s.open_node, "topics", "list", "--username", "alice", "--password",
                     "alice-secret")
    assert p.returncode == 2 and "in clear" in p.stderr, p.stderr


def test_scram_over_tls_from_another_host(s: Setup) -> None:
    creds = ("--ssl-ca", s.pki.ca, "--username", "alice", "--password", "alice-secret")
    p = remote_skiff(s, s.tls_node, "topics", "create", "remote-scram", *creds)
    assert p.returncode == 0, p.stderr
    p = remote_skiff(s, s.tls_node, "topics", "list", *creds)
    assert p.returncode == 0 and "remote-scram" in p.stdout, p.stderr
    p = remote_skiff(s, s.tls_node, "topics", "list", "--ssl-ca", s.pki.ca, "--username",
                     "alice", "--password", "wrong")
    assert p.returncode == 1 and "authentication failed" in p.stderr, p.stderr


def test_client_certificate_from_another_host(s: Setup) -> None:
    mtls = ("--ssl-ca", s.pki.ca, "--ssl-cert", s.pki.path("alice.pem"), "--ssl-key",
            s.pki.path("alice.key"))
    p = remote_skiff(s, s.mtls_node, "topics", "create", "remote-mtls", *mtls)
    assert p.returncode == 0, p.stderr
    p = remote_skiff(s, s.mtls_node, "topics", "describe", "remote-mtls", *mtls)
    assert p.returncode == 0 and "Topic: remote-mtls" in p.stdout, p.stderr
    p = remote_skiff(s, s.mtls_node, "topics", "list", "--ssl-ca", s.pki.ca)
    assert p.returncode != 0, p.stdout  # no client certificate: the handshake fails


def test_the_development_override_admits_anyone(s: Setup) -> None:
    p = remote_skiff(s, s.open_node, "topics", "create", "remote-open")
    assert p.returncode == 0, p.stderr
    p = remote_skiff(s, s.open_node, "topics", "list")
    assert p.returncode == 0 and "remote-open" in p.stdout, p.stderr
    log = s.open_node.log_path.read_text()
    assert "admin_open_to_all" in log and "development container only" in log
    assert "admin_open_to_all" not in s.tls_node.log_path.read_text()
