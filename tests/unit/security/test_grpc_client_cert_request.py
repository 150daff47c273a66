"""Why `admin.ssl.client.auth=requested` is refused: grpcio's Python credentials can either
not ask for a client certificate or ask and require it, nothing between.

grpcio maps `require_client_auth` (ssl_server_credentials) and
`require_client_authentication` (dynamic_ssl_server_credentials) to
GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY when true and to
GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE when false, root certificates or not; the C core's
"request but do not require" types are not reachable from Python. These tests hold the
installed grpcio to that with `openssl s_client -msg`, which shows whether the server's
handshake carries a CertificateRequest: if a grpcio release starts asking without
requiring, the first test fails and `requested` can be offered."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import tool_mark

pytestmark = tool_mark("openssl", "needs the openssl command (tests/run.sh installs it)",
                       available=have_openssl())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _pem(pki: Pki, name: str) -> bytes:
    return Path(pki.path(name)).read_bytes()


@pytest.fixture
def serve(pki: Pki) -> Iterator[Callable[[grpc.ServerCredentials], int]]:
    servers: list[grpc.Server] = []

    def start(creds: grpc.ServerCredentials) -> int:
        server = grpc.server(futures.ThreadPoolExecutor(1))
        port = int(server.add_secure_port("127.0.0.1:0", creds))
        server.start()
        servers.append(server)
        return port

    yield start
    for s in servers:
        s.stop(None)


def _asks_for_certificate(pki: Pki, port: int) -> bool:
    out = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-alpn", "h2", "-msg",
         "-cert", pki.path("alice.pem"), "-key", pki.path("alice.key")],
        input=b"", capture_output=True, timeout=20)
    text = (out.stdout + out.stderr).decode(errors="replace")
    assert "ServerHello" in text, text[-2000:]  # the handshake got that far
    return "CertificateRequest" in text


def test_not_requiring_means_not_asking(
        pki: Pki, serve: Callable[[grpc.ServerCredentials], int]) -> None:
    key, cert, ca = _pem(pki, "server.key"), _pem(pki, "server.pem"), _pem(pki, "ca.pem")
    static = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                         require_client_auth=False)
    dynamic = grpc.dynamic_ssl_server_credentials(
        grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca),
        lambda: None, require_client_authentication=False)
    assert not _asks_for_certificate(pki, serve(static))
    assert not _asks_for_certificate(pki, serve(dynamic))


def test_requiring_asks(pki: Pki, serve: Callable[[grpc.ServerCredentials], int]) -> None:
    key, cert, ca = _pem(pki, "server.key"), _pem(pki, "server.pem"), _pem(pki, "ca.pem")
    creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                        require_client_auth=True)
    assert _asks_for_certificate(pki, serve(creds))
