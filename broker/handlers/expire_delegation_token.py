"""ExpireDelegationToken (API 40), v1-v2: refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
on a token-authenticated, PLAINTEXT or one-way SSL connection (expiry -1), else sent on to
the active controller (broker/controller/delegation_token_control.py: a negative period
removes the token at once; else its expiry moves to min(max, now + period)), as Kafka's
KafkaApis.handleExpireTokenRequest does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.rpc import delegation_tokens as codec
from broker.handlers._tokens import requests_allowed
from broker.protocol.durations import to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 40


response = codec.expire_response


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return response(request, code)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not requests_allowed(ctx):
        return response(request, ErrorCode.delegation_token_request_not_allowed)
    r = await node.controller.expire_delegation_token(
        ctx.principal, bytes(request.hmac), to_ms(request.expiry_time_period))
    return response(request, r.error, r.expiry_ms)
