"""The answers of the three delegation-token writes (CreateDelegationToken,
RenewDelegationToken, ExpireDelegationToken) in the request's version: built once for the
broker's handlers (broker/handlers/*_delegation_token.py) and the controller listener's
Envelope (envelope.py)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.delegation_token import ERROR_TIMESTAMP, split_principal


def timestamp(ms: int) -> datetime.datetime:
    """A datetime_i64 field's value for `ms` milliseconds since the epoch (-1 included)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def create_response(request: Any, error: ErrorCode, owner: str, requester: str,
                    issue_ms: int = ERROR_TIMESTAMP, expiry_ms: int = ERROR_TIMESTAMP,
                    max_ms: int = ERROR_TIMESTAMP, token_id: str = "",
                    hmac: bytes = b"") -> Any:
    mod = response_module(request)
    owner_type, owner_name = split_principal(owner)
    requester_type, requester_name = split_principal(requester)
    return build(
        mod.CreateDelegationTokenResponse, error_code=error, principal_type=owner_type,
        principal_name=owner_name, token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name, issue_timestamp=timestamp(issue_ms),
        expiry_timestamp=timestamp(expiry_ms), max_timestamp=timestamp(max_ms),
        token_id=token_id, hmac=hmac, throttle_time=NO_THROTTLE)


def renew_response(request: Any, error: ErrorCode, expiry_ms: int = ERROR_TIMESTAMP) -> Any:
    mod = response_module(request)
    return build(mod.RenewDelegationTokenResponse, error_code=error,
                 expiry_timestamp=timestamp(expiry_ms), throttle_time=NO_THROTTLE)


def expire_response(request: Any, error: ErrorCode, expiry_ms: int = ERROR_TIMESTAMP) -> Any:
    mod = response_module(request)
    return build(mod.ExpireDelegationTokenResponse, error_code=error,
                 expiry_timestamp=timestamp(expiry_ms), throttle_time=NO_THROTTLE)
