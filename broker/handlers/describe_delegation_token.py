"""DescribeDelegationToken (API 41), v1-v3 (v3: the requester, KIP-373), answered from this
broker's metadata image as Kafka's KafkaApis.handleDescribeTokensRequest does:

  a token-authenticated, PLAINTEXT or one-way SSL connection  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
  no delegation.token.secret.key                              DELEGATION_TOKEN_AUTH_DISABLED
  an empty owners list                                        no tokens
  owners null (all) or a list                                 the tokens of those owners (as
      owner, requester or renewer) that the caller owns, requested or may renew, or has
      DESCRIBE on (DelegationToken resource) or DESCRIBE_TOKENS on the owner (User resource)
Each token comes with its HMAC, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Op, Res, allowed
from broker.handlers._tokens import requests_allowed
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.delegation_token import (
    DelegationTokenSettings,
    create_hmac,
    describable,
    join_principal,
    split_principal,
)

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 41


def response(request: Any, error: ErrorCode, tokens: tuple[Any, ...] = ()) -> Any:
    mod = response_module(request)
    return build(mod.DescribeDelegationTokenResponse, error_code=error, tokens=tokens,
                 throttle_time=NO_THROTTLE)


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return response(request, code)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    settings = DelegationTokenSettings.from_config(node.config)
    if not requests_allowed(ctx):
        return response(request, ErrorCode.delegation_token_request_not_allowed)
    if not settings.enabled or settings.secret_key is None:
        return response(request, ErrorCode.delegation_token_auth_disabled)
    owners = (None if request.owners is None else
              [join_principal(o.principal_type, o.principal_name) for o in request.owners])
    if owners is not None and not owners:
        return response(request, ErrorCode.none)
    mod = response_module(request)
    out = []
    for token in node.metadata.delegation_tokens.values():
        if not describable(
                ctx.principal, owners, token,
                lambda tid: allowed(node, ctx, Op.DESCRIBE, Res.DELEGATION_TOKEN, tid),
                lambda owner: allowed(node, ctx, Op.DESCRIBE_TOKENS, Res.USER, owner)):
            continue
        owner_type, owner_name = split_principal(token.owner)
        req_type, req_name = split_principal(token.requester)
        out.append(build(
            mod.DescribedDelegationToken, principal_type=owner_type, principal_name=owner_name,
            token_requester_principal_type=req_type, token_requester_principal_name=req_name,
            issue_timestamp=token.issue_ms, expiry_timestamp=token.expiry_ms,
            max_timestamp=token.max_ms, token_id=token.token_id,
            hmac=create_hmac(token.token_id, settings.secret_key),
            renewers=tuple(build(mod.DescribedDelegationTokenRenewer,
                                 principal_type=split_principal(r)[0],
                                 principal_name=split_principal(r)[1])
                           for r in token.renewers)))
    return response(request, ErrorCode.none, tuple(out))
