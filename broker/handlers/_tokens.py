"""What the four delegation-token handlers share: Kafka's KafkaApis.allowTokenRequests."""

from __future__ import annotations

from broker.security.principal import ANONYMOUS
from broker.server.context import RequestContext

NOT_ALLOWED_MESSAGE = "Delegation Token Requests are not allowed on this listener"


def requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's allowTokenRequests: not over a connection authenticated with a token, not on
    PLAINTEXT, not on SSL without a client certificate (ANONYMOUS)."""
    if ctx.token_authenticated or ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)
