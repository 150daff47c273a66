"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768), server side.

The client's one message is
`n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01`
(Kafka's OAuthBearerClientInitialResponse; the extensions are accepted, as both of Kafka's
validators accept every extension). The token is checked by one of two validators, as
Kafka's callback handlers do:

* `UnsecuredValidator` (OAuthBearerUnsecuredValidatorCallbackHandler, Kafka's default for
  development): an unsecured JWS (`alg` none, empty signature) with an `exp` claim and a
  principal claim; JAAS options `unsecuredValidatorPrincipalClaimName` (default `sub`),
  `unsecuredValidatorScopeClaimName` (`scope`), `unsecuredValidatorRequiredScope`
  (space-separated) and `unsecuredValidatorAllowableClockSkewMs` (0).
* `JwtValidator` (OAuthBearerValidatorCallbackHandler with Kafka's BrokerJwtValidator): a
  signed JWT verified against the keys of `sasl.oauthbearer.jwks.endpoint.url` (a file: or
  http(s): URL, `Jwks`), with `exp` and `iat` required, `aud` among
  `sasl.oauthbearer.expected.audience`, `iss` equal to `sasl.oauthbearer.expected.issuer`,
  `sasl.oauthbearer.clock.skew.seconds` of leeway, the principal from
  `sasl.oauthbearer.sub.claim.name`. PyJWT does the JWS and claim checks.

A refused token is answered as Kafka's OAuthBearerSaslServer does: a server challenge
carrying `{"status":"invalid_token"}` (or `insufficient_scope` with the required scope);
the client answers `\\x01` and the authentication then fails with that JSON as the error
message. A malformed client message fails at once with Kafka's generic message.

The session lifetime is the token's remaining life, capped by `connections.max.reauth.ms`
when that is set (`credential_expiry_ms`, read by broker/security/sasl.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from broker.security.sasl import AuthFailed

log = structlog.get_logger("skiff.security.oauthbearer")

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")
SECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
# Kafka 3.1-3.x's name of the same class, still accepted by Kafka as a deprecated alias.
SECURED_HANDLER_OLD = ("org.apache.kafka.common.security.oauthbearer.secured."
                       "OAuthBearerValidatorCallbackHandler")
HANDLERS = (UNSECURED_HANDLER, SECURED_HANDLER, SECURED_HANDLER_OLD)

_GENERIC_FAILURE = ("Authentication failed during authentication due to invalid credentials "
                    "with SASL mechanism OAUTHBEARER")
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x7F](?<![=,])|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)


class MalformedResponse(ValueError):
    pass


def parse_client_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """(authorization id or '', token, extensions) of the client's message."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedResponse("Invalid OAUTHBEARER client first message") from None
    m = _CLIENT_FIRST.fullmatch(text)
    if m is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    kv = m.group("kvpairs")
    for item in kv.split(_SEP) if kv else ():
        if not item:
            continue
        key, _, value = item.partition("=")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in pairs.items():
        if not _KEY_RE.fullmatch(key) or not _VALUE_RE.fullmatch(value):
            raise MalformedResponse(f"Extension {key} is invalid")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise MalformedResponse(f"Invalid scheme in OAUTHBEARER client first message: "
                                f"{am.group('scheme')}")
    return m.group("authzid") or "", am.group("token"), pairs


def client_response(token: str, extensions: Mapping[str, str] | None = None,
                    authzid: str = "") -> bytes:
    """The client's message (as Kafka's client writes it), for tests and tools."""
    ext = "".join(f"{_SEP}{k}={v}" for k, v in (extensions or {}).items())
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},{_SEP}auth=Bearer {token}{ext}{_SEP}{_SEP}".encode()


@dataclass(frozen=True)
class OAuthToken:
    """A validated token (Kafka's OAuthBearerToken)."""

    value: str
    principal_name: str
    lifetime_ms: int                 # the `exp` claim, ms since the epoch
    start_ms: int | None             # `iat`
    scope: frozenset[str]
    claims: Mapping[str, Any] = field(default_factory=dict)


class TokenRejected(Exception):
    """The validator refused the token: `status` (and `scope`) go to the client."""

    def __init__(self, detail: str, status: str = "invalid_token",
                 scope: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        # Kafka's OAuthBearerSaslServer.jsonErrorResponse, byte for byte.
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        return out + "}"


class Validator:
    def validate(self, token: str, now_ms: int) -> OAuthToken:
        raise NotImplementedError


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    def __init__(self, validator: Validator, now_ms: Callable[[], int]) -> None:
        self._validator = validator
        self._now_ms = now_ms
        self._error: TokenRejected | None = None
        self.complete = False
        self.username: str | None = None
        self.credential_expiry_ms: int | None = None
        self.token: OAuthToken | None = None
        self.extensions: dict[str, str] = {}

    def step(self, data: bytes) -> bytes:
        if data == b"\x01" and self._error is not None:
            raise AuthFailed(self._error.json(), f"token refused: {self._error}")
        self._error = None
        try:
            authzid, value, extensions = parse_client_response(data)
        except MalformedResponse as e:
            raise AuthFailed(_GENERIC_FAILURE, str(e)) from None
        try:
            token = self._validator.validate(value, self._now_ms())
        except TokenRejected as e:
            self._error = e
            return e.json().encode()
        if authzid and authzid != token.principal_name:
            raise AuthFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({token.principal_name})",
                "authzid differs from the token's principal")
        self.complete = True
        self.username = token.principal_name
        self.credential_expiry_ms = token.lifetime_ms
        self.token = token
        self.extensions = extensions
        return b""


# -- unsecured tokens ---------------------------------------------------------------------

UNSECURED_OPTIONS = ("unsecuredValidatorPrincipalClaimName", "unsecuredValidatorScopeClaimName",
                     "unsecuredValidatorRequiredScope", "unsecuredValidatorAllowableClockSkewMs")


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenRejected("malformed Base64 URL encoded value") from None
    try:  # Jackson, as Kafka parses it, refuses NaN and Infinity
        doc = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise TokenRejected("malformed JSON") from None
    if not isinstance(doc, dict):
        return {}
    return {k: _jackson(v) for k, v in doc.items()}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _jackson(v: Any) -> Any:
    """What Kafka's unsecured JWS keeps of a JSON value: numbers, lists of strings, and
    everything else as its text."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return v
    if isinstance(v, list):
        return [_text(x) for x in v]
    return _text(v)


def _text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int | float):
        return str(v)
    return ""


def _scope_of(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    v = claims.get(name)
    if isinstance(v, str):
        return frozenset({v.strip()}) if v.strip() else frozenset()
    if isinstance(v, list):
        return frozenset(s.strip() for s in v if isinstance(s, str) and s.strip())
    if v is None:
        return frozenset()
    raise TokenRejected(f"The '{name}' claim was not of type List: {type(v).__name__}")


def parse_scope(text: str) -> list[str]:
    out: list[str] = []
    for item in text.split(" "):
        if not item:
            continue
        if any(c == '"' or c == "\\" or not 0x21 <= ord(c) <= 0x7E for c in item):
            raise ValueError(f"Invalid scope value: {item}")
        out.append(item)
    return out


@dataclass(frozen=True)
class UnsecuredValidator(Validator):
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @staticmethod
    def from_options(options: Mapping[str, str]) -> UnsecuredValidator:
        """From the JAAS options; ValueError names a bad one."""
        for key in options:
            if key.startswith("unsecuredValidator") and key not in UNSECURED_OPTIONS:
                raise ValueError(f"unknown option {key} (known: {', '.join(UNSECURED_OPTIONS)})")
        principal = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        scope = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        required = parse_scope((options.get("unsecuredValidatorRequiredScope") or "").strip())
        skew_text = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer, "
                             f"not {skew_text!r}") from None
        if skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew_text}")
        return UnsecuredValidator(principal, scope, tuple(required), skew)

    def validate(self, token: str, now_ms: int) -> OAuthToken:
        if ".." in token:
            raise TokenRejected("Malformed compact serialization contains '..'")
        splits = token.split(".")
        if len(splits) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 "
                                "dot-separated Base64URL-encoded values")
        header = _b64url_json(splits[0])
        claims = _b64url_json(splits[1])
        if "alg" not in header:
            raise TokenRejected("JWS header must have an Algorithm value")
        if header["alg"] != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        scope = _scope_of(claims, self.scope_claim)
        exp = claims.get("exp")
        if exp is None:
            raise TokenRejected("No expiration time in JWT")
        if not isinstance(exp, int | float):
            raise TokenRejected(f"The 'exp' claim was not of type Number: {type(exp).__name__}")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise TokenRejected(f"The '{self.principal_claim}' claim was not of type String")
        if principal is None or not principal.strip():
            raise TokenRejected(f"No principal name in JWT claim: {self.principal_claim}")
        iat = claims.get("iat")
        if iat is not None and not isinstance(iat, int | float):
            raise TokenRejected(f"The 'iat' claim was not of type Number: {type(iat).__name__}")
        if iat is not None and 1000 * iat > now_ms + self.clock_skew_ms:
            raise TokenRejected(f"The Issued At value ({iat} seconds) was after the indicated "
                                f"time ({now_ms} ms) plus allowable clock skew "
                                f"({self.clock_skew_ms} ms)")
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise TokenRejected(f"The indicated time ({now_ms} ms) minus allowable clock skew "
                                f"({self.clock_skew_ms} ms) was on or after the Expiration Time "
                                f"value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenRejected(f"The Expiration Time time ({exp} seconds) was not after the "
                                f"Issued At time ({iat} seconds)")
        for needed in self.required_scope:
            if needed not in scope:
                raise TokenRejected(
                    f"The provided scope ({sorted(scope)}) was missing a required scope "
                    f"({needed}).  All required scope elements: {list(self.required_scope)}",
                    status="insufficient_scope",
                    scope="[" + ", ".join(self.required_scope) + "]")
        return OAuthToken(token, principal, round(exp * 1000),
                          None if iat is None else round(iat * 1000), scope, claims)


# -- signed tokens --------------------------------------------------------------------------


class JwksError(Exception):
    pass


def _parse_jwks(text: str | bytes, where: str) -> list[Any]:
    import jwt

    try:
        doc = json.loads(text)
    except ValueError as e:
        raise JwksError(f"{where} is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksError(f"{where} is not a JWK set (an object with a \"keys\" list)")
    keys = []
    for k in doc["keys"]:
        if not isinstance(k, dict) or k.get("use", "sig") != "sig":
            continue
        try:
            keys.append(jwt.PyJWK(k))
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as e:
            log.warning("jwks_key_skipped", source=where, kid=k.get("kid"), reason=str(e))
    return keys


class Jwks:
    """The verification keys of `sasl.oauthbearer.jwks.endpoint.url`.

    file: the file is read at start (it must exist) and read again when its modification
    time changes (Kafka 4's CachedFile). http(s): fetched at start (a failure stops the
    node, as Kafka's RefreshingHttpsJwks.init does), then every `refresh_ms` by a daemon
    thread (started when a token is first checked), and sooner when a token names a key id
    the set lacks (at most once per `retry_backoff_ms`).
    """

    def __init__(self, url: str, refresh_ms: int = 3_600_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 10_000, timeout_s: float = 10.0) -> None:
        self.url = url
        parsed = urllib.parse.urlparse(url)
        self.scheme = parsed.scheme.lower()
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._keys: list[Any] = []
        self._mtime: float | None = None
        self._wake = threading.Event()
        self._last_expedite = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        if self.scheme == "file":
            self.path = Path(urllib.request.url2pathname(parsed.path))
            self._load_file()
        elif self.scheme in ("http", "https"):
            self.path = Path()
            self._keys = self._fetch()
        else:
            raise JwksError(f"a file:, http: or https: URL, not {url!r}")

    def _load_file(self) -> None:
        try:
            st = self.path.stat()
            text = self.path.read_bytes()
        except OSError as e:
            raise JwksError(f"cannot read the JWKS file {self.path}: {e}") from None
        keys = _parse_jwks(text, str(self.path))
        with self._lock:
            self._keys, self._mtime = keys, st.st_mtime

    def _fetch(self) -> list[Any]:
        req = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = resp.read(4 << 20)
        except (OSError, ValueError) as e:
            raise JwksError(f"cannot fetch the JWKS from {self.url}: {e}") from None
        return _parse_jwks(body, self.url)

    def start(self) -> None:
        """The refresh thread (http(s) only); idempotent."""
        with self._lock:
            if self.scheme == "file" or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._refresh_loop, daemon=True,
                                            name="skiff-jwks-refresh")
        self._thread.start()

    def close(self) -> None:
        """Stop the refresh thread."""
        self._closed = True
        self._wake.set()

    def _refresh_loop(self) -> None:
        backoff = self.retry_backoff_ms
        while True:
            woke = self._wake.wait(self.refresh_ms / 1000)
            self._wake.clear()
            if self._closed:
                return
            try:
                keys = self._fetch()
            except JwksError as e:
                log.warning("jwks_refresh_failed", url=self.url, error=str(e),
                            retry_in_ms=backoff)
                time.sleep(backoff / 1000)
                backoff = min(backoff * 2, self.retry_backoff_max_ms)
                self._wake.set()
                continue
            backoff = self.retry_backoff_ms
            with self._lock:
                self._keys = keys
            log.debug("jwks_refreshed", url=self.url, keys=len(keys), expedited=woke)

    def current(self) -> list[Any]:
        if self._thread is None and self.scheme != "file" and not self._closed:
            self.start()  # on first use: a set built only to check settings never starts it
        if self.scheme == "file":
            mtime: float | None
            try:
                mtime = self.path.stat().st_mtime
            except OSError:
                mtime = self._mtime
            if mtime != self._mtime:
                try:
                    self._load_file()
                except JwksError as e:
                    log.warning("jwks_reload_failed", path=str(self.path), error=str(e))
        with self._lock:
            return list(self._keys)

    def missing_key(self, kid: str | None) -> None:
        """A token named a key the set lacks: refresh soon (http(s))."""
        if self.scheme == "file" or self._thread is None:
            return
        now = time.monotonic()
        if now - self._last_expedite >= self.retry_backoff_ms / 1000:
            self._last_expedite = now
            self._wake.set()


_KTY_FOR_ALG = {"RS": "RSA", "PS": "RSA", "ES": "EC", "HS": "oct", "Ed": "OKP"}


@dataclass
class JwtValidator(Validator):
    jwks: Jwks
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30

    def _candidates(self, header: Mapping[str, Any]) -> list[Any]:
        alg = str(header.get("alg", ""))
        kid = header.get("kid")
        kty = _KTY_FOR_ALG.get(alg[:2])
        out = []
        for k in self.jwks.current():
            data = getattr(k, "_jwk_data", {})
            if kid is not None and data.get("kid") != kid:
                continue
            if kty is not None and data.get("kty") != kty:
                continue
            if "alg" in data and data["alg"] != alg:
                continue
            out.append(k)
        if not out and kid is not None:
            self.jwks.missing_key(str(kid))
        return out

    def validate(self, token: str, now_ms: int) -> OAuthToken:
        import jwt

        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise TokenRejected("Malformed JWT provided; expected three sections (header, "
                                "payload, and signature)")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenRejected(f"Could not validate the access token: {e}") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise TokenRejected("Could not validate the access token: the 'none' algorithm "
                                "is not allowed")
        candidates = self._candidates(header)
        if not candidates:
            raise TokenRejected("Could not validate the access token: no key of the JWKS "
                                f"matches kid={header.get('kid')!r} alg={alg}")
        options: dict[str, Any] = {
            "require": ["exp", "iat"], "verify_aud": bool(self.expected_audience),
            "verify_iss": self.expected_issuer is not None, "verify_iat": False,
            "verify_sub": False, "verify_jti": False,
        }
        claims: dict[str, Any] | None = None
        last: Exception | None = None
        for key in candidates:
            try:
                claims = jwt.decode(
                    token, key.key, algorithms=[alg], options=options,  # type: ignore[arg-type]
                    audience=list(self.expected_audience) or None,
                    issuer=self.expected_issuer, leeway=self.clock_skew_s)
                break
            except jwt.InvalidSignatureError as e:
                last = e
                continue
            except Exception as e:  # PyJWT's errors, and int(inf) in its claim checks
                raise TokenRejected(f"Could not validate the access token: "
                                    f"{type(e).__name__}: {e}") from None
        if claims is None:
            raise TokenRejected(f"Could not validate the access token: {last}")
        for name in ("exp", "iat"):
            if not isinstance(claims.get(name), int | float) or isinstance(claims[name], bool) \
                    or not math.isfinite(claims[name]):
                raise TokenRejected(f"Could not extract the '{name}' claim from the access "
                                    "token")
            if claims[name] < 0:
                raise TokenRejected(f"{name} value must be non-negative; value given was "
                                    f"\"{claims[name]}\"")
        sub = claims.get(self.sub_claim)
        if sub is not None and not isinstance(sub, str):
            raise TokenRejected(f"Could not extract the '{self.sub_claim}' claim from the "
                                "access token")
        if sub is None:
            raise TokenRejected(f"{self.sub_claim} value must be non-null")
        if not sub.strip():
            raise TokenRejected(f"{self.sub_claim} value must be non-empty")
        raw_scope = claims.get(self.scope_claim)
        scope: frozenset[str]
        if isinstance(raw_scope, str):
            scope = frozenset({raw_scope.strip()})
        elif isinstance(raw_scope, list):
            scope = frozenset(str(s).strip() for s in raw_scope)
        else:
            scope = frozenset()
        return OAuthToken(token, sub.strip(), math.floor(claims["exp"] * 1000),
                          math.floor(claims["iat"] * 1000), scope, claims)
