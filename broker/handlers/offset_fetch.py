"""OffsetFetch (API 9): committed offsets of listed partitions or of all (v2+), batched v8+.

v0 (dropped by Kafka 4.0, KIP-896) read ZooKeeper-stored offsets in Kafka; Skiff stores v0
commits in the group coordinator (see offset_commit.py), so v0 is answered like v1 from there
(creating the offsets topic first if it is missing, as v0 clients never ask FindCoordinator).
v7+ require_stable (KIP-447): partitions with a transactional offset commit still pending
answer UNSTABLE_OFFSET_COMMIT, which clients retry.
v10 names topics by id, in the request and the answer: a listed id the cluster does not know
is answered UNKNOWN_TOPIC_ID per partition; asked for all topics, committed offsets of a
topic that no longer exists (no id to name it by) are left out.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import FetchedOffset, OffsetFetchResult
from broker.handlers._authz import Op, Res, allowed, filter_allowed
from broker.handlers._context import GroupBroker
from broker.handlers.offset_commit import ensure_offsets_topic
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 9
TOPIC_IDS_VERSION = 10


def _fetch(node: GroupBroker, ctx: RequestContext, group_id: str, topics: Any,
           member_id: str | None = None, member_epoch: int = -1,
           require_stable: bool = False) -> OffsetFetchResult:
    """DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED); named topics the principal
    may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED, and left out of an all-topics answer."""
    if not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, group_id):
        return OffsetFetchResult(ErrorCode.group_authorization_failed)
    refused: list[FetchedOffset] = []
    wanted = None
    if topics is not None:
        ok, no = filter_allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, topics, lambda t: t.name)
        wanted = [(t.name, i) for t in ok for i in t.partition_indexes]
        refused = [FetchedOffset(t.name, i, -1, -1, "", ErrorCode.topic_authorization_failed)
                   for t in no for i in t.partition_indexes]
    try:
        result = service_of(node).fetch_offsets(group_id, wanted, member_id, member_epoch,
                                                require_stable)
    except KafkaError as exc:
        return OffsetFetchResult(exc.error_code)
    parts = list(result.partitions)
    if topics is None:
        parts, _ = filter_allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, parts, lambda p: p.topic)
    return dataclasses.replace(result, partitions=(*parts, *refused))


def _fetch_by_ids(node: GroupBroker, ctx: RequestContext, group_id: str, topics: Any,
                  member_id: str | None, member_epoch: int, require_stable: bool,
                  ) -> tuple[OffsetFetchResult, list[FetchedOffset]]:
    """v10: the ids resolved to names, and UNKNOWN_TOPIC_ID partitions for unknown ids
    (their topic field holds the id's text, mapped back in _topics)."""
    if topics is None:
        return _fetch(node, ctx, group_id, None, member_id, member_epoch, require_stable), []
    image = node.metadata
    known: list[Any] = []
    unknown: list[FetchedOffset] = []
    for t in topics:
        found = image.topic_by_id(t.topic_id) if t.topic_id is not None else None
        if found is None:
            unknown.extend(FetchedOffset(str(t.topic_id), int(i), -1, -1, "",
                                         ErrorCode.unknown_topic_id)
                           for i in t.partition_indexes)
        else:
            known.append(_Named(found.name, t.partition_indexes))
    result = (_fetch(node, ctx, group_id, known, member_id, member_epoch, require_stable)
              if known or not unknown else OffsetFetchResult(ErrorCode.none))
    return result, unknown


class _Named:
    def __init__(self, name: str, partition_indexes: Any) -> None:
        self.name, self.partition_indexes = name, partition_indexes


def _topics(mod: Any, topic_cls: str, part_cls: str, parts: tuple[FetchedOffset, ...],
            image: Any = None, unknown: list[FetchedOffset] | None = None) -> Any:
    """With `image` (v10), topics are named by id: names without one are left out."""
    by_topic: dict[str, list[Any]] = {}
    for p in (*parts, *(unknown or ())):
        by_topic.setdefault(p.topic, []).append(build(
            getattr(mod, part_cls), partition_index=p.partition, committed_offset=p.offset,
            committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error))
    if image is None:
        return tuple(build(getattr(mod, topic_cls), name=name, partitions=tuple(ps))
                     for name, ps in by_topic.items())
    unknown_ids = {p.topic for p in unknown or ()}
    out = []
    for name, ps in by_topic.items():
        if name in unknown_ids:
            topic_id: uuid.UUID | None = uuid.UUID(name)
        else:
            t = image.topic(name)
            if t is None:
                continue
            topic_id = t.topic_id
        out.append(build(getattr(mod, topic_cls), topic_id=topic_id, partitions=tuple(ps)))
    return tuple(out)


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    version = ctx.api_version
    if version >= 8:
        groups = []
        by_ids = version >= TOPIC_IDS_VERSION
        for g in request.groups:
            unknown: list[FetchedOffset] = []
            stable = bool(request.require_stable)
            if by_ids:
                r, unknown = _fetch_by_ids(node, ctx, str(g.group_id), g.topics,
                                           getattr(g, "member_id", None),
                                           getattr(g, "member_epoch", -1), stable)
            else:
                r = _fetch(node, ctx, str(g.group_id), g.topics, getattr(g, "member_id", None),
                           getattr(g, "member_epoch", -1), stable)
            groups.append(build(
                mod.OffsetFetchResponseGroup, group_id=g.group_id, error_code=r.error,
                topics=_topics(mod, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                               r.partitions, node.metadata if by_ids else None, unknown)))
        return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    if version == 0:
        await ensure_offsets_topic(node)
    r = _fetch(node, ctx, str(request.group_id), request.topics,
               require_stable=bool(getattr(request, "require_stable", False)))
    parts = r.partitions
    if version < 2 and r.error is not ErrorCode.none:
        # v0-v1 have no top-level error: every listed partition carries it
        parts = tuple(FetchedOffset(t.name, i, -1, -1, "", r.error)
                      for t in request.topics or () for i in t.partition_indexes)
    return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, error_code=r.error,
                 topics=_topics(mod, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                                parts))
