"""OffsetFetch (API 9): committed offsets of listed partitions or of all (v2+), batched v8+.

v0 (dropped by Kafka 4.0, KIP-896) read ZooKeeper-stored offsets in Kafka; Skiff stores v0
commits in the group coordinator (see offset_commit.py), so v0 is answered like v1 from there
(creating the offsets topic first if it is missing, as v0 clients never ask FindCoordinator).
v10 names topics by id, in the request and the answer: a listed id the cluster does not know
is answered UNKNOWN_TOPIC_ID per partition; asked for all topics, committed offsets of a
topic that no longer exists (no id to name it by) are left out.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import FetchedOffset, OffsetFetchResult
from broker.handlers._build import build, response_module
from broker.handlers.offset_commit import ensure_offsets_topic
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 9
TOPIC_IDS_VERSION = 10


def _fetch(node: Any, group_id: str, topics: Any, member_id: str | None = None,
           member_epoch: int = -1) -> OffsetFetchResult:
    wanted = None if topics is None else [
        (t.name, i) for t in topics for i in t.partition_indexes]
    try:
        return service_of(node).fetch_offsets(group_id, wanted, member_id, member_epoch)
    except KafkaError as exc:
        return OffsetFetchResult(exc.error_code)


def _fetch_by_ids(node: Any, group_id: str, topics: Any, member_id: str | None,
                  member_epoch: int) -> tuple[OffsetFetchResult, list[FetchedOffset]]:
    """v10: the ids resolved to names, and UNKNOWN_TOPIC_ID partitions for unknown ids
    (their topic field holds the id's text, mapped back in _topics)."""
    if topics is None:
        return _fetch(node, group_id, None, member_id, member_epoch), []
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
    result = (_fetch(node, group_id, known, member_id, member_epoch) if known or not unknown
              else OffsetFetchResult(ErrorCode.none))
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


async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    version = ctx.api_version
    if version >= 8:
        groups = []
        by_ids = version >= TOPIC_IDS_VERSION
        for g in request.groups:
            unknown: list[FetchedOffset] = []
            if by_ids:
                r, unknown = _fetch_by_ids(node, str(g.group_id), g.topics,
                                           getattr(g, "member_id", None),
                                           getattr(g, "member_epoch", -1))
            else:
                r = _fetch(node, str(g.group_id), g.topics, getattr(g, "member_id", None),
                           getattr(g, "member_epoch", -1))
            groups.append(build(
                mod.OffsetFetchResponseGroup, group_id=g.group_id, error_code=r.error,
                topics=_topics(mod, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                               r.partitions, node.metadata if by_ids else None, unknown)))
        return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    if version == 0:
        await ensure_offsets_topic(node)
    r = _fetch(node, str(request.group_id), request.topics)
    parts = r.partitions
    if version < 2 and r.error is not ErrorCode.none:
        # v0-v1 have no top-level error: every listed partition carries it
        parts = tuple(FetchedOffset(t.name, i, -1, -1, "", r.error)
                      for t in request.topics or () for i in t.partition_indexes)
    return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, error_code=r.error,
                 topics=_topics(mod, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                                parts))
