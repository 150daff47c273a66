"""RenewDelegationToken v1-v2 through the handler and the local controller: the owner or a
renewer moves the expiry (capped by the max timestamp), the requester alone may not, an
unknown HMAC is not found, and the connection checks come first."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import renew_delegation_token
from tests.unit.handlers.conftest import roundtrip, run
from tests.unit.handlers.tokens_support import WITH_TOKENS, create, ctx, epoch_ms, ms, request


def renew(node: Any, hmac: bytes, principal: str, period_ms: int = -1, version: int = 2,
          **kw: Any) -> Any:
    req = request("renew_delegation_token", version, "RenewDelegationTokenRequest",
                  hmac=hmac, renew_period=ms(period_ms))
    return run(renew_delegation_token.handle(node, ctx(39, version, principal, **kw), req))


@pytest.mark.parametrize("version", [1, 2])
def test_renewer_and_owner_renew(node_factory: Any, version: int) -> None:
    node = node_factory(WITH_TOKENS)
    token = create(node, renewers=("User:bob",), max_lifetime_ms=10 * 3600_000)
    issued = epoch_ms(token.issue_timestamp)
    resp = renew(node, bytes(token.hmac), "User:bob", 3600_000, version)
    assert resp.error_code is ErrorCode.none
    assert roundtrip(resp) == resp
    stored = node.metadata.delegation_tokens[token.token_id]
    assert stored.expiry_ms == epoch_ms(resp.expiry_timestamp)
    assert issued + 3600_000 <= stored.expiry_ms < issued + 3600_000 + 60_000
    # the default period (a day) is capped by the max timestamp
    resp = renew(node, bytes(token.hmac), "User:alice")
    assert resp.error_code is ErrorCode.none
    assert epoch_ms(resp.expiry_timestamp) == epoch_ms(token.max_timestamp)


def test_refusals(node_factory: Any) -> None:
    node = node_factory(WITH_TOKENS)
    token = create(node, "User:alice", owner="User:carol")  # alice is the requester only
    hmac = bytes(token.hmac)
    assert renew(node, hmac, "User:alice").error_code is \
        ErrorCode.delegation_token_owner_mismatch
    assert renew(node, hmac, "User:mallory").error_code is \
        ErrorCode.delegation_token_owner_mismatch
    assert renew(node, b"\0" * 64, "User:carol").error_code is \
        ErrorCode.delegation_token_not_found
    refused = renew(node, hmac, "User:carol", token=True)
    assert refused.error_code is ErrorCode.delegation_token_request_not_allowed
    assert epoch_ms(refused.expiry_timestamp) == -1
    assert renew(node, hmac, "User:ANONYMOUS", protocol="PLAINTEXT").error_code is \
        ErrorCode.delegation_token_request_not_allowed
    assert renew(node_factory(), hmac, "User:carol").error_code is \
        ErrorCode.delegation_token_auth_disabled
