"""The gRPC admin plane secured (issue 21): the `skiff` CLI as a subprocess against an
AdminServer in this test process (over an AdminTestNode: a single-voter commit double),
configured by admin.ssl.* and admin.allow.unauthenticated; the ADMIN_AUTHORIZER hook is
monkeypatched where a test says so. Against real nodes, a caller on another host (network
namespaces): tests/integration/test_admin_security.py. Without credentials
the call is refused UNAUTHENTICATED; with SCRAM credentials (the metadata log's, as `skiff
users` makes them) or a client certificate it works; a plaintext client fails clearly on a
TLS admin port; the authorize_admin hook is what decides."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.admin import AdminServer, auth
from broker.security import scram
from broker.security.scram_admin import Upsertion
from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import require_tool
from tests.unit.admin.harness import AdminTestNode
from tests.unit.handlers.conftest import NODE_ID

ROOT = Path(__file__).resolve().parents[3]


class SecuredAdmin:
    def __init__(self, tmp: Path, overrides: dict[str, str]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node = AdminTestNode(tmp, {"admin.allow.unauthenticated": "none", **overrides})
        self.server = AdminServer(self.node, ["127.0.0.1:0"], grace_s=0)

        async def start() -> None:
            await self.node.register(NODE_ID)
            self.node.ready.set()
            await self.server.start()
            salt = secrets.token_bytes(16)
            salted = scram.salted_password("SCRAM-SHA-512", "alice-secret", salt, 4096)
            [r] = await self.node.controller.alter_user_scram_credentials(
                [], [Upsertion("alice", 2, 4096, salt, salted)])
            assert r.error.name == "none"

        self.run(start())
        self.address = f"127.0.0.1:{self.server.ports[0]}"

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        try:
            self.run(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.node.close()


def skiff(admin: SecuredAdmin, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKIFF_ADMIN", None)
    return subprocess.run([sys.executable, "-m", "broker.cli.main", *args,
                           "--bootstrap", admin.address],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def plaintext(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredAdmin]:
    a = SecuredAdmin(tmp_path_factory.mktemp("admin-plain"), {})
    try:
        yield a
    finally:
        a.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    require_tool("openssl", "openssl is not installed (tests/run.sh installs it in CI)",
                 available=have_openssl())
    return make_pki(tmp_path_factory.mktemp("admin-pki"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredAdmin]:
    a = SecuredAdmin(tmp_path_factory.mktemp("admin-tls"), {
        "admin.ssl.certificate.location": pki.path("server.pem"),
        "admin.ssl.key.location": pki.path("server.key"),
        "admin.ssl.truststore.location": pki.ca,
        "admin.ssl.client.auth": "required",
        "admin.ssl.principal.mapping.rules": "RULE:^.*,CN=([^,]+)$/$1/,DEFAULT",
    })
    try:
        yield a
    finally:
        a.close()


@pytest.fixture(scope="module")
def tls_only(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredAdmin]:
    a = SecuredAdmin(tmp_path_factory.mktemp("admin-tls-only"), {
        "admin.ssl.certificate.location": pki.path("server.pem"),
        "admin.ssl.key.location": pki.path("server.key")})
    try:
        yield a
    finally:
        a.close()


def test_no_credentials_is_unauthenticated(plaintext: SecuredAdmin) -> None:
    p = skiff(plaintext, "topics", "list")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "[UNAUTHENTICATED]" in p.stderr and "needs authentication" in p.stderr


def test_scram_credentials_work_and_bad_ones_do_not(plaintext: SecuredAdmin) -> None:
    ok = skiff(plaintext, "topics", "create", "secured-t", "--username", "alice",
               "--password", "alice-secret")
    assert ok.returncode == 0, ok.stderr
    assert plaintext.node.metadata.topic("secured-t") is not None
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret")):
        p = skiff(plaintext, "topics", "list", "--username", user, "--password", password)
        assert p.returncode == 1 and "[UNAUTHENTICATED]" in p.stderr, p.stderr
        assert "authentication failed" in p.stderr


def test_command_config_file(plaintext: SecuredAdmin, tmp_path: Path) -> None:
    cfg = tmp_path / "admin.properties"
    cfg.write_text("username=alice\npassword=alice-secret\n")
    p = skiff(plaintext, "quotas", "alter", "--client", "cc", "--add-config",
              "producer_byte_rate=100", "--command-config", str(cfg))
    assert p.returncode == 0, p.stderr


def test_authorize_admin_decides(plaintext: SecuredAdmin, monkeypatch: pytest.MonkeyPatch
                                 ) -> None:
    asked: list[tuple[str, str, str]] = []

    def deny_writes(principal: str, operation: str, resource: str) -> bool:
        asked.append((principal, operation, resource))
        return operation == "DESCRIBE"

    monkeypatch.setattr(auth, "ADMIN_AUTHORIZER", deny_writes)
    creds = ("--username", "alice", "--password", "alice-secret")
    assert skiff(plaintext, "topics", "list", *creds).returncode == 0
    p = skiff(plaintext, "topics", "create", "denied-t", *creds)
    assert p.returncode == 1 and "[PERMISSION_DENIED]" in p.stderr, p.stderr
    assert plaintext.node.metadata.topic("denied-t") is None
    assert ("User:alice", "CREATE", "Cluster:kafka-cluster") in asked


def test_client_certificate_over_tls(tls: SecuredAdmin, pki: Pki,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(auth, "ADMIN_AUTHORIZER", lambda p, o, r: asked.append(p) or True)
    p = skiff(tls, "quotas", "alter", "--user", "alice", "--add-config",
              "consumer_byte_rate=4096", "--ssl-ca", pki.ca, "--ssl-cert",
              pki.path("alice.pem"), "--ssl-key", pki.path("alice.key"))
    assert p.returncode == 0, p.stderr
    p = skiff(tls, "quotas", "describe", "--user", "alice", "--ssl-ca", pki.ca, "--ssl-cert",
              pki.path("bob.pem"), "--ssl-key", pki.path("bob.key"))
    assert p.returncode == 0 and "consumer_byte_rate=4096" in p.stdout, p.stderr
    # the subject O=Skiff,OU=eng,CN=alice through admin.ssl.principal.mapping.rules
    assert asked == ["User:alice", "User:bob"]
    # no client certificate: the handshake itself fails
    p = skiff(tls, "quotas", "describe", "--ssl-ca", pki.ca)
    assert p.returncode != 0, p.stdout


def test_scram_credentials_over_tls(tls_only: SecuredAdmin, pki: Pki) -> None:
    p = skiff(tls_only, "quotas", "describe", "--ssl-ca", pki.ca, "--username", "alice",
              "--password", "alice-secret")
    assert p.returncode == 0, p.stderr
    # TLS but nobody: refused
    p = skiff(tls_only, "quotas", "describe", "--ssl-ca", pki.ca)
    assert p.returncode == 1 and "[UNAUTHENTICATED]" in p.stderr, p.stderr


def test_plaintext_client_on_a_tls_port_fails_clearly(tls_only: SecuredAdmin) -> None:
    p = skiff(tls_only, "topics", "list", "--username", "alice", "--password", "alice-secret")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "--ssl-ca" in p.stderr, p.stderr


def test_authenticator_policy_unit() -> None:
    sec = auth.AdminSecurity(allow_unauthenticated="loopback")
    a = auth.Authenticator(sec, dict)
    assert a.authenticate("ipv4:127.0.0.1:5000", {}, {}) == "User:ANONYMOUS"
    assert a.authenticate("ipv6:[::1]:5000", {}, {}) == "User:ANONYMOUS"
    with pytest.raises(auth.AdminAuthError, match="needs authentication"):
        a.authenticate("ipv4:10.1.2.3:5000", {}, {})
    with pytest.raises(auth.AdminAuthError, match="plaintext"):
        a.authenticate("ipv4:10.1.2.3:5000", {}, {auth.USER_KEY: "a", auth.PASSWORD_KEY: "b"})
    # the development override: any peer, no credentials (docs/deploy.md)
    anyone = auth.Authenticator(auth.AdminSecurity(allow_unauthenticated="all"), dict)
    assert anyone.authenticate("ipv4:10.1.2.3:5000", {}, {}) == "User:ANONYMOUS"
    with pytest.raises(auth.AdminAuthError, match="authentication failed"):
        anyone.authenticate("ipv4:127.0.0.1:5000", {},
                            {auth.USER_KEY: "a", auth.PASSWORD_KEY: "b"})  # bad stays bad
    strict = auth.Authenticator(auth.AdminSecurity(), dict)
    with pytest.raises(auth.AdminAuthError):
        strict.authenticate("ipv4:127.0.0.1:5000", {}, {})
    assert strict.authenticate("ipv4:10.0.0.1:1", {"x509_subject": [b"CN=bob,O=Skiff"]},
                               {}) == "User:CN=bob,O=Skiff"
    assert not auth.authorize_admin("User:ANONYMOUS", "ALTER", auth.CLUSTER_RESOURCE)
    assert auth.authorize_admin("User:bob", "ALTER", auth.CLUSTER_RESOURCE)


def test_health_answers_over_tls_without_credentials(tls_only: SecuredAdmin, pki: Pki) -> None:
    p = skiff(tls_only, "health", "--ssl-ca", pki.ca)
    assert p.returncode == 0 and "SERVING" in p.stdout, p.stderr


@pytest.fixture(scope="module")
def with_authorizer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredAdmin]:
    a = SecuredAdmin(tmp_path_factory.mktemp("admin-acls"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    try:
        yield a
    finally:
        a.close()


def test_acls_decide_admin_calls_when_an_authorizer_is_configured(
        with_authorizer: SecuredAdmin) -> None:
    """With authorizer.class.name set, an authenticated principal needs the method's
    operation on the cluster resource (DESCRIBE to list, CREATE to create), as an ACL."""
    from broker.security.authorizer import (
        CLUSTER_NAME,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    alice = ("--username", "alice", "--password", "alice-secret")
    denied = skiff(with_authorizer, "topics", "list", *alice)
    assert denied.returncode == 1 and "[PERMISSION_DENIED]" in denied.stderr, denied.stderr
    grant = AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, "User:alice",
                       "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    [r] = with_authorizer.run(with_authorizer.node.controller.create_acls([grant]))
    assert r.error.name == "none"
    listed = skiff(with_authorizer, "topics", "list", *alice)
    assert listed.returncode == 0, listed.stderr
    create = skiff(with_authorizer, "topics", "create", "acl-t", *alice)
    assert create.returncode == 1 and "[PERMISSION_DENIED]" in create.stderr, create.stderr
    assert with_authorizer.node.metadata.topic("acl-t") is None
