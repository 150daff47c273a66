"""ExpireDelegationToken v1-v2 through the handler and the local controller: a negative
period removes the token at once (RemoveDelegationToken), a positive one moves its expiry,
only the owner or a renewer may, and an expired token is EXPIRED unless removed at once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import expire_delegation_token
from tests.unit.handlers.conftest import roundtrip, run
from tests.unit.handlers.tokens_support import WITH_TOKENS, create, ctx, epoch_ms, ms, request


def expire(node: Any, hmac: bytes, principal: str, period_ms: int, version: int = 2,
           **kw: Any) -> Any:
    req = request("expire_delegation_token", version, "ExpireDelegationTokenRequest",
                  hmac=hmac, expiry_time_period=ms(period_ms))
    return run(expire_delegation_token.handle(node, ctx(40, version, principal, **kw), req))


@pytest.mark.parametrize("version", [1, 2])
def test_expire_at_once_removes_the_token(node_factory: Any, version: int) -> None:
    node = node_factory(WITH_TOKENS)
    token = create(node)
    before = int(time.time() * 1000)
    resp = expire(node, bytes(token.hmac), "User:alice", -1, version)
    assert resp.error_code is ErrorCode.none
    assert roundtrip(resp) == resp
    assert before <= epoch_ms(resp.expiry_timestamp) <= int(time.time() * 1000)
    assert token.token_id not in node.metadata.delegation_tokens
    assert expire(node, bytes(token.hmac), "User:alice", -1).error_code is \
        ErrorCode.delegation_token_not_found


def test_a_positive_period_moves_the_expiry(node_factory: Any) -> None:
    node = node_factory(WITH_TOKENS)
    token = create(node, renewers=("User:bob",))
    resp = expire(node, bytes(token.hmac), "User:bob", 50)
    assert resp.error_code is ErrorCode.none
    stored = node.metadata.delegation_tokens[token.token_id]
    assert stored.expiry_ms == epoch_ms(resp.expiry_timestamp) < epoch_ms(token.expiry_timestamp)
    time.sleep(0.01 + max(0, stored.expiry_ms - int(time.time() * 1000)) / 1000)
    # expired now: renewing or moving it again is refused, removing it is not
    assert expire(node, bytes(token.hmac), "User:alice", 1000).error_code is \
        ErrorCode.delegation_token_expired
    assert expire(node, bytes(token.hmac), "User:alice", -1).error_code is ErrorCode.none


def test_refusals(node_factory: Any) -> None:
    node = node_factory(WITH_TOKENS)
    token = create(node)
    assert expire(node, bytes(token.hmac), "User:bob", -1).error_code is \
        ErrorCode.delegation_token_owner_mismatch
    assert expire(node, bytes(token.hmac), "User:alice", -1, token=True).error_code is \
        ErrorCode.delegation_token_request_not_allowed
    assert expire(node, bytes(token.hmac), "User:ANONYMOUS", -1, protocol="SSL").error_code \
        is ErrorCode.delegation_token_request_not_allowed
    assert token.token_id in node.metadata.delegation_tokens
