"""DeleteShareGroupOffsets (API 92, KIP-932): delete the state of an empty share group's
partitions of some topics (kafka-share-groups --delete-offsets), in the share coordinator
(DeleteShareGroupState); they start again where share.auto.offset.reset says. NON_EMPTY_GROUP
while the group has members, GROUP_ID_NOT_FOUND for an unknown group."""

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

API_KEY = 92


def _error(mod: Any, error: ErrorCode, message: str | None) -> Any:
    return build(mod.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 error_code=error, error_message=message, responses=())


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    gid = str(request.group_id or "")
    refused_whole = offsets_refusal(node, ctx, gid, Op.DELETE)
    if refused_whole is not None:
        return _error(mod, *refused_whole)
    names = [str(t.topic_name) for t in request.topics]
    refused = [n for n in names if not allowed(node, ctx, Op.READ, Res.TOPIC, n)]
    try:
        deleted = await share_service_of(node).delete_offsets(
            gid, [n for n in names if n not in refused])
    except KafkaError as exc:
        return _error(mod, exc.error_code, exc.message)
    responses = [build(mod.DeleteShareGroupOffsetsResponseTopic, topic_name=name, topic_id=tid,
                       error_code=e, error_message=m) for name, tid, e, m in deleted]
    responses += [build(mod.DeleteShareGroupOffsetsResponseTopic, topic_name=n, topic_id=None,
                        error_code=ErrorCode.topic_authorization_failed, error_message=None)
                  for n in refused]
    return build(mod.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, responses=tuple(responses))
