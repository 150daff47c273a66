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
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from broker.errors import KafkaError
from broker.handlers._authz import Op, config_refusal
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 33
log = structlog.get_logger(__name__)


def responses(mod: Any, cls_name: str, resources: Sequence[ConfigResource],
              results: Sequence[AlterConfigsResult] | KafkaError) -> tuple[Any, ...]:
    """One response entry per requested resource, in request order."""
    out = []
    for i, r in enumerate(resources):
        if isinstance(results, KafkaError):
            code, message = results.error_code, results.message or None
        else:
            code, message = results[i].error, results[i].message
        if code is not ErrorCode.none:
            log.info("alter_configs_rejected", api=mod.__name__.split(".")[2],
                     resource_type=r.resource_type,
                     resource=r.resource_name, error=code.name, reason=message)
        out.append(build(getattr(mod, cls_name), error_code=code,
                         error_message=message if code is not ErrorCode.none else None,
                         resource_type=r.resource_type, resource_name=r.resource_name))
    return tuple(out)


R = TypeVar("R", AlterConfigsResource, IncrementalAlterConfigsResource)


async def authorized_alter(
    node: BrokerServices, ctx: RequestContext, wanted: Sequence[R],
    send: Callable[[list[R]], Awaitable[list[AlterConfigsResult]]],
) -> list[AlterConfigsResult] | KafkaError:
    """ALTER_CONFIGS on each resource (broker/handlers/_authz.config_refusal); the allowed
    ones go to the controller. One result per wanted resource, in order."""
    refused = [config_refusal(node, ctx, Op.ALTER_CONFIGS, int(w.resource.resource_type),
                              w.resource.resource_name) for w in wanted]
    ok = [w for w, code in zip(wanted, refused, strict=True) if code is ErrorCode.none]
    sent: list[AlterConfigsResult] = []
    if ok:
        try:
            sent = await send(ok)
        except KafkaError as exc:
            if len(ok) == len(wanted):
                return exc
            sent = [AlterConfigsResult(w.resource, exc.error_code, exc.message or None)
                    for w in ok]
    answers = iter(sent)
    return [next(answers) if code is ErrorCode.none
            else AlterConfigsResult(w.resource, code, None)
            for w, code in zip(wanted, refused, strict=True)]


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    wanted = [
        AlterConfigsResource(ConfigResource(r.resource_type, r.resource_name),
                             {c.name: c.value for c in r.configs})
        for r in request.resources
    ]
    results = await authorized_alter(
        node, ctx, wanted, lambda ok: node.controller.alter_configs(
            ok, validate_only=request.validate_only))
    return build(mod.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=responses(
        mod, "AlterConfigsResourceResponse", [w.resource for w in wanted], results))
