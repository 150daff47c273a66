"""AlterShareGroupOffsets (API 91, KIP-932): set the start offsets of an empty share group's
partitions (kafka-share-groups --reset-offsets). Each partition's state is initialized again
in the share coordinator at a higher state epoch (InitializeShareGroupState), which fences
what share-partition leaders held. NON_EMPTY_GROUP while the group has members; a group that
does not exist yet is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._share import offsets_refusal
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.shell import ShareNode, share_service_of

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 91


def _error(mod: Any, error: ErrorCode, message: str | None) -> Any:
    return build(mod.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 error_code=error, error_message=message, responses=())


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    gid = str(request.group_id or "")
    refused_whole = offsets_refusal(node, ctx, gid, Op.READ)
    if refused_whole is not None:
        return _error(mod, *refused_whole)
    refused = [t for t in request.topics
               if not allowed(node, ctx, Op.READ, Res.TOPIC, str(t.topic_name))]
    wanted = [(str(t.topic_name), [(int(p.partition_index), int(p.start_offset))
                                   for p in t.partitions])
              for t in request.topics if t not in refused]
    try:
        altered = await share_service_of(node).alter_offsets(gid, wanted)
    except KafkaError as exc:
        return _error(mod, exc.error_code, exc.message)
    responses = [build(mod.AlterShareGroupOffsetsResponseTopic, topic_name=t.name,
                       topic_id=t.topic_id, partitions=tuple(build(
                           mod.AlterShareGroupOffsetsResponsePartition, partition_index=p,
                           error_code=e, error_message=m) for p, e, m in t.partitions))
                 for t in altered]
    responses += [build(mod.AlterShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                        topic_id=None, partitions=tuple(build(
                            mod.AlterShareGroupOffsetsResponsePartition,
                            partition_index=p.partition_index,
                            error_code=ErrorCode.topic_authorization_failed,
                            error_message=None) for p in t.partitions))
                  for t in refused]
    return build(mod.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, responses=tuple(responses))
