"""Envelope (KIP-590) on the controller listener: the delegation-token writes a broker sends
on for its client are served as that client's principal (the DefaultPrincipalData inside),
their answers read back by the broker's channel; a request of another API inside, or no
principal, is refused; NOT_CONTROLLER when this node is not active."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.controller.rpc import envelope as rpc
from broker.security.delegation_token import create_hmac
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run

KEY = {"delegation.token.secret.key": "k"}


def test_create_renew_expire_as_the_clients_principal() -> None:
    async def go() -> None:
        node = ControllerNode(**KEY)
        created = rpc.create_reply_of(await call(rpc, node, rpc.request(
            rpc.create_request(None, ["User:bob"], -1), "User:alice", False)))
        assert created.error is ErrorCode.none
        assert (created.owner, created.requester) == ("User:alice", "User:alice")
        assert created.hmac == create_hmac(created.token_id, "k")
        token = node.metadata.delegation_tokens[created.token_id]
        assert token.renewers == ("User:bob",) and token.expiry_ms == created.expiry_ms

        other = rpc.create_reply_of(await call(rpc, node, rpc.request(
            rpc.create_request("User:carol", [], 60_000), "User:alice", False)))
        assert (other.owner, other.max_ms - other.issue_ms) == ("User:carol", 60_000)

        renewed = rpc.renew_reply_of(await call(rpc, node, rpc.request(
            rpc.renew_request(created.hmac, 1_000), "User:bob", False)))
        assert renewed.error is ErrorCode.none and renewed.expiry_ms < created.expiry_ms
        mismatch = rpc.renew_reply_of(await call(rpc, node, rpc.request(
            rpc.renew_request(created.hmac, 1_000), "User:mallory", False)))
        assert mismatch.error is ErrorCode.delegation_token_owner_mismatch

        expired = rpc.expire_reply_of(await call(rpc, node, rpc.request(
            rpc.expire_request(created.hmac, -1), "User:alice", False)))
        assert expired.error is ErrorCode.none
        assert created.token_id not in node.metadata.delegation_tokens
    run(go())


def test_refusals() -> None:
    async def go() -> None:
        node = ControllerNode(**KEY)
        good = rpc.request(rpc.renew_request(b"x", 1), "User:alice", False)
        no_principal = type(good)(request_data=good.request_data, request_principal=None,
                                  client_host_address=b"")
        resp = await call(rpc, node, no_principal)
        assert resp.error_code is ErrorCode.principal_deserialization_failure
        from kio.schema.metadata.v12 import request as md

        other = rpc.request(md.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False),
                            "User:alice", False)
        assert (await call(rpc, node, other)).error_code is ErrorCode.invalid_request
        node.quorum.is_leader = False
        assert rpc.error_code_of(await call(rpc, node, good)) is ErrorCode.not_controller
    run(go())
