"""DeleteGroups (API 42): delete Empty groups with their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 42


async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
    names = [str(g) for g in request.groups_names]
    try:
        results = await service_of(node).delete_groups(names)
    except KafkaError as exc:
        results = {n: exc.error_code for n in names}
    mod = response_module(request)
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.DeletableGroupResult, group_id=g, error_code=results[str(g)])
        for g in request.groups_names))
