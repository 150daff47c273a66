"""AlterConfigs (API 33), versions 0-2: replace a resource's dynamic configs.

The legacy, non-incremental form: the given set becomes the resource's whole dynamic config
(keys left out are removed). TOPIC and BROKER resources go to the controller, which checks
names and values and answers per resource once the change is committed and applied here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AlterConfigsResource,
    AlterConfigsResult,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc import alter_configs as rpc
from broker.errors import KafkaError
from broker.handlers._authz import Op, config_refusal

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 33
log = structlog.get_logger(__name__)
R = TypeVar("R", AlterConfigsResource, IncrementalAlterConfigsResource)


async def authorized_alter(
    node: BrokerServices, ctx: RequestContext, api: str, wanted: Sequence[R],
    send: Callable[[list[R]], Awaitable[list[AlterConfigsResult]]],
) -> list[AlterConfigsResult]:
    """ALTER_CONFIGS on each resource (broker/handlers/_authz.config_refusal); the allowed
    ones go to the controller. One result per wanted resource, in order; the refusals are
    logged as `api`'s."""
    refused = [config_refusal(node, ctx, Op.ALTER_CONFIGS, int(w.resource.resource_type),
                              w.resource.resource_name) for w in wanted]
    ok = [w for w, code in zip(wanted, refused, strict=True) if code is ErrorCode.none]
    sent: list[AlterConfigsResult] = []
    if ok:
        try:
            sent = await send(ok)
        except KafkaError as exc:
            sent = [AlterConfigsResult(w.resource, exc.error_code, exc.message or None)
                    for w in ok]
    answers = iter(sent)
    results = []
    for w, code in zip(wanted, refused, strict=True):
        if code is ErrorCode.none:
            a = next(answers)
            code, message = a.error, a.message
        else:
            message = None
        if code is not ErrorCode.none:
            log.info("alter_configs_rejected", api=api,
                     resource_type=w.resource.resource_type,
                     resource=w.resource.resource_name, error=code.name, reason=message)
        results.append(AlterConfigsResult(w.resource, code, message))
    return results


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    results = await authorized_alter(
        node, ctx, "alter_configs", rpc.parse(request), lambda ok: node.controller.alter_configs(
            ok, validate_only=request.validate_only))
    return rpc.response(request, results)
