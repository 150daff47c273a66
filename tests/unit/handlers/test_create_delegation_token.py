"""CreateDelegationToken v1-v3 through the handler and the local controller: a
DelegationToken record reaches the image, the answer carries the HMAC Kafka computes
(HMAC-SHA512 of the token id under delegation.token.secret.key), and each of Kafka's
refusals comes back in its order."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.security.delegation_token import DEFAULT_EXPIRY_TIME_MS
from tests.unit.handlers.conftest import roundtrip
from tests.unit.handlers.tokens_support import SECRET, WITH_TOKENS, create, encoded, epoch_ms


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_writes_the_token_and_answers_its_hmac(node_factory: Any, version: int) -> None:
    node = node_factory(WITH_TOKENS)
    resp = create(node, version=version, renewers=("User:bob",))
    assert resp.error_code is ErrorCode.none
    assert roundtrip(resp) == resp
    assert (resp.principal_type, resp.principal_name) == ("User", "alice")
    token = node.metadata.delegation_tokens[resp.token_id]
    assert bytes(resp.hmac) == hmac.new(SECRET.encode(), resp.token_id.encode(),
                                        hashlib.sha512).digest()
    assert token.owner == token.requester == "User:alice"
    assert token.renewers == ("User:bob",)
    issue = epoch_ms(resp.issue_timestamp)
    assert (token.issue_ms, token.expiry_ms, token.max_ms) == (
        issue, epoch_ms(resp.expiry_timestamp), epoch_ms(resp.max_timestamp))
    assert token.expiry_ms == issue + DEFAULT_EXPIRY_TIME_MS
    assert token.max_ms == issue + 7 * DEFAULT_EXPIRY_TIME_MS
    if version >= 3:
        assert resp.token_requester_principal_name == "alice"


def test_max_lifetime_caps_the_expiry(node_factory: Any) -> None:
    node = node_factory(WITH_TOKENS)
    resp = create(node, max_lifetime_ms=60_000)
    assert epoch_ms(resp.max_timestamp) - epoch_ms(resp.issue_timestamp) == 60_000
    assert resp.expiry_timestamp == resp.max_timestamp


def test_another_owner_needs_create_tokens(node_factory: Any) -> None:
    node = node_factory({**WITH_TOKENS,
                         "authorizer.class.name":
                             "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    resp = create(node, owner="User:carol")
    assert resp.error_code is ErrorCode.delegation_token_authorization_failed
    assert (resp.principal_name, resp.token_requester_principal_name) == ("carol", "alice")
    assert resp.token_id == "" and bytes(resp.hmac) == b""
    assert epoch_ms(resp.issue_timestamp) == -1 and encoded(resp)  # written as Kafka does
    assert not node.metadata.delegation_tokens
    # without an authorizer anyone may name an owner
    plain = node_factory(WITH_TOKENS)
    ok = create(plain, owner="User:carol")
    assert ok.error_code is ErrorCode.none
    token = plain.metadata.delegation_tokens[ok.token_id]
    assert (token.owner, token.requester) == ("User:carol", "User:alice")


@pytest.mark.parametrize(("protocol", "principal", "token", "allowed"), [
    ("PLAINTEXT", "User:ANONYMOUS", False, False),
    ("SSL", "User:ANONYMOUS", False, False),      # one-way TLS
    ("SSL", "User:CN=client", False, True),       # a client certificate
    ("SASL_SSL", "User:alice", True, False),      # authenticated with a token
    ("SASL_SSL", "User:alice", False, True),
])
def test_which_connections_may_ask(node_factory: Any, protocol: str, principal: str,
                                   token: bool, allowed: bool) -> None:
    node = node_factory(WITH_TOKENS)
    resp = create(node, principal, protocol=protocol, token=token)
    expected = ErrorCode.none if allowed else ErrorCode.delegation_token_request_not_allowed
    assert resp.error_code is expected
    assert len(node.metadata.delegation_tokens) == (1 if allowed else 0)


def test_refusals(node_factory: Any) -> None:
    disabled = node_factory()
    resp = create(disabled)
    assert resp.error_code is ErrorCode.delegation_token_auth_disabled
    node = node_factory(WITH_TOKENS)
    resp = create(node, renewers=("Group:ops",))
    assert resp.error_code is ErrorCode.invalid_principal_type
    assert not node.metadata.delegation_tokens
