"""DescribeClientQuotas (API 48), version 0.

Skiff enforces no client quotas yet, so the truthful answer is an empty list.
kafka-python and aiokafka also use this API's presence to infer a broker >= 2.6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 48


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    return build(
        mod.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none, error_message=None, entries=(),
    )
