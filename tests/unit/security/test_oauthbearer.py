"""SASL/OAUTHBEARER's pure parts: the client message, the two validators, the exchange
and its session lifetime, and the settings refused at start."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from broker.config import ConfigError
from broker.config.loading import build_config
from broker.security import oauthbearer as ob
from broker.security.sasl import AuthFailed, SaslConfig, SaslSession
from tests.support.json_server import serve_json

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


def _b64(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


def test_client_message_parses_as_kafka_writes_it() -> None:
    msg = ob.client_response("a.b.", {"traceId": "x 1", "logicalCluster": "lkc-1"})
    assert msg == b"n,,\x01auth=Bearer a.b.\x01traceId=x 1\x01logicalCluster=lkc-1\x01\x01"
    assert ob.parse_client_response(msg) == ("", "a.b.", {"traceId": "x 1",
                                                          "logicalCluster": "lkc-1"})
    assert ob.parse_client_response(b"n,a=bob,\x01auth=bearer t\x01\x01") == ("bob", "t", {})


@pytest.mark.parametrize("msg", [
    b"", b"n,,\x01\x01", b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01",
    b"n,,\x01auth=Basic abc\x01\x01", b"y,,\x01auth=Bearer t\x01\x01",
    b"n,,\x01auth=Bearer t\x01", b"n,,\x01auth=Bearer t\x011x=y\x01\x01", b"\xff\xfe",
])
def test_malformed_client_messages(msg: bytes) -> None:
    with pytest.raises(ob.MalformedResponse):
        ob.parse_client_response(msg)


def reject(v: ob.Validator, token: str) -> ob.TokenRejected:
    with pytest.raises(ob.TokenRejected) as e:
        v.validate(token, NOW_MS)
    return e.value


def test_unsecured_validator_rules() -> None:
    v = ob.UnsecuredValidator()
    ok = v.validate(unsecured({"sub": "alice", "exp": NOW_S + 10, "iat": NOW_S,
                               "scope": ["a", " b "]}), NOW_MS)
    assert (ok.principal_name, ok.lifetime_ms, ok.scope) == ("alice", (NOW_S + 10) * 1000,
                                                             frozenset({"a", "b"}))
    assert "'none'" in str(reject(v, unsecured({"sub": "a", "exp": NOW_S + 9},
                                              {"alg": "RS256"})))
    assert "signature" in str(reject(v, unsecured({"sub": "a", "exp": NOW_S + 9}) + "sig"))
    assert "expiration" in str(reject(v, unsecured({"sub": "a"}))).lower()
    assert "principal" in str(reject(v, unsecured({"exp": NOW_S + 9})))
    assert "Expiration" in str(reject(v, unsecured({"sub": "a", "exp": NOW_S})))
    assert "Issued At" in str(reject(v, unsecured({"sub": "a", "exp": NOW_S + 9,
                                                   "iat": NOW_S + 5})))
    assert "'..'" in str(reject(v, "a..b"))
    assert reject(v, "!!!.x.").status == "invalid_token"
    # clock skew lets a just-expired token in, and its session is over at once
    skewed = ob.UnsecuredValidator.from_options({"unsecuredValidatorAllowableClockSkewMs": "5000"})
    assert skewed.validate(unsecured({"sub": "a", "exp": NOW_S - 1}), NOW_MS)


def test_unsecured_required_scope_is_insufficient_scope() -> None:
    v = ob.UnsecuredValidator.from_options({
        "unsecuredValidatorRequiredScope": "LOGIN KAFKA",
        "unsecuredValidatorPrincipalClaimName": "azp",
        "unsecuredValidatorScopeClaimName": "roles"})
    e = reject(v, unsecured({"azp": "svc", "exp": NOW_S + 9, "roles": "LOGIN"}))
    assert e.json() == '{"status":"insufficient_scope", "scope":"[LOGIN, KAFKA]"}'
    assert v.validate(unsecured({"azp": "svc", "exp": NOW_S + 9, "roles": ["LOGIN", "KAFKA"]}),
                      NOW_MS).principal_name == "svc"


@pytest.mark.parametrize("options", [
    {"unsecuredValidatorAllowableClockSkewMs": "-1"},
    {"unsecuredValidatorAllowableClockSkewMs": "soon"},
    {"unsecuredValidatorRequiredScop": "x"},
])
def test_bad_unsecured_options(options: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        ob.UnsecuredValidator.from_options(options)


def test_exchange_challenge_then_failure_and_session_lifetime() -> None:
    cfg = SaslConfig(("OAUTHBEARER",), {}, lambda _m, _u: None, reauth_ms=0,
                     oauthbearer=lambda: ob.OAuthBearerServer(ob.UnsecuredValidator(),
                                                              lambda: NOW_MS))
    s = SaslSession(cfg, lambda: NOW_MS)
    assert s.handshake("OAUTHBEARER").error == 0
    bad = s.authenticate(ob.client_response(unsecured({"sub": "a", "exp": NOW_S - 1})), 2)
    assert (int(bad.error), bad.auth_bytes) == (0, b'{"status":"invalid_token"}')
    failed = s.authenticate(b"\x01", 2)
    assert (int(failed.error), failed.message) == (58, '{"status":"invalid_token"}')

    s = SaslSession(cfg, lambda: NOW_MS)
    s.handshake("OAUTHBEARER")
    done = s.authenticate(ob.client_response(unsecured({"sub": "al", "exp": NOW_S + 60})), 2)
    assert (int(done.error), done.session_lifetime_ms, s.principal) == (0, 60_000, "User:al")
    assert s.expires_ms == NOW_MS + 60_000
    # connections.max.reauth.ms caps it
    capped = SaslSession(SaslConfig(cfg.enabled, {}, cfg.scram, 5_000, cfg.oauthbearer),
                         lambda: NOW_MS)
    capped.handshake("OAUTHBEARER")
    out = capped.authenticate(ob.client_response(unsecured({"sub": "al", "exp": NOW_S + 60})),
                              1)
    assert out.session_lifetime_ms == 5_000


def test_authzid_must_be_the_principal() -> None:
    srv = ob.OAuthBearerServer(ob.UnsecuredValidator(), lambda: NOW_MS)
    with pytest.raises(AuthFailed) as e:
        srv.step(ob.client_response(unsecured({"sub": "al", "exp": NOW_S + 9}), authzid="bob"))
    assert e.value.public == ("Authentication failed: Client requested an authorization id "
                              "(bob) that is different from the token's principal name (al)")


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = "k1"
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return key, path


def test_jwt_validator(signing: tuple[Any, Path]) -> None:
    import jwt

    key, path = signing
    now = int(time.time())
    v = ob.JwtValidator(ob.Jwks(path.as_uri()), ("c1",), "iss", sub_claim="client_id")
    claims = {"client_id": "svc", "iat": now, "exp": now + 60, "aud": ["x", "c1"], "iss": "iss"}

    def sign(extra: dict[str, Any], kid: str = "k1") -> str:
        return jwt.encode({**claims, **extra}, key, "ES256", headers={"kid": kid})

    tok = v.validate(sign({}), now * 1000)
    assert (tok.principal_name, tok.lifetime_ms) == ("svc", (now + 60) * 1000)
    for extra in ({"aud": "c2"}, {"iss": "other"}, {"exp": now - 31}, {"client_id": " "},
                  {"nbf": now + 60}):
        assert reject(v, sign(extra)).status == "invalid_token", extra
    assert v.validate(sign({"exp": now - 5}), now * 1000)  # within the 30 s clock skew
    assert "kid" in str(reject(v, sign({}, kid="k2")))
    assert "Malformed" in str(reject(v, unsecured({"client_id": "svc", "exp": now + 9})))
    no_iat = {k: x for k, x in claims.items() if k != "iat"}
    assert reject(v, jwt.encode(no_iat, key, "ES256", headers={"kid": "k1"}))
    # the file is read again when it changes: a rotated key set drops k1
    path.write_text(json.dumps({"keys": []}))
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert "kid" in str(reject(v, sign({})))


BASE = {"process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
                     "SECURE://127.0.0.1:9094",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                          "SECURE:SASL_PLAINTEXT",
        "log.dirs": "/tmp/skiff-unused", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.secure.oauthbearer.sasl.jaas.config": f"{ob.LOGIN_MODULE} required;"}


def check(**extra: str) -> None:
    from broker.security.sasl_config import check_sasl

    check_sasl(build_config({**BASE, **{k.replace("__", "."): v for k, v in extra.items()}}))


def test_settings_refused_at_start(signing: tuple[Any, Path]) -> None:
    check()  # unsecured, Kafka's default
    handler = "listener.name.secure.oauthbearer.sasl.server.callback.handler.class"
    with pytest.raises(ConfigError, match="cannot run other callback handler"):
        check(**{handler.replace(".", "__"): "com.example.MyHandler"})
    for elsewhere in ("sasl.server.callback.handler.class",
                      "listener.name.secure.sasl.server.callback.handler.class"):
        with pytest.raises(ConfigError, match="per listener and mechanism"):
            check(**{elsewhere.replace(".", "__"): ob.SECURED_HANDLER})
    with pytest.raises(ConfigError, match="does not implement"):
        check(**{"listener__name__secure__plain__sasl__server__callback__handler__class":
                 "com.example.PlainHandler"})
    signed = {handler.replace(".", "__"): ob.SECURED_HANDLER}
    with pytest.raises(ConfigError, match="JWKS endpoint URL"):
        check(**signed)
    url = {"sasl__oauthbearer__jwks__endpoint__url": signing[1].as_uri()}
    with pytest.raises(ConfigError, match=r"expected\.audience"):
        check(**signed, **url)
    with pytest.raises(ConfigError, match=r"expected\.issuer"):
        check(**signed, **url, sasl__oauthbearer__expected__audience="c1")
    check(**signed, **url, sasl__oauthbearer__allow__unverified__audience="true",
          sasl__oauthbearer__allow__unverified__issuer="true")
    with pytest.raises(ConfigError, match="readable JWK set"):
        check(**signed, sasl__oauthbearer__jwks__endpoint__url="file:///nonexistent/jwks.json",
              sasl__oauthbearer__expected__audience="c1", sasl__oauthbearer__expected__issuer="i")
    with pytest.raises(ConfigError, match="OAUTHBEARER"):
        check(sasl__mechanism__inter__broker__protocol="OAUTHBEARER",
              listener__security__protocol__map="PLAINTEXT:SASL_PLAINTEXT,"
                                                "CONTROLLER:PLAINTEXT,SECURE:SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.token\.endpoint\.url"):
        check(sasl__oauthbearer__token__endpoint__url="https://idp/token")


def test_jwks_over_http_refreshes_for_an_unknown_kid() -> None:
    """An http: JWKS is fetched at start; a token naming a key the set lacks is refused
    and makes the refresh thread fetch again, after which the new key verifies."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    keys = {"k1": ec.generate_private_key(ec.SECP256R1())}

    def jwks() -> bytes:
        out = []
        for kid, k in keys.items():
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(k.public_key()))
            out.append({**jwk, "kid": kid})
        return json.dumps({"keys": out}).encode()

    with serve_json(jwks) as url:
        source = ob.Jwks(url, refresh_ms=3_600_000, retry_backoff_ms=0)
        source.start()
        v = ob.JwtValidator(source, ("c1",), None)
        now = int(time.time())
        claims = {"sub": "svc", "iat": now, "exp": now + 60, "aud": "c1"}
        assert v.validate(jwt.encode(claims, keys["k1"], "ES256", headers={"kid": "k1"}),
                          now * 1000).principal_name == "svc"
        keys["k2"] = ec.generate_private_key(ec.SECP256R1())
        rotated = jwt.encode(claims, keys["k2"], "ES256", headers={"kid": "k2"})
        assert "kid" in str(reject(v, rotated))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                getattr(k, "_jwk_data", {}).get("kid") == "k2" for k in source.current()):
            time.sleep(0.05)
        assert v.validate(rotated, now * 1000).principal_name == "svc"
        source.close()


def test_garbage_never_escapes_as_anything_but_a_refusal(signing: tuple[Any, Path]) -> None:
    """Random client messages and tokens: the exchange refuses them (AuthFailed, or a
    challenge), the validators raise TokenRejected; nothing else escapes."""
    import random

    rng = random.Random(36)
    jwt_v = ob.JwtValidator(ob.Jwks(signing[1].as_uri()), ("c1",), "iss")
    validators: list[ob.Validator] = [ob.UnsecuredValidator(), jwt_v]
    head = _b64({"alg": "ES256", "kid": "k1"})
    for _ in range(400):
        kind = rng.randrange(4)
        if kind == 0:
            data = rng.randbytes(rng.randrange(0, 200))
        elif kind == 1:
            data = b"n,,\x01auth=Bearer " + rng.randbytes(rng.randrange(0, 80)) + b"\x01\x01"
        else:
            parts = [head if kind == 3 else _b64(rng.choice([{}, [], "x", {"alg": "none"}])),
                     _b64({"sub": rng.choice(["a", 1, None, True]), "exp": rng.choice(
                         [1, NOW_S + 9, "x", None, 1e300, float("inf"), float("nan")]),
                         "iat": rng.choice([0, -5, "y", float("-inf")])}),
                     rng.choice(["", "AAAA", "-_-_"])]
            data = ob.client_response(".".join(parts))
        srv = ob.OAuthBearerServer(rng.choice(validators), lambda: NOW_MS)
        try:
            out = srv.step(data)
        except AuthFailed:
            continue
        assert out == b"" or out.startswith(b'{"status":"'), out
        if out:
            with pytest.raises(AuthFailed):
                srv.step(b"\x01")
