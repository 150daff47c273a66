"""OffsetCommit (API 8): store a group's consumed positions; answered once replicated.

v0 and v1 were dropped by Kafka 4.0 (KIP-896) and are served as Kafka 3.9 did, with one
deliberate difference for v0: Kafka stored v0 commits in ZooKeeper (and a KRaft-mode 3.9
broker refuses them); Skiff has no ZooKeeper, so v0 commits go to the group coordinator like
the rest, as a commit outside any generation (generation -1, member ""), which OffsetFetch of
any version then returns. A v0 client (ZooKeeper era) never asks FindCoordinator, which is
what creates the offsets topic, so v0 creates it too when it is missing; in a cluster of
several brokers a v0 commit sent to a broker that is not the group's coordinator is answered
NOT_COORDINATOR (ZooKeeper let any broker take it). v1 carries a per-partition
commit_timestamp, stored as the commit time when set (-1 means now), from which retention
counts. v10 names topics by id (answered by id; an unknown id is UNKNOWN_TOPIC_ID).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import service_of
from broker.group.types import CommitPartition, OffsetCommitRequest
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 8
TOPIC_IDS_VERSION = 10


async def ensure_offsets_topic(node: GroupBroker) -> None:
    """OffsetCommit/OffsetFetch v0 clients never send FindCoordinator, which creates the
    offsets topic in Kafka: create it for them (errors surface on the commit itself)."""
    try:
        service = service_of(node)
    except KafkaError:
        return
    if node.metadata.topic(OFFSETS_TOPIC) is None:
        await service.ensure_offsets_topic()


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    image = node.metadata
    by_ids = ctx.api_version >= TOPIC_IDS_VERSION
    # Keyed as the request names topics: by name, or by id (v10+).
    errors: dict[tuple[Any, int], ErrorCode] = {}
    accepted: list[CommitPartition] = []
    order: list[tuple[Any, int]] = []
    named: dict[tuple[str, int], tuple[Any, int]] = {}
    # READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ on
    # each topic (TOPIC_AUTHORIZATION_FAILED), as Kafka checks them
    group_ok = allowed(node, ctx, Op.READ, Res.GROUP, str(request.group_id))
    topic_ok: dict[str, bool] = {}
    for topic in request.topics:
        label: Any = topic.topic_id if by_ids else topic.name
        name: str | None = topic.name if not by_ids else None
        if by_ids and topic.topic_id is not None:
            t = image.topic_by_id(topic.topic_id)
            name = t.name if t is not None else None
        for p in topic.partitions:
            key = (label, p.partition_index)
            order.append(key)
            if not group_ok:
                errors[key] = ErrorCode.group_authorization_failed
                continue
            if name is None:
                errors[key] = ErrorCode.unknown_topic_id
                continue
            if name not in topic_ok:
                topic_ok[name] = allowed(node, ctx, Op.READ, Res.TOPIC, name)
            if not topic_ok[name]:
                errors[key] = ErrorCode.topic_authorization_failed
                continue
            if image.partition(name, p.partition_index) is None:
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            named[(name, p.partition_index)] = key
            accepted.append(CommitPartition(
                name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata,
                getattr(p, "commit_timestamp", -1),
            ))
    if accepted and ctx.api_version == 0:
        await ensure_offsets_topic(node)
    if accepted:
        req = OffsetCommitRequest(
            group_id=str(request.group_id),
            generation_id=getattr(request, "generation_id_or_member_epoch", -1),
            member_id=getattr(request, "member_id", ""),
            group_instance_id=getattr(request, "group_instance_id", None),
            partitions=tuple(accepted),
            retention_time_ms=to_ms(getattr(request, "retention_time", None)),
        )
        try:
            result = await service_of(node).commit_offsets(req)
            for tp, code in result.errors().items():
                errors[named.get(tp, tp)] = code
        except KafkaError as exc:
            for c in accepted:
                errors[named[(c.topic, c.partition)]] = exc.error_code
    mod = response_module(request)
    by_topic: dict[Any, list[Any]] = {}
    for label, index in order:
        by_topic.setdefault(label, []).append(build(
            mod.OffsetCommitResponsePartition, partition_index=index,
            error_code=errors.get((label, index), ErrorCode.unknown_server_error)))
    return build(mod.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
        build(mod.OffsetCommitResponseTopic, name=label if not by_ids else "",
              topic_id=label if by_ids else None, partitions=tuple(parts))
        for label, parts in by_topic.items()
    ))
