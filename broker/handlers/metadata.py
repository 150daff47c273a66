"""Metadata (API 3), versions 0-13: brokers, cluster id, controller id, topics, partitions.
v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is NONE on answers, the request's
error on a whole-request failure.

Answers come from the node's MetadataImage, with Kafka's KRaft-broker rules:
  * brokers are the unfenced registered brokers that have an endpoint on the listener the
    request arrived on; when this broker's image has none (every broker fenced: sessions
    that expired during a partition or a stall, a restarted broker that has not applied the
    unfencing of itself and its peers yet), the registered ones, fenced included, rather
    than an empty list (listed_brokers);
  * the controller id is a live broker's id (clients send admin requests there; KRaft
    brokers forward them), this node's when it is live;
  * a partition whose leader is unknown gets LEADER_NOT_AVAILABLE (LISTENER_NOT_FOUND from v6
    when the leader is registered but lacks this listener); offline replicas are those whose
    broker is unregistered, fenced, or lacks the listener; at v0 replicas and ISR are cut to
    the live ones and REPLICA_NOT_AVAILABLE reports the cut, as Kafka does;
  * unknown topics are auto-created when the request allows it (v4+; always before) and
    `auto.create.topics.enable` is on, with THIS broker's `num.partitions` and
    `default.replication.factor` sent as explicit values (Kafka's AutoTopicCreationManager;
    an explicit CreateTopics with -1 takes the controller's instead). Kafka answers
    LEADER_NOT_AVAILABLE and lets the client retry; Skiff waits up to AUTO_CREATE_WAIT_S for
    the creation to commit and answers with the new topic's metadata, falling back to
    AUTO_CREATE_PENDING_ERROR (also when the controller refused the creation: the reason is
    logged, as Kafka does). Internal and illegal names are never auto-created.
"""

from __future__ import annotations

import asyncio
import io
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.constants import uuid_zero

from broker.controller.requests import CreatableTopic, CreateTopicResult
from broker.controller.validation import INTERNAL_TOPICS, topic_name_error
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed, operations
from broker.metadata.image import (
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    dir_online,
)
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.frames import ResponseChunks
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 3
# An all-topics answer over at least this many partitions is built and encoded on a worker
# thread (about 0.3 s of Python per 10,000 partitions here).
OFFLOAD_PARTITIONS = 10_000
AUTO_CREATE_WAIT_S = 1.0
# What a topic still being auto-created is answered with. ZooKeeper-era Kafka said
# LEADER_NOT_AVAILABLE; KRaft brokers (3.x/4.x AutoTopicCreationManager) say
# UNKNOWN_TOPIC_OR_PARTITION. Both are retriable; LEADER_NOT_AVAILABLE keeps librdkafka from
# treating the topic as missing (it fails queued messages of missing topics sooner).
AUTO_CREATE_PENDING_ERROR = ErrorCode.leader_not_available
log = structlog.get_logger(__name__)

# AclOperation codes (org.apache.kafka.common.acl.AclOperation) that Kafka reports as
# authorized when it runs without an authorizer: every operation the resource supports.
_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE = 3, 4, 5, 6, 7, 8
_CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bitfield(*ops: int) -> int:
    out = 0
    for op in ops:
        out |= 1 << op
    return out


TOPIC_OPERATIONS = _bitfield(_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE,
                             _DESCRIBE_CONFIGS, _ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bitfield(_CREATE, _ALTER, _DESCRIBE, _CLUSTER_ACTION, _DESCRIBE_CONFIGS,
                               _ALTER_CONFIGS, _IDEMPOTENT_WRITE)
UNSET_OPERATIONS = -(2**31)  # Kafka's "not requested" value for authorized-operations fields


def controller_id_for(node: BrokerServices, listed: Sequence[int]) -> int:
    """The controller id a KRaft broker reports: a live broker's id (of those `listed` on the
    request's listener), this node's if it is among them."""
    if node.node_id in listed:
        return int(node.node_id)
    return listed[0] if listed else -1


def listed_brokers(image: MetadataImage, listener: str) -> dict[int, Endpoint]:
    """Broker id -> endpoint on `listener` for a Metadata answer: Kafka's unfenced brokers;
    if the image has none, every registered broker with that listener, fenced included.

    Kafka's broker would answer an empty list then, which its Java client ignores
    (NetworkClient: "Ignoring empty metadata response"). librdkafka (2.10+, KIP-899)
    applies it: it decommissions every broker not in the answer, the one that answered
    too, and is left with no broker to ask for metadata; every partition stays without a
    leader until its rebootstrap (metadata.recovery.rebootstrap.trigger.ms, 5 minutes).
    Listing the fenced registrations keeps the client's brokers; the partitions still say
    who leads them (LEADER_NOT_AVAILABLE while the leader is fenced), so no request goes
    to a fenced broker on the strength of this list."""
    live = image.broker_endpoints(listener)
    if live:
        return live
    registered = image.broker_endpoints(listener, include_fenced=True)
    log.debug("metadata_lists_fenced_brokers", brokers=sorted(registered),
              metadata_offset=image.offset)
    return registered


def _partition(mod: Any, version: int, image: MetadataImage, listener: str, index: int,
               p: PartitionRegistration) -> Any:
    def online(b: int) -> bool:
        reg = image.brokers.get(b)
        return (reg is not None and not reg.fenced and reg.endpoint(listener) is not None
                and dir_online(p.directory_of(b), reg.log_dirs))  # KIP-858

    offline = tuple(b for b in p.replicas if not online(b))
    replicas, isr = p.replicas, p.isr
    error = ErrorCode.none
    if version == 0:
        replicas = tuple(b for b in p.replicas if online(b))
        isr = tuple(b for b in p.isr if online(b))
    leader = image.brokers.get(p.leader) if p.has_leader() else None
    if leader is None or leader.fenced:
        error, leader_id = ErrorCode.leader_not_available, -1
    elif leader.endpoint(listener) is None:
        error = ErrorCode.listener_not_found if version >= 6 else ErrorCode.leader_not_available
        leader_id = -1
    else:
        leader_id = p.leader
        if len(replicas) < len(p.replicas) or len(isr) < len(p.isr):
            error = ErrorCode.replica_not_available
    return build(
        mod.MetadataResponsePartition, error_code=error, partition_index=index,
        leader_id=leader_id, leader_epoch=p.leader_epoch, replica_nodes=replicas,
        isr_nodes=isr, offline_replicas=offline,
    )


def _topic(mod: Any, version: int, image: MetadataImage, listener: str, t: TopicImage,
           topic_ops: int) -> Any:
    partitions = tuple(_partition(mod, version, image, listener, i, t.partitions[i])
                       for i in sorted(t.partitions))
    return build(
        mod.MetadataResponseTopic, error_code=ErrorCode.none, name=t.name, topic_id=t.topic_id,
        is_internal=t.name in INTERNAL_TOPICS, partitions=partitions,
        topic_authorized_operations=topic_ops,
    )


def _error_topic(mod: Any, code: ErrorCode, name: str | None,
                 topic_id: uuid.UUID | None = None) -> Any:
    return build(
        mod.MetadataResponseTopic, error_code=code, name=name,
        topic_id=topic_id,  # None is written as the zero Uuid Kafka uses for "unknown"
        is_internal=name in INTERNAL_TOPICS, partitions=(),
    )


# Per node: topic name -> the controller call creating it. Concurrent Metadata requests for
# the same unknown topic wait on one creation instead of each asking the controller (Kafka
# keeps the same in-flight set in its AutoTopicCreationManager).
_in_flight: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Future[Any]]] = \
    weakref.WeakKeyDictionary()


async def _auto_create(node: BrokerServices, names: Sequence[str]) -> None:
    """Ask the controller to create `names` with this broker's num.partitions and
    default.replication.factor (sent explicitly, as Kafka's AutoTopicCreationManager does:
    the controller's own defaults apply only to requests that leave them at -1); wait
    briefly for the commit.

    The creation is not cancelled with the request: once asked, the controller finishes it
    even when this request has stopped waiting (a cancelled append could leave the
    controller unsure of what it committed). It runs in the node's task group, so stopping
    the node ends it."""
    pending = _in_flight.setdefault(node, {})
    waits = {pending[n] for n in names if n in pending}
    new = [n for n in names if n not in pending]
    if new:
        topics = [CreatableTopic(
            n, num_partitions=int(node.config["num.partitions"]),
            replication_factor=int(node.config["default.replication.factor"])) for n in new]
        task: asyncio.Future[list[CreateTopicResult]] = \
            asyncio.get_running_loop().create_future()

        async def create() -> None:
            try:
                result = await node.controller.create_topics(topics)
            except asyncio.CancelledError:
                task.cancel()
                raise
            except Exception as exc:  # reported below
                task.set_exception(exc)
            else:
                task.set_result(result)

        # ended without an answer (the node stopped before it ran): its waiters stop waiting
        node.tasks.start_soon(create, name="auto_create_topics").add_done_callback(
            lambda _: task.cancel())
        for n in new:
            pending[n] = task

        def report(t: asyncio.Future[list[CreateTopicResult]]) -> None:
            for n in new:
                if pending.get(n) is t:
                    del pending[n]
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                log.info("auto_create_failed", topics=new,
                         error=exc.error_code.name if isinstance(exc, KafkaError) else repr(exc))
                return
            for r in t.result():
                if r.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                    log.info("auto_create_failed", topic=r.name, error=r.error.name,
                             reason=r.message)

        task.add_done_callback(report)
        waits.add(task)
    await asyncio.wait(waits, timeout=AUTO_CREATE_WAIT_S)


def _version(request: Any) -> int:
    v: int = int(request.__version__)
    return v


def _requested(request: Any, version: int) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, topic_id) per requested topic, in order, without duplicates."""
    out: list[tuple[str | None, uuid.UUID | None]] = []
    seen: set[tuple[str | None, uuid.UUID | None]] = set()
    for t in request.topics:
        tid = getattr(t, "topic_id", None)
        if tid == uuid_zero:
            tid = None
        if version < 12 and (t.name is None or tid is not None):
            # Topic ids in Metadata requests are a v12 feature; v10-11 carry the field only.
            raise KafkaError(ErrorCode.invalid_request,
                             f"Topic ids are not supported in Metadata v{version} requests")
        key = (None, tid) if tid is not None else (t.name, None)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    version = _version(request)
    listener = ctx.listener_name
    all_topics = request.topics is None or (version == 0 and not request.topics)
    wanted = [] if all_topics else _requested(request, version)

    # Authorization (Kafka's): a topic the principal may not DESCRIBE is left out of an
    # all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (whether it exists
    # or not); auto-creating a missing topic needs CREATE on the cluster or on the topic.
    may_describe: dict[str, bool] = {}

    def describable(name: str) -> bool:
        if name not in may_describe:
            may_describe[name] = allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, name)
        return may_describe[name]

    may_create_any = allowed(node, ctx, Op.CREATE, Res.CLUSTER)

    def creatable(name: str) -> bool:
        return may_create_any or allowed(node, ctx, Op.CREATE, Res.TOPIC, name)

    allow_auto = False
    if not all_topics:
        allow_auto = getattr(request, "allow_auto_topic_creation", True) and bool(
            node.config["auto.create.topics.enable"])
        image = node.metadata
        missing = [name for name, tid in wanted
                   if tid is None and name is not None and image.topic(name) is None
                   and name not in INTERNAL_TOPICS and topic_name_error(name) is None
                   and describable(name) and creatable(name)]
        if allow_auto and missing:
            await _auto_create(node, missing)

    image = node.metadata
    want_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    def topic_ops(name: str) -> int:
        return operations(node, ctx, Res.TOPIC, name) if want_ops else UNSET_OPERATIONS

    if all_topics and image.partition_count >= OFFLOAD_PARTITIONS:
        # Building and encoding an answer over 100,000 partitions takes seconds of Python:
        # on the event loop it would hold up this broker's heartbeats past its session
        # (issue 17). A worker thread does it from the immutable image; the loop keeps
        # running between the thread's GIL slices.
        def encode_all() -> bytes:
            buf = io.BytesIO()
            answer = _answer(node, ctx, request, mod, version, image, listener, all_topics,
                             wanted, allow_auto, describable, creatable, topic_ops)
            entity_writer(type(answer))(buf, answer)
            return buf.getvalue()

        return ResponseChunks.of_bytes(await asyncio.to_thread(encode_all))
    return _answer(node, ctx, request, mod, version, image, listener, all_topics, wanted,
                   allow_auto, describable, creatable, topic_ops)


def _answer(node: BrokerServices, ctx: RequestContext, request: Any, mod: Any, version: int,
            image: MetadataImage, listener: str, all_topics: bool,
            wanted: list[tuple[str | None, uuid.UUID | None]], allow_auto: bool,
            describable: Callable[[str], bool], creatable: Callable[[str], bool],
            topic_ops: Callable[[str], int]) -> Any:
    topics: list[Any] = []
    if all_topics:
        for topic_name in sorted(image.topics_by_name):
            if describable(topic_name):
                topics.append(_topic(mod, version, image, listener,
                                     image.topics_by_name[topic_name], topic_ops(topic_name)))
    else:
        for name, tid in wanted:
            if tid is not None:
                t = image.topic_by_id(tid)
                if t is None:
                    topics.append(_error_topic(mod, ErrorCode.unknown_topic_id, None, tid))
                    continue
                if not describable(t.name):
                    topics.append(_error_topic(mod, ErrorCode.topic_authorization_failed, None,
                                               tid))
                    continue
            else:
                assert name is not None
                if not describable(name):
                    topics.append(_error_topic(mod, ErrorCode.topic_authorization_failed, name))
                    continue
                t = image.topic(name)
                if t is None:
                    if topic_name_error(name) is not None:
                        code = ErrorCode.invalid_topic_exception
                    elif allow_auto and name not in INTERNAL_TOPICS:
                        code = (AUTO_CREATE_PENDING_ERROR if creatable(name)
                                else ErrorCode.topic_authorization_failed)
                    else:
                        code = ErrorCode.unknown_topic_or_partition
                    topics.append(_error_topic(mod, code, name))
                    continue
            topics.append(_topic(mod, version, image, listener, t, topic_ops(t.name)))

    endpoints = listed_brokers(image, listener)
    brokers = tuple(
        build(mod.MetadataResponseBroker, node_id=bid, host=e.host, port=e.port,
              rack=image.brokers[bid].rack)
        for bid, e in endpoints.items()
    )
    return build(
        mod.MetadataResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        brokers=brokers,
        cluster_id=node.cluster_id or image.cluster_id or None,
        controller_id=controller_id_for(node, list(endpoints)),
        topics=tuple(topics),
        cluster_authorized_operations=operations(node, ctx, Res.CLUSTER) if getattr(
            request, "include_cluster_authorized_operations", False) else UNSET_OPERATIONS,
    )


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """A whole-request failure (an invalid request): every requested topic carries `code`."""
    mod = response_module(request)
    nullable_name = _version(request) >= 12
    topics = tuple(
        _error_topic(mod, code, t.name if t.name is not None or nullable_name else "",
                     getattr(t, "topic_id", None))
        for t in (request.topics or ())
    )
    return build(mod.MetadataResponse, throttle_time=NO_THROTTLE, brokers=(), cluster_id=None,
                 controller_id=-1, topics=topics, error_code=code)
