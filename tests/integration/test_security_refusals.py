"""Never downgrade, on a real process: an unsupported listener or security key stops
`skiff server start` with a message naming it, and nothing listens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.node import REPO_ROOT, free_port, tcp_connects


def _start(tmp_path: Path, props: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "server", "start", str(path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def _props(tmp_path: Path, port: int, cport: int, **extra: str) -> dict[str, str]:
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{cport}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(tmp_path / "logs"),
        "admin.listeners": f"127.0.0.1:{free_port()}",
        **extra,
    }


def test_sasl_listener_with_kafkas_default_gssapi_refused(tmp_path: Path) -> None:
    """SASL listeners exist, GSSAPI (Kafka's default mechanism) does not: refused, named."""
    port, cport = free_port(), free_port()
    props = _props(tmp_path, port, cport)
    props["listeners"] = f"CLIENTS://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}"
    props["listener.security.protocol.map"] = "CLIENTS:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    props["inter.broker.listener.name"] = "CLIENTS"
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sasl.enabled.mechanisms" in done.stderr and "GSSAPI" in done.stderr
    assert "CLIENTS" in done.stderr
    assert not tcp_connects("127.0.0.1", port)


def test_plain_without_jaas_users_refused(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    props = _props(tmp_path, port, cport, **{"sasl.enabled.mechanisms": "PLAIN"})
    props["listener.security.protocol.map"] = "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "listener.name.plaintext.plain.sasl.jaas.config" in done.stderr


def test_unsupported_sasl_key_refused(tmp_path: Path) -> None:
    props = _props(tmp_path, free_port(), free_port(),
                   **{"sasl.kerberos.service.name": "kafka"})
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sasl.kerberos.service.name" in done.stderr


def test_ssl_listener_without_keystore_refused(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    props = _props(tmp_path, port, cport)
    props["listener.security.protocol.map"] = "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT"
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ssl.keystore.location" in done.stderr and "PLAINTEXT" in done.stderr
    assert not tcp_connects("127.0.0.1", port)


def test_bad_listener_ssl_value_refused(tmp_path: Path) -> None:
    props = _props(tmp_path, free_port(), free_port(),
                   **{"listener.name.plaintext.ssl.client.auth": "maybe"})
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "listener.name.plaintext.ssl.client.auth" in done.stderr


def test_an_authorizer_other_than_the_standard_one_refused(tmp_path: Path) -> None:
    """Kafka's StandardAuthorizer and Python plugins (broker/security/plugins.py) are what
    Skiff runs: another Java class would silently authorize nothing it promised, so the node
    does not start, and names the key and why."""
    port = free_port()
    props = _props(tmp_path, port, free_port(), **{
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    done = _start(tmp_path, props)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "authorizer.class.name" in done.stderr
    assert "looks like a Java class, which Skiff cannot run" in done.stderr
    assert not tcp_connects("127.0.0.1", port)
