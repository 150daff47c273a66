"""ListGroups (API 16): the groups this broker coordinates, filtered by state (v4+), type (v5+)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import ListedGroup
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupsBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 16


def share_groups(node: GroupsBroker, states: Any, types: Any) -> list[ListedGroup]:
    """The share groups this broker coordinates (type "share", protocol type "share")."""
    service = node.share_groups
    wanted_types = {str(t).lower() for t in types}
    if service is None or (wanted_types and "share" not in wanted_types):
        return []
    wanted_states = {str(s).lower() for s in states}
    return [ListedGroup(gid, "share", state, "share") for gid, state in service.listed()
            if not wanted_states or state.lower() in wanted_states]


async def handle(node: GroupsBroker, ctx: RequestContext, request: Any) -> Any:
    groups: list[ListedGroup] = []
    try:
        error, groups = service_of(node).list_groups(
            getattr(request, "states_filter", ()), getattr(request, "types_filter", ()))
    except KafkaError as exc:
        error = exc.error_code
    groups = groups + share_groups(node, getattr(request, "states_filter", ()),
                                   getattr(request, "types_filter", ()))
    # DESCRIBE on the cluster lists every group; otherwise only the groups the principal
    # may DESCRIBE (Kafka's ListGroups)
    if not allowed(node, ctx, Op.DESCRIBE, Res.CLUSTER):
        groups = [g for g in groups if allowed(node, ctx, Op.DESCRIBE, Res.GROUP, g.group_id)]
    mod = response_module(request)
    return build(mod.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=error,
                 groups=tuple(build(mod.ListedGroup, group_id=g.group_id,
                                    protocol_type=g.protocol_type, group_state=g.state,
                                    group_type=g.group_type)
                              for g in groups))

