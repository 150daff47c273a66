"""ShareGroupHeartbeat (API 76, KIP-932): join, heartbeat and leave a share group
(broker/share/group.py). As Kafka 4.x, share groups need the finalized share.version 1 or
higher: below it every heartbeat is answered UNSUPPORTED_VERSION."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.group.handler_util import client_host
from broker.handlers._authz import Op, Res, allowed
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.group import ShareHeartbeatRequest, ShareHeartbeatResult
from broker.share.shell import DISABLED_MESSAGE, ShareNode, share_enabled, share_service_of

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 76


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    names = request.subscribed_topic_names
    req = ShareHeartbeatRequest(
        group_id=str(request.group_id), member_id=request.member_id,
        member_epoch=int(request.member_epoch), rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        client_id=ctx.client_id or "", client_host=client_host(ctx))
    # READ on the group, DESCRIBE on every subscribed topic, as Kafka checks them
    if not share_enabled(node):
        result = ShareHeartbeatResult(ErrorCode.unsupported_version,
                                      member_id=req.member_id or None,
                                      error_message=DISABLED_MESSAGE)
    elif not allowed(node, ctx, Op.READ, Res.GROUP, req.group_id):
        result = ShareHeartbeatResult(ErrorCode.group_authorization_failed,
                                      member_id=req.member_id or None)
    elif any(not allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, n)
             for n in req.subscribed_topic_names or ()):
        result = ShareHeartbeatResult(ErrorCode.topic_authorization_failed,
                                      member_id=req.member_id or None)
    else:
        result = share_service_of(node).heartbeat(req)
    mod = response_module(request)
    assignment = None
    if result.assignment is not None:
        assignment = build(mod.Assignment, topic_partitions=tuple(
            build(mod.TopicPartitions, topic_id=t, partitions=ps) for t, ps in result.assignment))
    return build(
        mod.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=result.error,
        error_message=result.error_message, member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment)
