"""DescribeTopicPartitions (API 75, v0, KIP-966): topics and their partitions, paginated, with
each partition's eligible leader replicas (ELR) and last known ELR.

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse:

- no topics named: every topic, sorted by name, from the cursor's topic on; topics named:
  those at or after the cursor's topic, sorted, unknown ones answered with
  UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name) and no partitions;
  a cursor whose topic is not among the named ones, or whose partition index is negative, is
  an INVALID_REQUEST for every named topic;
- at most min(response_partition_limit, max.request.partition.size.limit) partitions (at
  least one) per answer, starting at the cursor's partition in the cursor's topic; when the
  limit cuts a topic, next_cursor names that topic and its first partition left out; when it
  is used up at a topic's end and topics remain, next_cursor names the next topic at 0;
- partitions as Metadata v12 describes them (LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND,
  offline replicas on this listener), plus the ELR and last known ELR the controller keeps
  (broker/controller/partitions.py; empty while every replica is in the ISR);
- with an authorizer, DESCRIBE on each topic: every topic means every topic that may be
  described; a named topic that may not is TOPIC_AUTHORIZATION_FAILED (whether it exists or
  not), as Metadata answers it; topic_authorized_operations are the caller's operations on
  the topic (every topic operation without an authorizer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.validation import INTERNAL_TOPICS, topic_name_error
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed, operations
from broker.metadata.image import MetadataImage, PartitionRegistration, dir_online
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 75


def _partition(mod: Any, image: MetadataImage, listener: str, index: int,
               p: PartitionRegistration) -> Any:
    def online(b: int) -> bool:
        reg = image.brokers.get(b)
        return (reg is not None and not reg.fenced and reg.endpoint(listener) is not None
                and dir_online(p.directory_of(b), reg.log_dirs))  # KIP-858

    leader = image.brokers.get(p.leader) if p.has_leader() else None
    error, leader_id = ErrorCode.none, p.leader
    if leader is None or leader.fenced:
        error, leader_id = ErrorCode.leader_not_available, -1
    elif leader.endpoint(listener) is None:
        error, leader_id = ErrorCode.listener_not_found, -1
    return build(
        mod.DescribeTopicPartitionsResponsePartition, error_code=error, partition_index=index,
        leader_id=leader_id, leader_epoch=p.leader_epoch, replica_nodes=p.replicas,
        isr_nodes=p.isr, eligible_leader_replicas=p.elr, last_known_elr=p.last_known_elr,
        offline_replicas=tuple(b for b in p.replicas if not online(b)),
    )


def _error_topic(mod: Any, name: str, code: ErrorCode) -> Any:
    return build(mod.DescribeTopicPartitionsResponseTopic, error_code=code, name=name,
                 topic_id=None, is_internal=name in INTERNAL_TOPICS, partitions=())  # zero id


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    image = node.metadata
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    if cursor is not None and cursor.partition_index < 0:
        raise KafkaError(ErrorCode.invalid_request,
                         "the partition index in the cursor must not be negative")
    every_topic = not request.topics
    if every_topic:
        names = sorted(n for n in image.topics_by_name if n >= start_topic
                       and allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, n))
    else:
        names = sorted({t.name for t in request.topics if t.name >= start_topic})
        if cursor is not None and cursor.topic_name not in names:
            raise KafkaError(ErrorCode.invalid_request,
                             f"the topic list must contain the cursor topic "
                             f"{cursor.topic_name}")
    limit = max(min(int(request.response_partition_limit),
                    int(node.config["max.request.partition.size.limit"])), 1)
    remaining = limit
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = build(mod.Cursor, topic_name=name, partition_index=0)
            break
        if not every_topic and not allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, name):
            topics.append(_error_topic(mod, name, ErrorCode.topic_authorization_failed))
            continue
        t = image.topic(name)
        if t is None:
            if not every_topic:
                code = (ErrorCode.invalid_topic_exception if topic_name_error(name) is not None
                        else ErrorCode.unknown_topic_or_partition)
                topics.append(_error_topic(mod, name, code))
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        indexes = sorted(i for i in t.partitions if i >= first)
        taken = indexes[:remaining]
        topics.append(build(
            mod.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
            topic_id=t.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=tuple(_partition(mod, image, ctx.listener_name, i, t.partitions[i])
                             for i in taken),
            topic_authorized_operations=operations(node, ctx, Res.TOPIC, name),
        ))
        if len(taken) < len(indexes):
            next_cursor = build(mod.Cursor, topic_name=name,
                                partition_index=indexes[len(taken)])
            break
        remaining -= len(taken)
    return build(mod.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE,
                 topics=tuple(topics), next_cursor=next_cursor)


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every named topic with `code` (Kafka's DescribeTopicPartitionsRequest.getErrorResponse)."""
    mod = response_module(request)
    return build(mod.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE,
                 topics=tuple(_error_topic(mod, t.name, code) for t in request.topics or ()))
