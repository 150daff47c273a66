"""Kafka's DelegationTokenControlManager: create, renew and expire delegation tokens, and
remove expired ones. Pure: (image, requester principal, request, now_ms[, token id]) ->
the records to append and the answer; the shell passes the clock and a fresh token id.

Checks, in Kafka's order (DelegationTokenControlManager, Kafka 4.x):
  create  DELEGATION_TOKEN_AUTH_DISABLED (no delegation.token.secret.key), then
          INVALID_PRINCIPAL_TYPE (a renewer that is not a User); max timestamp = now +
          min(delegation.token.max.lifetime.ms, the request's max lifetime when > 0),
          expiry = min(max, now + delegation.token.expiry.time.ms)
  renew   AUTH_DISABLED, DELEGATION_TOKEN_NOT_FOUND (no token with that HMAC),
          DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH (neither the owner nor a
          renewer); expiry = min(max, now + min(expiry.time.ms, the period when > 0))
  expire  AUTH_DISABLED, NOT_FOUND, OWNER_MISMATCH; a negative period removes the token at
          once (expiry answered: now), else EXPIRED if it already is, else expiry =
          min(max, now + period)
  sweep   every delegation.token.expiry.check.interval.ms: a RemoveDelegationToken record
          for each token past its expiry or max timestamp
Whether the caller may ask at all (a token-authenticated or PLAINTEXT connection may not;
CREATE_TOKENS on another owner) is the broker's check (broker/handlers/).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import ControllerResult
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage
from broker.security.delegation_token import (
    USER_TYPE,
    DelegationTokenSettings,
    TokenInformation,
    create_hmac,
    split_principal,
    token_for_hmac,
)

LONG_MAX = (1 << 63) - 1


def _sum(now: int, duration: int) -> int:
    return LONG_MAX if now > LONG_MAX - duration else now + duration


@dataclass(frozen=True, slots=True)
class CreateTokenReply:
    error: ErrorCode
    owner: str
    requester: str
    issue_ms: int = 0
    expiry_ms: int = 0
    max_ms: int = 0
    token_id: str = ""
    hmac: bytes = b""


@dataclass(frozen=True, slots=True)
class TokenTimeReply:
    """Renew and expire: an error, or the token's new expiry timestamp."""

    error: ErrorCode
    expiry_ms: int = 0


@dataclass
class DelegationTokenControlManager:
    settings: DelegationTokenSettings
    _last_sweep_ms: int = field(default=-1)

    def create(self, image: MetadataImage, requester: str, owner: str | None,
               renewers: Sequence[str], max_lifetime_ms: int, now_ms: int,
               token_id: str) -> ControllerResult[CreateTokenReply]:
        """`owner`: Type:Name, or None for the requester; `renewers`: Type:Name each."""
        owner = owner or requester
        fail = CreateTokenReply(ErrorCode.none, owner, requester)
        s = self.settings
        if not s.enabled or s.secret_key is None:
            return ControllerResult(
                [], replace(fail, error=ErrorCode.delegation_token_auth_disabled))
        for r in renewers:
            if split_principal(r)[0] != USER_TYPE:
                return ControllerResult([], replace(fail, error=ErrorCode.invalid_principal_type))
        lifetime = s.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_ms = _sum(now_ms, lifetime)
        expiry_ms = min(max_ms, _sum(now_ms, s.expiry_time_ms))
        token = TokenInformation(token_id, owner, requester, tuple(renewers), now_ms, max_ms,
                                 expiry_ms)
        return ControllerResult([rec.delegation_token_record(token)], CreateTokenReply(
            ErrorCode.none, owner, requester, now_ms, expiry_ms, max_ms, token_id,
            create_hmac(token_id, s.secret_key)))

    def _find(self, image: MetadataImage, hmac: bytes) -> TokenInformation | None:
        assert self.settings.secret_key is not None
        return token_for_hmac(image.delegation_tokens, hmac, self.settings.secret_key)

    def renew(self, image: MetadataImage, requester: str, hmac: bytes, renew_period_ms: int,
              now_ms: int) -> ControllerResult[TokenTimeReply]:
        s = self.settings
        if not s.enabled:
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_auth_disabled))
        token = self._find(image, hmac)
        if token is None:
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_not_found))
        if token.expired(now_ms):
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_expired))
        if not _may_renew(token, requester):
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_owner_mismatch))
        period = s.expiry_time_ms
        if renew_period_ms > 0:
            period = min(period, renew_period_ms)
        expiry_ms = min(token.max_ms, _sum(now_ms, period))
        return ControllerResult([rec.delegation_token_record(replace(token, expiry_ms=expiry_ms))],
                                TokenTimeReply(ErrorCode.none, expiry_ms))

    def expire(self, image: MetadataImage, requester: str, hmac: bytes,
               expiry_period_ms: int, now_ms: int) -> ControllerResult[TokenTimeReply]:
        s = self.settings
        if not s.enabled:
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_auth_disabled))
        token = self._find(image, hmac)
        if token is None:
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_not_found))
        if not _may_renew(token, requester):
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_owner_mismatch))
        if expiry_period_ms < 0:  # expire at once
            return ControllerResult([rec.remove_delegation_token_record(token.token_id)],
                                    TokenTimeReply(ErrorCode.none, now_ms))
        if token.expired(now_ms):
            return ControllerResult([], TokenTimeReply(ErrorCode.delegation_token_expired))
        expiry_ms = min(token.max_ms, _sum(now_ms, expiry_period_ms))
        return ControllerResult([rec.delegation_token_record(replace(token, expiry_ms=expiry_ms))],
                                TokenTimeReply(ErrorCode.none, expiry_ms))

    def sweep(self, image: MetadataImage, now_ms: int) -> list[Any]:
        """RemoveDelegationToken records for the expired tokens, once every
        delegation.token.expiry.check.interval.ms (the first call only starts the clock,
        as Kafka's controller schedules its first sweep one interval after it starts)."""
        if self._last_sweep_ms < 0:
            self._last_sweep_ms = now_ms
            return []
        if now_ms - self._last_sweep_ms < self.settings.expiry_check_interval_ms:
            return []
        self._last_sweep_ms = now_ms
        return [rec.remove_delegation_token_record(t.token_id)
                for t in sorted(image.delegation_tokens.values(), key=lambda t: t.token_id)
                if t.expired(now_ms)]


def _may_renew(token: TokenInformation, principal: str) -> bool:
    """Kafka's allowedToRenew: the owner or a renewer (not the requester)."""
    return token.owner == principal or principal in token.renewers
