"""DescribeClientQuotas (API 48), versions 0-1: the client quotas of the metadata image that
match the request's filter (broker/controller/client_quota_control.describe_client_quotas
has Kafka's filter semantics). A bad filter fails the whole request with its error code and
message and no entries. kafka-python and aiokafka also use this API's presence to infer a
broker >= 2.6."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.client_quota_control import (
    DescribeError,
    FilterComponent,
    describe_client_quotas,
)
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 48


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match)
                  for c in request.components]
    try:
        found = describe_client_quotas(node.metadata, components, bool(request.strict))
    except DescribeError as exc:
        return build(mod.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                     error_code=exc.code, error_message=exc.message, entries=None)
    entries = tuple(
        mod.EntryData(
            entity=tuple(mod.EntityData(entity_type=t, entity_name=n) for t, n in entity),
            values=tuple(mod.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())))
        for entity, values in found)
    return build(mod.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, entries=entries)


def error_response(ctx: Any, request: Any, code: ErrorCode) -> Any:
    """A refused request (CLUSTER_AUTHORIZATION_FAILED): no entries (null), as Kafka's
    DescribeClientQuotasRequest.getErrorResponse answers."""
    return build(response_module(request).DescribeClientQuotasResponse,
                 throttle_time=NO_THROTTLE, error_code=code, error_message=None, entries=None)
