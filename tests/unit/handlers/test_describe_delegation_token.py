"""DescribeDelegationToken v1-v3 from the broker's image: which tokens a caller sees (its
own, those it requested or may renew, those it has DESCRIBE or DESCRIBE_TOKENS ACLs for),
the owner filter (an empty list: none), each with its HMAC."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import describe_delegation_token
from broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.unit.handlers.conftest import roundtrip, run
from tests.unit.handlers.tokens_support import WITH_TOKENS, create, ctx, request

AUTHZ = {**WITH_TOKENS,
         "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


def describe(node: Any, principal: str, owners: list[str] | None = None, version: int = 3,
             **kw: Any) -> Any:
    import importlib

    m = importlib.import_module(f"kio.schema.describe_delegation_token.v{version}.request")
    req = request("describe_delegation_token", version, "DescribeDelegationTokenRequest",
                  owners=None if owners is None else tuple(
                      m.DescribeDelegationTokenOwner(principal_type=o.split(":")[0],
                                                     principal_name=o.split(":")[1])
                      for o in owners))
    return run(describe_delegation_token.handle(node, ctx(41, version, principal, **kw), req))


def ids(resp: Any) -> set[str]:
    assert resp.error_code is ErrorCode.none
    return {t.token_id for t in resp.tokens}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_owner_requester_and_renewers_see_their_tokens(node_factory: Any, version: int) -> None:
    node = node_factory(AUTHZ)
    mine = create(node, "User:alice", renewers=("User:bob",))
    other = create(node, "User:carol")
    resp = describe(node, "User:alice", version=version)
    assert roundtrip(resp) == resp
    (t,) = resp.tokens
    assert (t.token_id, bytes(t.hmac), t.principal_name) == (mine.token_id, bytes(mine.hmac),
                                                            "alice")
    assert [(r.principal_type, r.principal_name) for r in t.renewers] == [("User", "bob")]
    assert ids(describe(node, "User:bob", version=version)) == {mine.token_id}
    assert ids(describe(node, "User:mallory", version=version)) == set()
    assert ids(describe(node, "User:alice", owners=[], version=version)) == set()
    assert ids(describe(node, "User:bob", owners=["User:alice"])) == {mine.token_id}
    assert ids(describe(node, "User:carol")) == {other.token_id}
    assert ids(describe(node, "User:alice", owners=["User:dave"])) == set()


def test_acls_let_others_describe(node_factory: Any) -> None:
    node = node_factory(AUTHZ)
    token = create(node, "User:alice")
    assert ids(describe(node, "User:ops")) == set()
    import uuid

    from broker.metadata import records as rec

    def grant(rtype: ResourceType, name: str, op: AclOperation) -> None:
        run(node.quorum.append(rec.encode_all([rec.access_control_entry_record(
            uuid.uuid4(), AclBinding(rtype, name, PatternType.LITERAL, "User:ops", "*", op,
                                     AclPermissionType.ALLOW))])))

    grant(ResourceType.USER, "User:alice", AclOperation.DESCRIBE_TOKENS)
    assert ids(describe(node, "User:ops")) == {token.token_id}
    assert ids(describe(node, "User:audit")) == set()
    grant(ResourceType.DELEGATION_TOKEN, token.token_id, AclOperation.DESCRIBE)
    assert ids(describe(node, "User:ops")) == {token.token_id}


def test_refusals(node_factory: Any) -> None:
    node = node_factory(WITH_TOKENS)
    create(node)
    assert describe(node, "User:alice", token=True).error_code is \
        ErrorCode.delegation_token_request_not_allowed
    assert describe(node, "User:ANONYMOUS", protocol="PLAINTEXT").error_code is \
        ErrorCode.delegation_token_request_not_allowed
    assert describe(node_factory(), "User:alice").error_code is \
        ErrorCode.delegation_token_auth_disabled
