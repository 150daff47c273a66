"""StreamsGroupTopologyDescriptionUpdate (API 93, KIP-1331): a streams group member pushes
its topology's description after a heartbeat answer set TopologyDescriptionRequired.

As Kafka 4.4: without a topology description plugin
(`group.streams.topology.description.plugin.class`, unset by default) every push is answered
UNSUPPORTED_VERSION; with Kafka's in-memory one (the one Skiff builds in) the description of
the group's current topology epoch from a member of the group is stored, and
StreamsGroupDescribe v1 returns it (broker/group/streams_topology_description.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.group.shell import service_of
from broker.group.streams_topology_description import (
    DescriptionNode,
    DescriptionSubtopology,
    TopologyDescription,
    global_store_of,
    node_of,
)
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.handlers.streams_group_heartbeat import DISABLED_MESSAGE, streams_enabled
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 93


def _node(n: Any) -> DescriptionNode:
    return node_of(n.name, int(n.node_type), tuple(str(t) for t in n.source_topics),
                   None if n.sink_topic is None else str(n.sink_topic), tuple(n.stores),
                   tuple(n.successors))


def description_of(d: Any) -> TopologyDescription:
    """The pushed description as the plugin keeps it; InvalidDescription when malformed."""
    return TopologyDescription(
        tuple(DescriptionSubtopology(s.subtopology_id, tuple(_node(n) for n in s.nodes))
              for s in d.subtopologies),
        tuple(global_store_of(_node(g.source), _node(g.processor)) for g in d.global_stores))


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    group_id = str(request.group_id)
    message: str | None = None
    if not streams_enabled(node):
        error, message = ErrorCode.unsupported_version, DISABLED_MESSAGE
    elif not allowed(node, ctx, Op.READ, Res.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error, message = service_of(node).streams_group_topology_description_update(
            group_id, request.member_id, int(request.topology_epoch),
            lambda: description_of(request.topology_description))
    mod = response_module(request)
    return build(mod.StreamsGroupTopologyDescriptionUpdateResponse, throttle_time=NO_THROTTLE,
                 error_code=error, error_message=message)
