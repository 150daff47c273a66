"""StreamsGroupDescribe (API 89, KIP-1071): a streams group's epochs, topology and members
with their current and target tasks (broker/group/streams.py).

v1 (KIP-1331, KIP-1357): with IncludeTopologyDescription, the topology description the
topology description plugin holds for the group's topology epoch (TopologyDescriptionStatus
AVAILABLE) or NOT_STORED (no plugin, or none pushed); NOT_REQUESTED without it. AssignorName:
the task assignor of the next assignment, null on an error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.handler_util import AUTHORIZED_OPERATIONS_OMITTED
from broker.group.shell import service_of
from broker.group.streams import StreamsGroupDescription, Tasks, TopicInfo, grouped
from broker.group.streams_topology_description import (
    NOT_REQUESTED,
    DescriptionNode,
    TopologyDescription,
)
from broker.handlers._authz import Op, Res, allowed, operations
from broker.handlers._context import GroupBroker
from broker.handlers.streams_group_heartbeat import DISABLED_MESSAGE, streams_enabled
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 89


def _assignment(mod: Any, t: Tasks) -> Any:
    def ids(tasks: Any) -> Any:
        return tuple(build(mod.TaskIds, subtopology_id=s, partitions=ps)
                     for s, ps in grouped(tasks))

    return build(mod.Assignment, active_tasks=ids(t.active), standby_tasks=ids(t.standby),
                 warmup_tasks=ids(t.warmup))


def _topic_info(mod: Any, t: TopicInfo) -> Any:
    return build(mod.TopicInfo, name=t.name, partitions=t.partitions,
                 replication_factor=t.replication_factor,
                 topic_configs=tuple(build(mod.KeyValue, key=k, value=v) for k, v in t.configs))


def _node(mod: Any, n: DescriptionNode) -> Any:
    return build(mod.TopologyDescriptionNode, name=n.name, node_type=n.node_type,
                 source_topics=n.source_topics, sink_topic=n.sink_topic, stores=n.stores,
                 successors=n.successors)


def _description(mod: Any, d: TopologyDescription | None) -> Any:
    if d is None:
        return None
    return build(mod.TopologyDescription, subtopologies=tuple(
        build(mod.TopologyDescriptionSubtopology, subtopology_id=s.subtopology_id,
              nodes=tuple(_node(mod, n) for n in s.nodes)) for s in d.subtopologies),
        global_stores=tuple(build(mod.TopologyDescriptionGlobalStore,
                                  source=_node(mod, g.source),
                                  processor=_node(mod, g.processor))
                            for g in d.global_stores))


def _described(mod: Any, group_id: Any, desc: StreamsGroupDescription, ops: int,
               description: tuple[int, TopologyDescription | None]) -> Any:
    topology = None
    if desc.topology is not None:
        topology = build(mod.Topology, epoch=desc.topology.epoch, subtopologies=tuple(build(
            mod.Subtopology, subtopology_id=s.subtopology_id, source_topics=s.source_topics,
            repartition_sink_topics=s.repartition_sink_topics,
            state_changelog_topics=tuple(_topic_info(mod, c) for c in s.state_changelog_topics),
            repartition_source_topics=tuple(_topic_info(mod, r)
                                            for r in s.repartition_source_topics))
            for s in desc.topology.subtopologies))
    members = tuple(build(
        mod.Member, member_id=m.member_id, member_epoch=m.member_epoch,
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=None if m.user_endpoint is None else build(
            mod.Endpoint, host=m.user_endpoint[0], port=m.user_endpoint[1]),
        client_tags=tuple(build(mod.KeyValue, key=k, value=v) for k, v in m.client_tags),
        task_offsets=(), task_end_offsets=(), assignment=_assignment(mod, m.assignment),
        target_assignment=_assignment(mod, m.target_assignment), is_classic=False)
        for m in desc.members)
    return build(mod.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                 group_id=group_id, group_state=desc.state, group_epoch=desc.group_epoch,
                 assignment_epoch=desc.assignment_epoch, topology=topology, members=members,
                 authorized_operations=ops, topology_description_status=description[0],
                 topology_description=_description(mod, description[1]),
                 assignor_name=desc.assignor_name)


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    out = []
    for group_id in request.group_ids:
        gid = str(group_id)
        ops = (operations(node, ctx, Res.GROUP, gid)
               if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        desc: StreamsGroupDescription | None = None
        message: str | None = None
        if not streams_enabled(node):
            error, message = ErrorCode.unsupported_version, DISABLED_MESSAGE
        elif not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, gid):
            error = ErrorCode.group_authorization_failed
        else:
            try:
                error, desc = service_of(node).streams_group_describe(gid)
            except KafkaError as exc:
                error = exc.error_code
        if error is ErrorCode.none and desc is None:
            error = ErrorCode.group_id_not_found
            message = f"Group {gid} not found."
        if desc is None or error is not ErrorCode.none:
            out.append(build(mod.DescribedGroup, error_code=error, error_message=message,
                             group_id=group_id, group_state="", group_epoch=0,
                             assignment_epoch=0, topology=None, members=(),
                             authorized_operations=ops))
            continue
        description: tuple[int, TopologyDescription | None] = (NOT_REQUESTED, None)
        if getattr(request, "include_topology_description", False):
            description = service_of(node).streams_topology_description(desc)
        out.append(_described(mod, group_id, desc, ops, description))
    return build(mod.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
