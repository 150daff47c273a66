"""What the four delegation-token handlers share (Kafka's KafkaApis.allowTokenRequests and
the timestamps their answers carry)."""

from __future__ import annotations

import datetime

from broker.security.principal import ANONYMOUS
from broker.server.context import RequestContext

NOT_ALLOWED_MESSAGE = "Delegation Token Requests are not allowed on this listener"


def requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's allowTokenRequests: not over a connection authenticated with a token, not on
    PLAINTEXT, not on SSL without a client certificate (ANONYMOUS)."""
    if ctx.token_authenticated or ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)


def timestamp(ms: int) -> datetime.datetime:
    """A datetime_i64 field's value for `ms` milliseconds since the epoch (-1 included)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
