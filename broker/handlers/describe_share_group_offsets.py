"""DescribeShareGroupOffsets (API 90, KIP-932; v1 adds Lag, KIP-1226): each partition's
share-partition start offset (SPSO) and leader epoch as the share coordinator holds them
(ReadShareGroupStateSummary), and the lag: the partition's end offset, less the SPSO, less
the offsets past it whose delivery is complete. Topics null: every initialized partition of
the group. A topic not in the metadata, or a partition without state, answers start offset
-1 (Kafka: absence of data, not an error); the lag is -1 where it cannot be computed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.shell import DISABLED_MESSAGE, ShareNode, share_enabled, share_service_of

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 90


def _group_error(mod: Any, group_id: Any, error: ErrorCode, message: str | None) -> Any:
    return build(mod.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=(),
                 error_code=error, error_message=message)


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    out = []
    for g in request.groups:
        gid = str(g.group_id)
        if not share_enabled(node):
            out.append(_group_error(mod, g.group_id, ErrorCode.unsupported_version,
                                    DISABLED_MESSAGE))
            continue
        if not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, gid):
            out.append(_group_error(mod, g.group_id, ErrorCode.group_authorization_failed,
                                    None))
            continue
        if not gid:
            out.append(_group_error(mod, g.group_id, ErrorCode.invalid_group_id, None))
            continue
        asked = None if g.topics is None else [
            (str(t.topic_name), [int(p) for p in t.partitions]) for t in g.topics]
        refused = set()
        if asked is not None:
            refused = {name for name, _ in asked
                       if not allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, name)}
        try:
            topics = await share_service_of(node).describe_offsets(
                gid, None if asked is None else [a for a in asked if a[0] not in refused])
        except KafkaError as exc:
            out.append(_group_error(mod, g.group_id, exc.error_code, exc.message))
            continue
        answered = [build(
            mod.DescribeShareGroupOffsetsResponseTopic, topic_name=t.name,
            topic_id=t.topic_id, partitions=tuple(build(
                mod.DescribeShareGroupOffsetsResponsePartition, partition_index=p.partition,
                start_offset=p.start_offset, leader_epoch=p.leader_epoch, lag=p.lag,
                error_code=ErrorCode.none, error_message=None) for p in t.partitions))
            for t in topics
            if asked is None or allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, t.name)]
        for name, ps in asked or ():
            if name in refused:
                answered.append(build(
                    mod.DescribeShareGroupOffsetsResponseTopic, topic_name=name,
                    topic_id=None, partitions=tuple(build(
                        mod.DescribeShareGroupOffsetsResponsePartition, partition_index=p,
                        start_offset=-1, leader_epoch=-1, lag=-1,
                        error_code=ErrorCode.topic_authorization_failed, error_message=None)
                        for p in ps)))
        out.append(build(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id,
                         topics=tuple(answered), error_code=ErrorCode.none,
                         error_message=None))
    return build(mod.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(out))
