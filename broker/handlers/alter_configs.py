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
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResult,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc import alter_configs as rpc
from broker.errors import KafkaError
from broker.handlers._authz import Op, config_refusal
from broker.metadata.records import RESOURCE_BROKER

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
    local = {i: p for i, w in enumerate(wanted)
             if refused[i] is ErrorCode.none and (p := broker_local_refusal(node, w)) is not None}
    for i, (code, _message) in local.items():
        refused[i] = code
    ok = [w for w, code in zip(wanted, refused, strict=True) if code is ErrorCode.none]
    sent: list[AlterConfigsResult] = []
    if ok:
        try:
            sent = await send(ok)
        except KafkaError as exc:
            sent = [AlterConfigsResult(w.resource, exc.error_code, exc.message or None)
                    for w in ok]
    answers = iter(sent)
    results: list[AlterConfigsResult] = []
    for w, code in zip(wanted, refused, strict=True):
        if code is ErrorCode.none:
            a = next(answers)
            code, message = a.error, a.message
        else:
            message = local[len(results)][1] if len(results) in local else None
        if code is not ErrorCode.none:
            log.info("alter_configs_rejected", api=api,
                     resource_type=w.resource.resource_type,
                     resource=w.resource.resource_name, error=code.name, reason=message)
        results.append(AlterConfigsResult(w.resource, code, message))
    return results


def broker_local_refusal(node: BrokerServices, w: R) -> tuple[ErrorCode, str] | None:
    """What only this broker can check before the controller sees the change, as Kafka's
    broker validates a BROKER resource against its own configuration: `cordoned.log.dirs`
    entries must be `*` alone or entries of this broker's log.dirs (KIP-1066), checked when
    the resource is this broker (the controller refuses it at the cluster default);
    INVALID_REQUEST, as Kafka answers a refused broker config."""
    from broker.log.manager import CORDONED_LOG_DIRS, cordoned_entry_problem

    r = w.resource
    if r.resource_type != RESOURCE_BROKER or r.resource_name != str(node.node_id):
        return None
    if isinstance(w, AlterConfigsResource):
        values = [v for k, v in w.configs.items() if k == CORDONED_LOG_DIRS]
    else:
        values = [v for k, op, v in w.ops if k == CORDONED_LOG_DIRS
                  and op in (AlterConfigOp.SET, AlterConfigOp.APPEND)]
    log_dirs = [str(d) for d in node.config.log_dirs]
    for v in values:
        entries = [e.strip() for e in (v or "").split(",") if e.strip()]
        problem = cordoned_entry_problem(entries, log_dirs)
        if problem is not None:
            return ErrorCode.invalid_request, problem
    return None


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    results = await authorized_alter(
        node, ctx, "alter_configs", rpc.parse(request), lambda ok: node.controller.alter_configs(
            ok, validate_only=request.validate_only))
    return rpc.response(request, results)
