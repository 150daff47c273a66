"""CreateDelegationToken (API 38), v1-v3 (KIP-48; v3 names an owner, KIP-373), as Kafka's
KafkaApis.handleCreateTokenRequest checks it before sending it on to the active controller
(broker/controller/delegation_token_control.py), which writes the DelegationToken record:

  a token-authenticated, PLAINTEXT or one-way SSL connection  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
  an owner other than the requester, without CREATE_TOKENS on
  that owner (a User resource)                                DELEGATION_TOKEN_AUTHORIZATION_FAILED
  a renewer that is not a User                                INVALID_PRINCIPAL_TYPE
then the controller's DELEGATION_TOKEN_AUTH_DISABLED when delegation.token.secret.key is
not set. Refusals carry the owner and requester, -1 timestamps and an empty token id/HMAC
(Kafka's CreateDelegationTokenResponse.prepareResponse)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.rpc import delegation_tokens as codec
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._tokens import requests_allowed
from broker.protocol.durations import to_ms
from broker.security.delegation_token import USER_TYPE, join_principal, split_principal

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 38


response = codec.create_response


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return response(request, code, ctx.principal, ctx.principal)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    requester = ctx.principal
    owner_name = getattr(request, "owner_principal_name", None)
    explicit_owner = (join_principal(request.owner_principal_type or "", owner_name)
                      if owner_name else None)
    owner = explicit_owner or requester
    renewers = [join_principal(r.principal_type, r.principal_name) for r in request.renewers]
    if not requests_allowed(ctx):
        return response(request, ErrorCode.delegation_token_request_not_allowed, owner,
                        requester)
    if owner != requester and not allowed(node, ctx, Op.CREATE_TOKENS, Res.USER, owner):
        return response(request, ErrorCode.delegation_token_authorization_failed, owner,
                        requester)
    if any(split_principal(r)[0] != USER_TYPE for r in renewers):
        return response(request, ErrorCode.invalid_principal_type, owner, requester)
    r = await node.controller.create_delegation_token(
        requester, explicit_owner, renewers, to_ms(request.max_lifetime))
    if r.error is not ErrorCode.none:
        # the controller's refusals carry zero timestamps (its response's defaults), as
        # Kafka's controller answers them
        return response(request, r.error, r.owner, r.requester, 0, 0, 0)
    return response(request, r.error, r.owner, r.requester, r.issue_ms, r.expiry_ms, r.max_ms,
                    r.token_id, r.hmac)
