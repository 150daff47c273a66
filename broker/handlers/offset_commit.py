"""OffsetCommit (API 8): store a group's consumed positions; answered once replicated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import CommitPartition, OffsetCommitRequest
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE, to_ms

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 8


async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
    image = node.metadata
    errors: dict[tuple[str, int], ErrorCode] = {}
    accepted: list[CommitPartition] = []
    order: list[tuple[str, int]] = []
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            order.append(key)
            if image.partition(topic.name, p.partition_index) is None:
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            accepted.append(CommitPartition(
                topic.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata,
            ))
    if accepted:
        req = OffsetCommitRequest(
            group_id=str(request.group_id),
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            partitions=tuple(accepted),
            retention_time_ms=to_ms(getattr(request, "retention_time", None)),
        )
        try:
            result = await service_of(node).commit_offsets(req)
            errors.update(result.errors())
        except KafkaError as exc:
            for c in accepted:
                errors[(c.topic, c.partition)] = exc.error_code
    mod = response_module(request)
    by_topic: dict[str, list[Any]] = {}
    for name, index in order:
        by_topic.setdefault(name, []).append(build(
            mod.OffsetCommitResponsePartition, partition_index=index,
            error_code=errors.get((name, index), ErrorCode.unknown_server_error)))
    return build(mod.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
        build(mod.OffsetCommitResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    ))
