"""Delegation tokens (KIP-48) as Kafka's KRaft brokers serve them: the token's data, its
HMAC, its SCRAM credentials, who may see it.

A token is created by the active controller (broker/controller/delegation_token_control.py)
and lives in the metadata log as a DelegationToken record (Kafka's DelegationTokenRecord:
owner, requester, renewers, issue/max/expiry timestamps, token id); every node replays it
into its image (`MetadataImage.delegation_tokens`). The HMAC is not in the log: it is
HMAC-SHA512 of the token id under `delegation.token.secret.key`, which every node has, as
in Kafka (DelegationTokenManager.createHmac).

A client authenticates with a token over SCRAM: user name = token id, password = the HMAC
in base64, and the SCRAM extension `tokenauth=true`; it is then the token's owner
(`User:<owner name>`), marked token-authenticated (it may not create, renew, expire or
describe tokens). Each node derives the token's SCRAM credentials from the HMAC (4096
iterations, a random salt, as Kafka's DelegationTokenManager.prepareScramCredentials) the
first time the token is used, and keeps them while the token lives.

Settings (Kafka's names and defaults): `delegation.token.secret.key` (tokens are disabled
unless set: DELEGATION_TOKEN_AUTH_DISABLED), `delegation.token.max.lifetime.ms` (7 days),
`delegation.token.expiry.time.ms` (1 day), `delegation.token.expiry.check.interval.ms`
(1 hour: how often the controller removes expired tokens).
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.security import scram

USER_TYPE = "User"
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 3600 * 1000
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 3600 * 1000
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


@dataclass(frozen=True, slots=True)
class DelegationTokenSettings:
    secret_key: str | None = None
    max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS
    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS
    expiry_check_interval_ms: int = DEFAULT_EXPIRY_CHECK_INTERVAL_MS

    @property
    def enabled(self) -> bool:
        """Kafka's KafkaConfig.tokenAuthEnabled: a non-empty secret key."""
        return bool(self.secret_key)

    @staticmethod
    def from_config(cfg: Any) -> DelegationTokenSettings:
        if cfg is None:
            return DelegationTokenSettings()
        key = cfg.get("delegation.token.secret.key")
        return DelegationTokenSettings(
            secret_key=str(key) if key else None,
            max_lifetime_ms=int(cfg["delegation.token.max.lifetime.ms"]),
            expiry_time_ms=int(cfg["delegation.token.expiry.time.ms"]),
            expiry_check_interval_ms=int(cfg["delegation.token.expiry.check.interval.ms"]))


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """Kafka's TokenInformation; principals as `Type:Name` strings."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: owner, requester or a renewer."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


def split_principal(principal: str) -> tuple[str, str]:
    """`User:alice` -> ("User", "alice") (Kafka's SecurityUtils.parseKafkaPrincipal: split
    at the first colon)."""
    kind, sep, name = principal.partition(":")
    if not sep:
        raise ValueError(f"principal {principal!r} is not of the form Type:Name")
    return kind, name


def join_principal(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """HMAC-SHA512 of the token id under the secret key (Kafka's createHmac)."""
    return _hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"),
                     hashlib.sha512).digest()


def hmac_base64(token_id: str, secret_key: str) -> str:
    """The token's password for SCRAM: its HMAC in base64 (DelegationToken.hmacAsBase64String)."""
    return base64.b64encode(create_hmac(token_id, secret_key)).decode("ascii")


def token_for_hmac(tokens: Any, hmac: bytes, secret_key: str) -> TokenInformation | None:
    """The token whose HMAC is `hmac` (Kafka's DelegationTokenCache.tokenForHmac)."""
    for token in tokens.values():
        if _hmac.compare_digest(create_hmac(token.token_id, secret_key), hmac):
            return token  # type: ignore[no-any-return]
    return None


def describable(requester: str, owners: Sequence[str] | None, token: TokenInformation,
                may_describe_token: Callable[[str], bool],
                may_describe_owner: Callable[[str], bool]) -> bool:
    """Kafka's DelegationTokenManager.filterToken: tokens of the owners asked for (any when
    `owners` is None) that the requester owns, requested or may renew, or may DESCRIBE
    (the token) or DESCRIBE_TOKENS (its owner, a User resource)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return may_describe_token(token.token_id) or may_describe_owner(token.owner)


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """What SCRAM needs to authenticate with a token: the credential and whose it is."""

    credential: scram.ScramCredential
    owner_name: str
    expiry_ms: int


class TokenCredentials:
    """A node's SCRAM credentials of live tokens, derived on first use and kept per (token
    id, mechanism) until the token's HMAC or the token is gone."""

    def __init__(self, settings: DelegationTokenSettings,
                 tokens: Callable[[], Any]) -> None:
        self.settings = settings
        self._tokens = tokens
        self._cache: dict[tuple[str, str], scram.ScramCredential] = {}

    def lookup(self, mechanism: str, token_id: str) -> TokenCredential | None:
        key = self.settings.secret_key
        if not key:
            return None
        current = self._tokens()
        token = current.get(token_id) if current is not None else None
        if token is None:
            self._cache.pop((token_id, mechanism), None)
            return None
        cred = self._cache.get((token_id, mechanism))
        if cred is None:
            if len(self._cache) > 4096:  # tokens come and go: drop the ones gone
                for k in [k for k in self._cache if k[0] not in current]:
                    del self._cache[k]
            cred = scram.credential(mechanism, hmac_base64(token_id, key),
                                    iterations=scram.MIN_ITERATIONS)
            self._cache[(token_id, mechanism)] = cred
        _kind, name = split_principal(token.owner)
        return TokenCredential(cred, name, token.expiry_ms)
