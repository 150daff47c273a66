"""SASL/OAUTHBEARER against Kafka 4.4, configured the same way.

One Skiff combined node and one reference Kafka 4.4 node, each with three SASL_PLAINTEXT
listeners besides PLAINTEXT: UNSECURED (Kafka's default unsecured validator), SIGNED
(OAuthBearerValidatorCallbackHandler with a JWKS file this module writes, an expected
audience and issuer) and HTTPJWKS (the same, with the JWKS fetched from an http: URL this
module serves). Kafka's Java client logs in with its built-in unsecured login
handler, and with signed JWTs read from files (OAuthBearerLoginCallbackHandler with a file:
token endpoint), produces and consumes; a token with a bad signature, a wrong audience, or
past its expiry is refused, and the client reports the same error from both brokers. Raw
SaslAuthenticate exchanges compare the server challenge, the error and the session
lifetime (the token's exp) byte for byte.

The Skiff node also runs the example plugins of broker/security/examples/token_claims.py
(`principal.builder.class`, `authorizer.class.name`): librdkafka clients with their own
unsecured tokens show that the principal comes from the token's preferred_username claim
and that private topics are refused to anyone but their owner.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster, free_ports
from tests.support.json_server import serve_json
from tests.support.kafka_ref import KafkaNode, run_program

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.clients.OAuthLogin"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
EXAMPLE = "broker.security.examples.token_claims"
AUDIENCE = "skiff-test-cluster"
ISSUER = "https://issuer.skiff.test"
TOPICS = ("oauth-unsecured", "oauth-signed", "oauth-bad-signature", "oauth-wrong-audience",
          "oauth-expired", "oauth-signed-http")


def _b64(doc: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def unsecured_token(claims: dict[str, Any]) -> str:
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


@dataclass
class Tokens:
    dir: Path
    jwks_url: str
    files: dict[str, Path]
    values: dict[str, str]
    jwks_http_url: str = ""  # the same JWKS served over HTTP (serve_jwks)


@contextlib.contextmanager
def serve_jwks(tokens: Tokens) -> Iterator[str]:
    """The JWKS file over HTTP on a loopback port, for the listener whose
    sasl.oauthbearer.jwks.endpoint.url is an http: URL; yields that URL."""
    body = (tokens.dir / "jwks.json").read_bytes()
    with serve_json(lambda: body) as url:
        yield url


def make_tokens(d: Path) -> Tokens:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="skiff-test-key", use="sig", alg="RS256")
    (d / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    now = int(time.time())
    base = {"sub": "carol", "iat": now, "exp": now + 3600, "aud": AUDIENCE, "iss": ISSUER,
            "scope": "kafka"}
    head = {"kid": "skiff-test-key"}
    values = {
        "signed": jwt.encode(base, key, "RS256", headers=head),
        "bad-signature": jwt.encode(base, other, "RS256", headers=head),
        "wrong-audience": jwt.encode({**base, "aud": "another-cluster"}, key, "RS256",
                                     headers=head),
        "expired": jwt.encode({**base, "iat": now - 7200, "exp": now - 3600}, key, "RS256",
                              headers=head),
    }
    files = {}
    for name, value in values.items():
        files[name] = d / f"{name}.jwt"
        files[name].write_text(value)
    return Tokens(d, (d / "jwks.json").as_uri(), files, values)


def sasl_settings(tokens: Tokens) -> dict[str, str]:
    """The same OAUTHBEARER settings for both brokers."""
    return {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.unsecured.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.signed.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": SECURED,
        "listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": tokens.jwks_url,
        "listener.name.httpjwks.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.httpjwks.oauthbearer.sasl.server.callback.handler.class": SECURED,
        "listener.name.httpjwks.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
            tokens.jwks_http_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    }


@dataclass
class Brokers:
    tokens: Tokens
    skiff: dict[str, str]   # listener name -> bootstrap
    kafka: dict[str, str]
    skiff_cluster: Cluster
    kafka_node: KafkaNode


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    tokens = make_tokens(tmp_path_factory.mktemp("oauth-tokens"))
    with serve_jwks(tokens) as url:
        tokens.jwks_http_url = url
        yield from _brokers(tmp_path_factory, tokens)


def _brokers(tmp_path_factory: pytest.TempPathFactory, tokens: Tokens) -> Iterator[Brokers]:
    settings = sasl_settings(tokens)
    k_unsecured, k_signed, k_http, s_unsecured, s_signed, s_http = free_ports(6)
    kafka = KafkaNode(tmp_path_factory.mktemp("oauth-kafka"), overrides=settings,
                      listeners={"UNSECURED": ("SASL_PLAINTEXT", k_unsecured),
                                 "SIGNED": ("SASL_PLAINTEXT", k_signed),
                                 "HTTPJWKS": ("SASL_PLAINTEXT", k_http)},
                      jvm_opts=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
                                f"{tokens.jwks_url},{tokens.jwks_http_url}"])
    kafka.start()
    cluster = Cluster(tmp_path_factory.mktemp("oauth-skiff"), controllers=1, brokers=0,
                      combined=True)
    node = cluster.nodes[1]
    host = node.host
    cluster.overrides.update(settings)
    cluster.overrides.update({
        "principal.builder.class": f"{EXAMPLE}:ClaimPrincipalBuilder",
        "plugin.principal.claim": "preferred_username",
        "authorizer.class.name": f"{EXAMPLE}:PrivateTopicAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    })
    cluster.overrides.update({
        "listeners": f"PLAINTEXT://{host}:{node.client_port},"
                     f"CONTROLLER://{host}:{node.controller_port},"
                     f"UNSECURED://{host}:{s_unsecured},SIGNED://{host}:{s_signed},"
                     f"HTTPJWKS://{host}:{s_http}",
        "advertised.listeners": f"PLAINTEXT://{host}:{node.client_port},"
                                f"UNSECURED://{host}:{s_unsecured},SIGNED://{host}:{s_signed},"
                                f"HTTPJWKS://{host}:{s_http}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                          "UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT,"
                                          "HTTPJWKS:SASL_PLAINTEXT",
    })
    try:
        with cluster:
            cluster.start()
            kafka.wait_ready()
            for bootstrap in (cluster.bootstrap_servers, kafka.bootstrap):
                _create(bootstrap, TOPICS)
            yield Brokers(tokens,
                          {"UNSECURED": f"{host}:{s_unsecured}", "SIGNED": f"{host}:{s_signed}",
                           "HTTPJWKS": f"{host}:{s_http}"},
                          {"UNSECURED": f"127.0.0.1:{k_unsecured}",
                           "SIGNED": f"127.0.0.1:{k_signed}",
                           "HTTPJWKS": f"127.0.0.1:{k_http}"},
                          cluster, kafka)
    finally:
        kafka.close()


def _create(bootstrap: str, topics: tuple[str, ...]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        f.result(30)


def _client_files(d: Path, listeners: dict[str, str], tokens: Tokens) -> list[str]:
    """NAME=<properties file> arguments of the Java program, one per case."""
    common = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    allowed = ",".join(p.as_uri() for p in tokens.files.values())
    cases: dict[str, dict[str, str]] = {
        # Kafka's built-in unsecured login handler makes the token from the JAAS options.
        "unsecured": {"bootstrap.servers": listeners["UNSECURED"],
                      "sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub='
                                          '"alice";'},
    }
    for name in ("signed", "bad-signature", "wrong-audience", "expired", "signed-http"):
        token = name.removesuffix("-http")
        cases[name] = {"bootstrap.servers": listeners["HTTPJWKS" if name != token else "SIGNED"],
                       "sasl.jaas.config": f"{MODULE} required;",
                       "sasl.login.callback.handler.class": LOGIN_HANDLER,
                       "sasl.oauthbearer.token.endpoint.url": tokens.files[token].as_uri(),
                       "skiff.allowed.urls": allowed}
    args = []
    for name, props in cases.items():
        f = d / f"{name}.properties"
        body = {**common, **props, "skiff.topic": f"oauth-{name}"}
        f.write_text("".join(f"{k}={v}\n" for k, v in body.items()))
        args.append(f"{name}={f}")
    return args


def _java(d: Path, listeners: dict[str, str], tokens: Tokens) -> dict[str, str]:
    d.mkdir(parents=True, exist_ok=True)
    proc = run_program(PROGRAM, *_client_files(d, listeners, tokens), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition(" ")
        out[name] = rest
    return out


@pytest.fixture(scope="module")
def java_results(brokers: Brokers, tmp_path_factory: pytest.TempPathFactory,
                 ) -> dict[str, dict[str, str]]:
    from concurrent.futures import ThreadPoolExecutor

    d = tmp_path_factory.mktemp("oauth-java")
    with ThreadPoolExecutor(2) as pool:  # the two JVMs side by side
        skiff = pool.submit(_java, d / "skiff", brokers.skiff, brokers.tokens)
        kafka = pool.submit(_java, d / "kafka", brokers.kafka, brokers.tokens)
        return {"skiff": skiff.result(), "kafka": kafka.result()}


@pytest.mark.parametrize("case", ["unsecured", "signed", "signed-http"])
def test_java_client_logs_in_produces_and_consumes(java_results: dict[str, dict[str, str]],
                                                   case: str) -> None:
    for broker in ("skiff", "kafka"):
        assert java_results[broker][case] == "ok " + ",".join(f"{case}-{i}" for i in range(3)), \
            (broker, java_results[broker])


@pytest.mark.parametrize("case", ["bad-signature", "wrong-audience", "expired"])
def test_java_client_refused_as_by_kafka(java_results: dict[str, dict[str, str]],
                                         case: str) -> None:
    skiff, kafka = java_results["skiff"][case], java_results["kafka"][case]
    assert kafka.startswith("error "), kafka
    assert skiff == kafka


# -- raw exchanges ------------------------------------------------------------------------


async def _exchange(bootstrap: str, messages: list[bytes]) -> list[tuple[int, Any, Any, int]]:
    from kio.schema.sasl_authenticate.v2 import request as ar
    from kio.schema.sasl_handshake.v1 import request as hr

    from broker.protocol.transport import KafkaConnection

    host, _, port = bootstrap.rpartition(":")
    conn = KafkaConnection(host, int(port), "raw-oauth")
    out = []
    try:
        hs = await conn.request(17, 1, hr.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 10)
        assert int(hs.error_code) == 0
        for m in messages:
            r = await conn.request(36, 2, ar.SaslAuthenticateRequest(auth_bytes=m), 10)
            out.append((int(r.error_code), r.error_message, bytes(r.auth_bytes),
                        int(r.session_lifetime.total_seconds() * 1000)))
            if int(r.error_code) != 0:
                break
    finally:
        await conn.close()
    return out


def _both(brokers: Brokers, listener: str, messages: list[bytes],
          ) -> tuple[list[tuple[int, Any, Any, int]], list[tuple[int, Any, Any, int]]]:
    return (asyncio.run(_exchange(brokers.skiff[listener], messages)),
            asyncio.run(_exchange(brokers.kafka[listener], messages)))


def _initial(token: str, **extensions: str) -> bytes:
    from broker.security.oauthbearer import client_response

    return client_response(token, extensions)


def test_raw_refusals_match_kafka(brokers: Brokers) -> None:
    """Challenge `{"status":"invalid_token"}`, then SASL_AUTHENTICATION_FAILED carrying it;
    a malformed message fails at once with Kafka's generic message."""
    now = int(time.time())
    cases = [
        ("SIGNED", [_initial(brokers.tokens.values["bad-signature"]), b"\x01"]),
        ("SIGNED", [_initial(brokers.tokens.values["wrong-audience"]), b"\x01"]),
        ("SIGNED", [_initial(brokers.tokens.values["expired"]), b"\x01"]),
        ("HTTPJWKS", [_initial(brokers.tokens.values["bad-signature"]), b"\x01"]),
        ("SIGNED", [_initial(unsecured_token({"sub": "x", "exp": now + 60})), b"\x01"]),
        ("UNSECURED", [_initial(unsecured_token({"sub": "x", "exp": now - 60})), b"\x01"]),
        ("UNSECURED", [_initial(unsecured_token({"exp": now + 60})), b"\x01"]),
        ("UNSECURED", [b"not an oauthbearer message"]),
    ]
    for listener, messages in cases:
        skiff, kafka = _both(brokers, listener, messages)
        assert skiff == kafka, (listener, messages)
        assert kafka[-1][0] == 58, kafka


def test_raw_other_scheme_is_a_failure_not_a_dropped_connection(brokers: Brokers) -> None:
    """`auth=Basic ...`: Kafka 4.4 closes the connection without an answer (formatting its
    own error message throws: OAuthBearerClientInitialResponse reads a group the matcher
    lacks); Skiff answers the generic SASL_AUTHENTICATION_FAILED, as for any malformed
    message. A deliberate difference (docs/security.md)."""
    message = [b"n,,\x01auth=Basic abc\x01\x01"]
    with pytest.raises(ConnectionError):
        asyncio.run(_exchange(brokers.kafka["UNSECURED"], message))
    assert asyncio.run(_exchange(brokers.skiff["UNSECURED"], message)) == [
        (58, "Authentication failed during authentication due to invalid credentials with "
             "SASL mechanism OAUTHBEARER", b"", 0)]


def test_raw_session_lifetime_is_the_tokens(brokers: Brokers) -> None:
    """Without connections.max.reauth.ms the session ends at the token's exp (KIP-368)."""
    now = int(time.time())
    token = unsecured_token({"sub": "alice", "exp": now + 600, "iat": now})
    skiff, kafka = _both(brokers, "UNSECURED", [_initial(token, traceId="t-1")])
    for answers in (skiff, kafka):
        assert len(answers) == 1 and answers[0][:3] == (0, "", b"")
        assert 590_000 <= answers[0][3] <= 600_000, answers


# -- plugins: principal builder and authorizer ---------------------------------------------


def _oauth_conf(bootstrap: str, claims: dict[str, Any]) -> dict[str, Any]:
    def token(_config: str) -> tuple[str, float]:
        now = time.time()
        return unsecured_token({"iat": int(now), "exp": int(now) + 600, **claims}), now + 600

    return {"bootstrap.servers": bootstrap, "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": token, "log_level": 0}


def _produce(conf: dict[str, Any], topic: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({**conf, "message.timeout.ms": 10000})
    result: list[Any] = []
    p.produce(topic, b"v", on_delivery=lambda e, _m: result.append(e))
    p.flush(20)
    assert result, "no delivery report"
    return result[0]


def test_plugins_decide_on_a_real_node(brokers: Brokers) -> None:
    """mallory's token says sub=u-1001, preferred_username=mallory: the principal builder
    makes User:mallory, which the authorizer lets use private.mallory.* and nothing of
    private.alice.*; alice (no such claim: User:alice, her sub) owns private.alice.*."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = brokers.skiff["UNSECURED"]
    alice = _oauth_conf(bootstrap, {"sub": "alice"})
    mallory = _oauth_conf(bootstrap, {"sub": "u-1001", "preferred_username": "mallory"})
    admins = {"alice": AdminClient(alice), "mallory": AdminClient(mallory)}
    for user in admins:
        topic = f"private.{user}.notes"
        admins[user].create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert _produce(mallory, "private.mallory.notes") is None
    assert _produce(alice, "private.alice.notes") is None
    err = _produce(mallory, "private.alice.notes")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    seen = set(admins["mallory"].list_topics(timeout=20).topics)
    assert "private.mallory.notes" in seen and "private.alice.notes" not in seen


def test_short_lived_tokens_reauthenticate_on_the_same_connection(brokers: Brokers) -> None:
    """Tokens that live 7 s bound the session (no connections.max.reauth.ms is set):
    librdkafka fetches a new token and re-authenticates (KIP-368) while producing for 13 s;
    nothing fails and every record lands. (Tokens of 4 s, cut to whole seconds, left a margin
    of 0.6 s between librdkafka's refresh at 80% of their life and their expiry: on a loaded
    CI machine a late refresh then reconnected with an expired token.)"""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "oauth-reauth"
    _create(brokers.skiff_cluster.bootstrap_servers, (topic,))
    calls: list[float] = []

    def token(_config: str) -> tuple[str, float]:
        now = time.time()
        calls.append(now)
        exp = now + 7.0  # librdkafka refreshes at 80% of the lifetime it is told
        return unsecured_token({"sub": "alice", "iat": int(now), "exp": exp}), exp

    conf = {"bootstrap.servers": brokers.skiff["UNSECURED"], "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": token, "log_level": 0}
    errors: list[Any] = []
    p = Producer({**conf, "linger.ms": 5, "error_cb": errors.append})
    failed: list[Any] = []
    sent = []
    deadline = time.monotonic() + 13
    while time.monotonic() < deadline:
        v = f"r-{len(sent)}".encode()
        p.produce(topic, v, on_delivery=lambda e, _m: failed.append(e) if e else None)
        sent.append(v)
        p.poll(0.05)
    assert p.flush(30) == 0 and failed == [] and errors == []
    assert len(calls) >= 3, calls  # the first token and at least two refreshes
    c = Consumer({"bootstrap.servers": brokers.skiff_cluster.bootstrap_servers,
                  "group.id": "reauth", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    end = time.monotonic() + 20
    while len(got) < len(sent) and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == sent
