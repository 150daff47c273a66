"""The server side of SASL on one connection: a small pure state machine.

Kafka's protocol (SaslServerAuthenticator): before authentication a connection may send
ApiVersions, then SaslHandshake v1 naming a mechanism, then SaslAuthenticate requests
carrying the mechanism's tokens until it succeeds or fails. SaslHandshake v0 is answered
(librdkafka before 2.x only enables SASL when v0 is advertised) but its raw-token flow is
not: tokens must come in SaslAuthenticate requests; a raw token does not parse as a
request and closes the connection.

All transitions, by input:

    state            input                          -> state, answer
    HANDSHAKE        ApiVersions                    -> HANDSHAKE (answered normally)
    HANDSHAKE        SaslHandshake(enabled m)       -> AUTHENTICATE, NONE
    HANDSHAKE        SaslHandshake(other m)         -> FAILED, UNSUPPORTED_SASL_MECHANISM
    AUTHENTICATE     SaslAuthenticate, step goes on -> AUTHENTICATE, NONE + token
    AUTHENTICATE     SaslAuthenticate, step done    -> AUTHENTICATED, NONE + token + lifetime
    AUTHENTICATE     SaslAuthenticate, step fails   -> FAILED, SASL_AUTHENTICATION_FAILED
    AUTHENTICATED    other request, session live    -> AUTHENTICATED (served)
    AUTHENTICATED    other request, session expired -> FAILED (connection closed, KIP-368)
    AUTHENTICATED    SaslHandshake (re-auth)        -> REAUTH_AUTHENTICATE, as above
    REAUTH_AUTH..    SaslAuthenticate done, same principal -> AUTHENTICATED (new lifetime)
    REAUTH_AUTH..    ... another principal          -> FAILED, SASL_AUTHENTICATION_FAILED
    HANDSHAKE/AUTH.. any other request              -> FAILED (connection closed)
    FAILED           anything                       -> FAILED (connection closed)

The connection closes after writing a FAILED answer. Session lifetime (KIP-368): with
`connections.max.reauth.ms` > 0, SaslAuthenticate v1+ answers carry it in
session_lifetime_ms, and a request after it has passed closes the connection unless the
client re-authenticated.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.scram import ScramCredential, ScramError, ScramServer, TokenLookup

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
# What this node can authenticate with to other nodes (inter-broker, controller).
CLIENT_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    REAUTH_AUTHENTICATE = "reauth_authenticate"
    FAILED = "failed"


class AuthFailed(Exception):
    """The mechanism refused the client: `public` is what the client is told."""

    def __init__(self, public: str, detail: str) -> None:
        super().__init__(detail)
        self.public = public


class Mechanism(Protocol):
    complete: bool
    username: str | None

    def step(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one message `authzid NUL authcid NUL passwd`."""

    def __init__(self, passwords: Callable[[str], str | None]) -> None:
        self._passwords = passwords
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("Invalid SASL/PLAIN response: expected 3 tokens",
                             f"PLAIN message with {len(parts)} parts")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthFailed("Invalid SASL/PLAIN response", "not UTF-8") from None
        if not user:
            raise AuthFailed("Authentication failed: username not specified", "empty user")
        if authzid and authzid != user:
            raise AuthFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username", "authzid != user")
        expected = self._passwords(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthFailed("Authentication failed: Invalid username or password",
                             f"bad password or unknown user {user!r}")
        self.complete = True
        self.username = user
        return b""


class _Scram:
    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 tokens: Callable[[str, str], TokenLookup | None] | None = None) -> None:
        self._server = ScramServer(
            mechanism, lambda user: lookup(mechanism, user),
            token_lookup=None if tokens is None else lambda tid: tokens(mechanism, tid))
        self._mechanism = mechanism
        self.complete = False
        self.username: str | None = None

    @property
    def token_authenticated(self) -> bool:
        """The client authenticated with a delegation token (tokenauth=true)."""
        return self._server.token_authenticated

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential expires (Kafka's CREDENTIAL_LIFETIME_MS negotiated property):
        a delegation token's expiry; None for a SCRAM user."""
        return self._server.token_expiry_ms if self._server.token_authenticated else None

    def step(self, token: bytes) -> bytes:
        try:
            out = self._server.step(token)
        except ScramError as e:
            raise AuthFailed("Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self._mechanism}",
                             str(e)) from None
        self.complete = self._server.complete
        self.username = self._server.username
        return out


@dataclass(frozen=True)
class SaslConfig:
    """One listener's SASL server settings."""

    enabled: tuple[str, ...]
    plain_users: Mapping[str, str]                      # PLAIN's user_<name> options
    scram: Callable[[str, str], ScramCredential | None]  # (mechanism, user) -> credential
    reauth_ms: int = 0                                  # connections.max.reauth.ms
    # OAUTHBEARER's exchange (broker/security/oauthbearer.py), when enabled
    oauthbearer: Callable[[], Mechanism] | None = None
    # (mechanism, token id) -> a delegation token's SCRAM credential, owner name and expiry
    # (broker/security/delegation_token.py); None: tokenauth is refused
    tokens: Callable[[str, str], TokenLookup | None] | None = None

    def mechanism(self, name: str) -> Mechanism:
        if name == "PLAIN":
            return PlainServer(self.plain_users.get)
        if name == "OAUTHBEARER" and self.oauthbearer is not None:
            return self.oauthbearer()
        return _Scram(name, self.scram, self.tokens)


@dataclass(frozen=True, slots=True)
class Answer:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    mechanisms: tuple[str, ...] = ()

    @property
    def closes(self) -> bool:
        return self.error is not ErrorCode.none


class SaslSession:
    def __init__(self, config: SaslConfig, now_ms: Callable[[], int]) -> None:
        self.config = config
        self._now_ms = now_ms
        self.state = State.HANDSHAKE
        self._mechanism: Mechanism | None = None
        self._mechanism_name = ""
        self.principal: str | None = None
        self.expires_ms: int | None = None
        self.failure: str | None = None
        self.token_authenticated = False
        # The mechanism of the last successful exchange (OAUTHBEARER keeps its token there).
        self.authenticated_by: Mechanism | None = None

    @property
    def mechanism_name(self) -> str:
        return self._mechanism_name

    @property
    def authenticated(self) -> bool:
        return self.state in (State.AUTHENTICATED, State.REAUTH_AUTHENTICATE)

    def admits(self, api_key: int) -> str | None:
        """Whether a request other than SaslHandshake/SaslAuthenticate may be served now;
        a reason string means: close the connection."""
        if self.state is State.FAILED:
            return "authentication failed"
        if self.state in (State.HANDSHAKE, State.AUTHENTICATE):
            if api_key == API_VERSIONS and self.state is State.HANDSHAKE:
                return None
            return f"api key {api_key} before SASL authentication"
        if self.expires_ms is not None and self._now_ms() >= self.expires_ms:
            self.state = State.FAILED
            return "SASL session expired without re-authentication (connections.max.reauth.ms)"
        return None

    def _fail(self, error: ErrorCode, message: str, detail: str) -> Answer:
        self.state = State.FAILED
        self.failure = detail
        return Answer(error, message)

    def handshake(self, mechanism: str) -> Answer:
        enabled = tuple(self.config.enabled)
        if self.state not in (State.HANDSHAKE, State.AUTHENTICATED):
            return self._fail(ErrorCode.illegal_sasl_state,
                              f"Unexpected SaslHandshake in state {self.state.value}",
                              "handshake out of order")
        if mechanism not in enabled:
            self.state = State.FAILED
            self.failure = f"mechanism {mechanism!r} not enabled"
            return Answer(ErrorCode.unsupported_sasl_mechanism,
                          f"Unsupported SASL mechanism {mechanism}", mechanisms=enabled)
        if self.state is State.AUTHENTICATED and mechanism != self._mechanism_name:
            return self._fail(ErrorCode.illegal_sasl_state,
                              "Re-authentication must use the same mechanism",
                              "re-authentication with another mechanism")
        self.state = (State.AUTHENTICATE if self.state is State.HANDSHAKE
                      else State.REAUTH_AUTHENTICATE)
        self._mechanism_name = mechanism
        self._mechanism = self.config.mechanism(mechanism)
        return Answer(mechanisms=enabled)

    def authenticate(self, token: bytes, version: int) -> Answer:
        if self.state not in (State.AUTHENTICATE, State.REAUTH_AUTHENTICATE) \
                or self._mechanism is None:
            return self._fail(ErrorCode.illegal_sasl_state,
                              f"Unexpected SaslAuthenticate in state {self.state.value}",
                              "authenticate without handshake")
        try:
            out = self._mechanism.step(token)
        except AuthFailed as e:
            return self._fail(ErrorCode.sasl_authentication_failed, e.public, str(e))
        if not self._mechanism.complete:
            return Answer(auth_bytes=out)
        principal = f"User:{self._mechanism.username}"
        if self.state is State.REAUTH_AUTHENTICATE and principal != self.principal:
            return self._fail(ErrorCode.sasl_authentication_failed,
                              "Cannot change principals during re-authentication",
                              f"re-authentication as {principal}, was {self.principal}")
        now = self._now_ms()
        expiry = getattr(self._mechanism, "credential_expiry_ms", None)
        by_token = bool(getattr(self._mechanism, "token_authenticated", False))
        if by_token and expiry is not None and expiry < now:
            # Kafka authenticates it with a session that ends at once (the connection
            # closes on the next request); refused here, with the reason. (An OAUTHBEARER
            # token's exp was checked by its validator, within the allowed clock skew.)
            return self._fail(ErrorCode.sasl_authentication_failed,
                              "Authentication failed: the delegation token has expired",
                              f"delegation token of {principal} expired at {expiry}")
        self.principal = principal
        self.token_authenticated = by_token
        self.state = State.AUTHENTICATED
        self.authenticated_by, self._mechanism = self._mechanism, None
        # KIP-368 as Kafka's SaslServerAuthenticator computes it: the session ends at
        # connections.max.reauth.ms or the credential's expiry (a delegation token's, an
        # OAUTHBEARER token's exp), whichever comes first.
        lifetime = self.config.reauth_ms
        if expiry is not None:
            left = max(0, int(expiry) - now)
            lifetime = left if lifetime <= 0 else min(left, lifetime)
        bounded = lifetime > 0 or expiry is not None
        self.expires_ms = now + lifetime if bounded else None
        return Answer(auth_bytes=out, session_lifetime_ms=lifetime if version >= 1 else 0)


def handshake_response(version: int, answer: Answer) -> Any:
    from kio.schema.sasl_handshake.v0.response import SaslHandshakeResponse as V0
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse as V1

    cls = V0 if version == 0 else V1
    return cls(error_code=answer.error, mechanisms=answer.mechanisms)


def authenticate_response(version: int, answer: Answer) -> Any:
    import datetime

    from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as V0
    from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse as V1
    from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as V2
    from kio.static.primitive import i64Timedelta

    # Kafka's SaslAuthenticateResponseData leaves error_message at its default "" on
    # success (an OAUTHBEARER challenge included).
    message = answer.message if answer.message is not None else ""
    if version == 0:
        return V0(error_code=answer.error, error_message=message,
                  auth_bytes=answer.auth_bytes)
    cls = V1 if version == 1 else V2
    return cls(error_code=answer.error, error_message=message,
               auth_bytes=answer.auth_bytes,
               session_lifetime=i64Timedelta.parse(
                   datetime.timedelta(milliseconds=answer.session_lifetime_ms)))
