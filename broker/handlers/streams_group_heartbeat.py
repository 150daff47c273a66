"""StreamsGroupHeartbeat (API 88, KIP-1071): join with a topology, heartbeat, reconcile tasks
and leave (broker/group/streams.py). As Kafka 4.4, streams groups need the finalized
streams.version 1 or higher: below it every heartbeat is answered UNSUPPORTED_VERSION.

Internal topics (repartition and changelog) the group's topology needs and the metadata
lacks are created here through the controller, as Kafka 4.4's coordinator creates them
(when the member's principal may CREATE them); the members are told MISSING_INTERNAL_TOPICS
until the topics exist.

v1 (KIP-1331) is v0's request; its answer carries AcceptableRecoveryLag as an int64 and
TopologyDescriptionRequired, set when the broker has a topology description plugin and wants
this member to push the group's description (broker/handlers/
streams_group_topology_description_update.py)."""

from __future__ import annotations

import datetime
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.errors import KafkaError
from broker.group.handler_util import client_host
from broker.group.shell import service_of
from broker.group.streams import (
    MISSING_INTERNAL_TOPICS,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
    Subtopology,
    TopicInfo,
    Topology,
    grouped,
    tasks_of,
)
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import MetadataNode, StreamsBroker
from broker.metadata.features import STREAMS_VERSION
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module
from broker.util.tasks import TaskHandle

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 88
DISABLED_MESSAGE = ("Streams groups (KIP-1071) are not enabled: they need streams.version 1 "
                    "or higher (skiff features upgrade --feature streams.version=1).")
log = structlog.get_logger("broker.group.streams")
# per node: internal topic name -> its creation in flight (one per topic at a time)
_creating: weakref.WeakKeyDictionary[StreamsBroker, dict[str, TaskHandle]] = \
    weakref.WeakKeyDictionary()


def streams_enabled(node: MetadataNode) -> bool:
    """streams.version >= 1 (Kafka's StreamsVersion.streamsGroupSupported)."""
    return bool(node.metadata.finalized_level(STREAMS_VERSION) >= 1)


def _topic_info(t: Any) -> TopicInfo:
    return TopicInfo(str(t.name), int(t.partitions), int(t.replication_factor),
                     tuple((c.key, c.value) for c in t.topic_configs))


def _topology(t: Any) -> Topology | None:
    if t is None:
        return None
    return Topology(int(t.epoch), tuple(Subtopology(
        subtopology_id=s.subtopology_id,
        source_topics=tuple(str(n) for n in s.source_topics),
        source_topic_regex=tuple(s.source_topic_regex),
        state_changelog_topics=tuple(_topic_info(c) for c in s.state_changelog_topics),
        repartition_sink_topics=tuple(str(n) for n in s.repartition_sink_topics),
        repartition_source_topics=tuple(_topic_info(r) for r in s.repartition_source_topics),
        copartition_groups=tuple((tuple(int(i) for i in c.source_topics),
                                  tuple(int(i) for i in c.repartition_source_topics))
                                 for c in s.copartition_groups))
        for s in t.subtopologies))


def _owned(request: Any) -> Any:
    kinds = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if all(k is None for k in kinds):
        return None
    return tasks_of(*(((t.subtopology_id, t.partitions) for t in k or ()) for k in kinds))


def _task_offsets(offsets: Any) -> tuple[tuple[str, int, int], ...] | None:
    if offsets is None:
        return None
    return tuple((str(o.subtopology_id), int(o.partition), int(o.offset)) for o in offsets)


def request_of(ctx: RequestContext, request: Any) -> StreamsHeartbeatRequest:
    endpoint = request.user_endpoint
    tags = request.client_tags
    return StreamsHeartbeatRequest(
        group_id=str(request.group_id), member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        endpoint_information_epoch=int(request.endpoint_information_epoch),
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=to_ms(request.rebalance_timeout),
        topology=_topology(request.topology), owned=_owned(request),
        process_id=request.process_id,
        user_endpoint=None if endpoint is None else (endpoint.host, int(endpoint.port)),
        client_tags=None if tags is None else tuple((t.key, t.value) for t in tags),
        shutdown_application=bool(request.shutdown_application),
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        task_offsets=_task_offsets(request.task_offsets),
        task_end_offsets=_task_offsets(request.task_end_offsets))


def _create_internal_topics(node: StreamsBroker, topics: tuple[TopicInfo, ...]) -> None:
    """Asks the controller for the missing internal topics, in the node's task group (the
    creation outlives the heartbeat that asked; stopping the node ends it)."""
    pending = _creating.setdefault(node, {})
    new = [t for t in topics if t.name not in pending]
    if not new:
        return
    # replication factor 0 in the topology: the controller's default.replication.factor
    asked = [CreatableTopic(
        t.name, num_partitions=t.partitions,
        replication_factor=t.replication_factor if t.replication_factor > 0 else -1,
        configs=dict(t.configs)) for t in new]
    names = [t.name for t in new]

    async def create() -> None:
        try:
            results = await node.controller.create_topics(asked)
        except KafkaError as exc:
            log.info("internal_topics_create_failed", topics=names, error=exc.error_code.name)
            return
        for r in results:
            if r.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.info("internal_topic_create_failed", topic=r.name, error=r.error.name,
                         reason=r.message)

    def ended(handle: TaskHandle) -> None:
        for name in names:
            if pending.get(name) is handle:
                del pending[name]

    handle = node.tasks.start_soon(create, name="streams_internal_topics")
    for name in names:
        pending[name] = handle
    handle.add_done_callback(ended)


async def handle(node: StreamsBroker, ctx: RequestContext, request: Any) -> Any:
    req = request_of(ctx, request)
    sources = {n for s in (req.topology.subtopologies if req.topology else ())
               for n in s.source_topics}
    # READ on the group, DESCRIBE on the topology's source topics, as Kafka checks them
    if not streams_enabled(node):
        result = StreamsHeartbeatResult(ErrorCode.unsupported_version, member_id=req.member_id,
                                        error_message=DISABLED_MESSAGE)
    elif not allowed(node, ctx, Op.READ, Res.GROUP, req.group_id):
        result = StreamsHeartbeatResult(ErrorCode.group_authorization_failed,
                                        member_id=req.member_id)
    elif any(not allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, n) for n in sorted(sources)):
        result = StreamsHeartbeatResult(ErrorCode.topic_authorization_failed,
                                        member_id=req.member_id)
    else:
        try:
            result = service_of(node).streams_group_heartbeat(req)
        except KafkaError as exc:
            result = StreamsHeartbeatResult(exc.error_code, member_id=req.member_id)
    if result.to_create:
        # as Kafka: the member's principal needs CREATE on the cluster or on each topic; the
        # ones it may not create are named in the MISSING_INTERNAL_TOPICS status
        may_create = allowed(node, ctx, Op.CREATE, Res.CLUSTER)
        creatable = tuple(t for t in result.to_create
                          if may_create or allowed(node, ctx, Op.CREATE, Res.TOPIC, t.name))
        if creatable:
            _create_internal_topics(node, creatable)
        denied = sorted(t.name for t in result.to_create if t not in creatable)
        if denied and result.status is not None:
            result = replace(result, status=tuple(
                (c, f"{d} Unauthorized to CREATE on topics {', '.join(denied)}.")
                if c == MISSING_INTERNAL_TOPICS else (c, d) for c, d in result.status))
    describe_topology = (request.__version__ >= 1
                         and service_of(node).streams_topology_description_required(
                             req.group_id, req.member_epoch, result))
    mod = response_module(request)

    def task_ids(tasks: Any) -> Any:
        return tuple(build(mod.TaskIds, subtopology_id=s, partitions=ps)
                     for s, ps in grouped(tasks))

    a = result.assignment
    endpoints = None
    if result.partitions_by_user_endpoint is not None:
        endpoints = tuple(build(
            mod.EndpointToPartitions,
            user_endpoint=build(mod.Endpoint, host=host, port=port),
            active_partitions=tuple(build(mod.TopicPartition, topic=t, partitions=ps)
                                    for t, ps in active),
            standby_partitions=tuple(build(mod.TopicPartition, topic=t, partitions=ps)
                                     for t, ps in standby))
            for (host, port), active, standby in result.partitions_by_user_endpoint)
    return build(
        mod.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=result.error,
        error_message=result.error_message, member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        # v0's field is Kafka 4.4's AcceptableRecoveryLagLegacy, which it never sets; v1's
        # is the int64 AcceptableRecoveryLag
        acceptable_recovery_lag=(result.acceptable_recovery_lag
                                 if request.__version__ >= 1 else 0),
        task_offset_interval=datetime.timedelta(milliseconds=result.task_offset_interval_ms),
        status=None if result.status is None else tuple(
            build(mod.Status, status_code=c, status_detail=d) for c, d in result.status),
        active_tasks=None if a is None else task_ids(a.active),
        standby_tasks=None if a is None else task_ids(a.standby),
        warmup_tasks=None if a is None else task_ids(a.warmup),
        topology_description_required=describe_topology,
        endpoint_information_epoch=result.endpoint_information_epoch,
        partitions_by_user_endpoint=endpoints)
