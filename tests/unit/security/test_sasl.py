"""SCRAM (RFC 7677's example), PLAIN, JAAS parsing and the per-connection SASL machine."""

from __future__ import annotations

import base64

import pytest
from kio.schema.errors import ErrorCode

from broker.security.jaas import PLAIN_MODULE, JaasError, parse_jaas
from broker.security.sasl import SaslConfig, SaslSession, State
from broker.security.scram import ScramClient, ScramError, ScramServer, credential

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_rfc7677_example() -> None:
    cred = credential("SCRAM-SHA-256", "pencil", SALT, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u: cred if u == "user" else None,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree(mechanism: str) -> None:
    cred = credential(mechanism, "s3cret", iterations=4096)
    server = ScramServer(mechanism, {"alice": cred}.get)
    client = ScramClient(mechanism, "alice", "s3cret")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.complete


def test_wrong_password_and_unknown_user_fail() -> None:
    cred = credential("SCRAM-SHA-512", "right")
    server = ScramServer("SCRAM-SHA-512", {"alice": cred}.get)
    client = ScramClient("SCRAM-SHA-512", "alice", "wrong")
    with pytest.raises(ScramError, match="invalid proof"):
        server.step(client.final(server.step(client.first())))
    with pytest.raises(ScramError, match="unknown user"):
        ScramServer("SCRAM-SHA-512", {}.get).step(ScramClient("SCRAM-SHA-512", "bob", "x").first())


@pytest.mark.parametrize("bad", [b"", b"\xff", b"p=tls-unique,,n=a,r=x", b"n,,r=x", b"n,,n=a",
                                 b"n,,m=ext,n=a,r=x", b"n,a=bob,n=alice,r=x", b"n,,n=a=2Xb,r=x"])
def test_malformed_client_first_fails_cleanly(bad: bytes) -> None:
    cred = credential("SCRAM-SHA-256", "p")
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256", lambda u: cred).step(bad)


def test_jaas_plain_users() -> None:
    e = parse_jaas(f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
                   'user_admin="admin-secret" user_alice="a\\"b";')
    assert e.module == PLAIN_MODULE and e.flag == "required"
    assert e.plain_users() == {"admin": "admin-secret", "alice": 'a"b'}


@pytest.mark.parametrize("bad", ["", "X required", "X maybe a=1;", "X required a=1; Y required;",
                                 'X required a="unterminated;'])
def test_jaas_malformed(bad: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas(bad)


def _session(reauth_ms: int = 0, now: list[int] | None = None) -> SaslSession:
    clock = now if now is not None else [0]
    creds = {("SCRAM-SHA-512", "carol"): credential("SCRAM-SHA-512", "pw")}
    cfg = SaslConfig(("PLAIN", "SCRAM-SHA-512"), {"alice": "alice-pw"},
                     lambda m, u: creds.get((m, u)), reauth_ms)
    return SaslSession(cfg, lambda: clock[0])


def test_plain_success_sets_principal() -> None:
    s = _session()
    assert s.admits(18) is None           # ApiVersions first is fine
    assert s.admits(3) is not None        # Metadata before authenticating is not
    assert s.handshake("PLAIN").mechanisms == ("PLAIN", "SCRAM-SHA-512")
    a = s.authenticate(b"\0alice\0alice-pw", 2)
    assert a.error is ErrorCode.none and s.state is State.AUTHENTICATED
    assert s.principal == "User:alice" and s.admits(3) is None


@pytest.mark.parametrize("token", [b"\0alice\0nope", b"\0mallory\0x", b"bob\0alice\0alice-pw",
                                   b"garbage"])
def test_plain_refusals(token: bytes) -> None:
    s = _session()
    s.handshake("PLAIN")
    a = s.authenticate(token, 2)
    assert a.error is ErrorCode.sasl_authentication_failed and a.closes
    assert s.state is State.FAILED and s.admits(3) is not None


def test_unsupported_mechanism_and_out_of_order() -> None:
    s = _session()
    a = s.handshake("GSSAPI")
    assert a.error is ErrorCode.unsupported_sasl_mechanism and a.closes
    s = _session()
    assert s.authenticate(b"x", 2).error is ErrorCode.illegal_sasl_state


def test_scram_through_the_session() -> None:
    s = _session()
    s.handshake("SCRAM-SHA-512")
    c = ScramClient("SCRAM-SHA-512", "carol", "pw")
    first = s.authenticate(c.first(), 2)
    final = s.authenticate(c.final(first.auth_bytes), 2)
    c.verify(final.auth_bytes)
    assert s.principal == "User:carol"


def test_reauth_lifetime_expiry_and_same_principal() -> None:
    now = [1000]
    s = _session(reauth_ms=5000, now=now)
    s.handshake("PLAIN")
    assert s.authenticate(b"\0alice\0alice-pw", 1).session_lifetime_ms == 5000
    now[0] = 4000
    assert s.admits(0) is None
    s.handshake("PLAIN")                      # re-authentication, requests still served
    assert s.admits(0) is None
    assert s.authenticate(b"\0alice\0alice-pw", 2).error is ErrorCode.none
    now[0] = 8999
    assert s.admits(0) is None                # new lifetime counts from the re-auth
    now[0] = 9000
    assert s.admits(0) is not None            # expired: the connection closes
    s2 = _session(reauth_ms=5000, now=[0])
    s2.handshake("PLAIN")
    s2.authenticate(b"\0alice\0alice-pw", 2)
    s2.handshake("PLAIN")
    bad = s2.authenticate(b"\0bob\0x", 2)
    assert bad.closes
