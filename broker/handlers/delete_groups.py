"""DeleteGroups (API 42): delete Empty groups with their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.handlers._authz import Op, Res, allowed
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 42


async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
    names = [str(g) for g in request.groups_names]
    may = [n for n in names if allowed(node, ctx, Op.DELETE, Res.GROUP, n)]
    results = {n: ErrorCode.group_authorization_failed for n in names}
    if may:
        try:
            results.update(await service_of(node).delete_groups(may))
        except KafkaError as exc:
            results.update({n: exc.error_code for n in may})
    mod = response_module(request)
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.DeletableGroupResult, group_id=g, error_code=results[str(g)])
        for g in request.groups_names))
