"""TLS settings resolution and context building (certificates made with openssl)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from broker.config import ConfigError, build_config
from broker.security.tls import (
    ServerTls,
    SslSettings,
    check_tls,
    client_context,
    normalize_pem,
    server_context,
    settings_for,
)
from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import tool_mark

pytestmark = tool_mark("openssl", "openssl not installed (tests/run.sh installs it)",
                       available=have_openssl())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _cfg(**extra: str):
    raw = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "EXTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "EXTERNAL:SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "EXTERNAL",
        "log.dirs": "/tmp/x",
    }
    raw.update(extra)
    return build_config(raw, warn=lambda m: None)


def test_listener_override_wins(pki: Pki) -> None:
    cfg = _cfg(**{"ssl.client.auth": "none", "listener.name.external.ssl.client.auth": "required",
                  "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.keystore("server")})
    s = settings_for(cfg, "EXTERNAL")
    assert s.client_auth == "required"
    assert s.keystore_location == pki.keystore("server")
    assert settings_for(cfg, "CONTROLLER").client_auth == "none"


def test_listener_override_value_is_validated() -> None:
    with pytest.raises(ConfigError, match=re.escape("ssl.client.auth")):
        _cfg(**{"listener.name.external.ssl.client.auth": "sometimes"})


def test_unknown_listener_ssl_key_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("listener.name.external.ssl.bogus")):
        _cfg(**{"listener.name.external.ssl.bogus": "1"})


def test_tls_listener_needs_a_keystore() -> None:
    with pytest.raises(ConfigError, match="key store"):
        check_tls(_cfg())


def test_default_store_type_is_jks_as_in_kafka(pki: Pki) -> None:
    """Without ssl.keystore.type the store is JKS (Kafka's default): a PEM file there needs
    the type said, and first a password, as Kafka asks."""
    cfg = _cfg(**{"ssl.keystore.location": pki.keystore("server")})
    with pytest.raises(ConfigError, match=re.escape(
            "SSL key store is specified, but key store password is not specified.")):
        check_tls(cfg)
    cfg = _cfg(**{"ssl.keystore.location": pki.keystore("server"),
                  "ssl.keystore.password": "x"})
    with pytest.raises(ConfigError, match=re.escape(
            f"Failed to load SSL keystore {pki.keystore('server')} of type JKS")):
        check_tls(cfg)


def test_inline_pem_needs_the_pem_type(pki: Pki) -> None:
    s = SslSettings("L", keystore_certificate_chain=Path(pki.path("server.pem")).read_text(),
                    keystore_key=Path(pki.path("server.key")).read_text())
    with pytest.raises(ConfigError, match=re.escape(
            "SSL private key can be specified only for PEM, but key store type is JKS.")):
        server_context(s)


def test_keystore_password_with_pem_refused(pki: Pki) -> None:
    s = SslSettings("L", keystore_type="PEM", keystore_location=pki.keystore("server"),
                    keystore_password="x")
    with pytest.raises(ConfigError, match=re.escape("ssl.key.password")):
        server_context(s)


def test_required_client_auth_needs_truststore(pki: Pki) -> None:
    s = SslSettings("L", keystore_type="PEM", keystore_location=pki.keystore("server"),
                    client_auth="required")
    with pytest.raises(ConfigError, match="trust store"):
        server_context(s)


def test_encrypted_key_needs_its_password(pki: Pki) -> None:
    s = SslSettings("L", keystore_type="PEM", keystore_location=pki.keystore("server-enc"),
                    key_password="wrong")
    with pytest.raises(ConfigError, match="private key"):
        server_context(s)
    good = SslSettings("L", keystore_type="PEM", keystore_location=pki.keystore("server-enc"),
                       key_password="serverpass")
    assert server_context(good).verify_mode == ssl.CERT_NONE


def test_inline_pem_even_on_one_line(pki: Pki) -> None:
    chain = Path(pki.path("server.pem")).read_text().replace("\n", " ")
    key = Path(pki.path("server.key")).read_text().replace("\n", "")
    ca = Path(pki.ca).read_text().replace("\n", "")
    s = SslSettings("L", keystore_type="PEM", keystore_certificate_chain=chain,
                    keystore_key=key, truststore_type="PEM", truststore_certificates=ca,
                    client_auth="requested")
    ctx = server_context(s)
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert normalize_pem(ca) == Path(pki.ca).read_text()


def test_protocols_and_ciphers(pki: Pki) -> None:
    base = {"keystore_type": "PEM", "keystore_location": pki.keystore("server")}
    ctx = server_context(SslSettings("L", enabled_protocols=("TLSv1.3",), **base))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    ctx = server_context(SslSettings("L", protocol="TLSv1.2", **base))
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    ctx = server_context(SslSettings("L", cipher_suites=("ECDHE-RSA-AES128-GCM-SHA256",),
                                     enabled_protocols=("TLSv1.2",), **base))
    # get_ciphers lists the TLSv1.3 suites whatever the version range; TLSv1.2 is narrowed
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-RSA-AES128-GCM-SHA256"]
    with pytest.raises(ConfigError, match="OpenSSL cipher names"):
        server_context(SslSettings("L", cipher_suites=("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",),
                                   **base))
    with pytest.raises(ConfigError, match=re.escape("TLSv1.3 suites")):
        server_context(SslSettings("L", cipher_suites=("TLS_AES_128_GCM_SHA256",), **base))


def test_client_context_checks_hostnames_by_default(pki: Pki) -> None:
    s = SslSettings("L", truststore_type="PEM", truststore_location=pki.ca)
    assert client_context(s).check_hostname
    off = SslSettings("L", truststore_type="PEM", truststore_location=pki.ca,
                      endpoint_identification_algorithm="")
    assert not client_context(off).check_hostname


def test_reload_swaps_context_when_the_file_changes(pki: Pki, tmp_path: Path) -> None:
    keystore = tmp_path / "ks.pem"
    keystore.write_text(Path(pki.keystore("server")).read_text())
    now = [0.0]
    tls = ServerTls(SslSettings("L", keystore_type="PEM", keystore_location=str(keystore)),
                    clock=lambda: now[0])
    first = tls.current
    now[0] = 5.0
    assert not tls.maybe_reload()  # unchanged file
    keystore.write_text(Path(pki.keystore("alice")).read_text())
    now[0] = 5.5
    assert not tls.maybe_reload()  # checked less than a second ago
    now[0] = 7.0
    assert tls.maybe_reload() and tls.current is not first and tls.reloads == 1
    keystore.write_text("garbage")
    now[0] = 9.0
    current = tls.current
    assert not tls.maybe_reload() and tls.current is current  # bad file: keep the old one
