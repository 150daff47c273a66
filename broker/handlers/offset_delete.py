"""OffsetDelete (API 47): drop committed offsets of partitions the group no longer consumes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.group.types import OffsetDeleteResult
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 47


async def handle(node: GroupBroker, ctx: RequestContext, request: Any) -> Any:
    image = node.metadata
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[tuple[str, int]] = []
    order: list[tuple[str, int]] = []
    mod = response_module(request)
    if not allowed(node, ctx, Op.DELETE, Res.GROUP, str(request.group_id)):
        return build(mod.OffsetDeleteResponse, error_code=ErrorCode.group_authorization_failed,
                     throttle_time=NO_THROTTLE, topics=())
    topic_ok = {t.name: allowed(node, ctx, Op.READ, Res.TOPIC, t.name) for t in request.topics}
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            order.append(key)
            if not topic_ok[t.name]:
                errors[key] = ErrorCode.topic_authorization_failed
            elif image.partition(t.name, p.partition_index) is None:
                errors[key] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(key)
    try:
        result = await service_of(node).delete_offsets(str(request.group_id), wanted)
    except KafkaError as exc:
        result = OffsetDeleteResult(exc.error_code)
    if result.error is not ErrorCode.none:
        return build(mod.OffsetDeleteResponse, error_code=result.error,
                     throttle_time=NO_THROTTLE, topics=())
    errors.update(dict(result.partitions))
    by_topic: dict[str, list[Any]] = {}
    for name, index in order:
        by_topic.setdefault(name, []).append(build(
            mod.OffsetDeleteResponsePartition, partition_index=index,
            error_code=errors.get((name, index), ErrorCode.none)))
    return build(mod.OffsetDeleteResponse, error_code=ErrorCode.none, throttle_time=NO_THROTTLE,
                 topics=tuple(build(mod.OffsetDeleteResponseTopic, name=n, partitions=tuple(ps))
                              for n, ps in by_topic.items()))
