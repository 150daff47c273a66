"""ShareAcknowledge (API 79, KIP-932): acknowledge records acquired through ShareFetch
(ACCEPT, RELEASE, REJECT, GAP and, v2, RENEW of KIP-1222) within the member's share session;
epoch -1 also closes the session, releasing what the member still holds."""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Op, Res, allowed
from broker.handlers._share import refusal
from broker.handlers.share_fetch import acks_of, leader_of, renews_consistent, topic_responses
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.sessions import FINAL_EPOCH
from broker.share.shell import (
    PartitionAnswer,
    ShareNode,
    share_service_of,
)

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 79


def _error(mod: Any, error: ErrorCode, message: str | None, lock_ms: int = 0) -> Any:
    """A whole-request error; a share session's error carries no acquisition lock timeout
    (0), as Kafka 4.4 answers it."""
    return build(mod.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=error,
                 error_message=message,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=(), node_endpoints=())


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    group_id = str(request.group_id or "")
    member_id = request.member_id or ""
    request_refusal = refusal(node, ctx, group_id, member_id)
    if request_refusal is not None:
        return _error(mod, *request_refusal)
    service = share_service_of(node)
    lock_ms = service.lock_duration_ms(group_id)
    acks = acks_of(request.topics)
    if not renews_consistent(acks, bool(getattr(request, "is_renew_ack", False))):
        return _error(mod, ErrorCode.invalid_request,
                      "IsRenewAck must be set exactly when a batch holds a RENEW.", lock_ms)
    epoch = int(request.share_session_epoch)
    error, session, message = service.sessions.acknowledge_update(group_id, member_id, epoch)
    if error is not ErrorCode.none or session is None:
        return _error(mod, error, message)
    image = node.metadata
    answers: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
    allowed_acks = {}
    for key, batches in acks.items():
        topic = image.topic_by_id(key[0])
        if topic is not None and not allowed(node, ctx, Op.READ, Res.TOPIC, topic.name):
            answers[key] = PartitionAnswer(*key, error=ErrorCode.topic_authorization_failed)
        else:
            allowed_acks[key] = batches
    acked = await service.acknowledge(group_id, member_id, allowed_acks)
    for key, (ack_error, ack_message) in acked.items():
        answers[key] = PartitionAnswer(*key, error=ack_error, error_message=ack_message)
    if epoch == FINAL_EPOCH:
        await service.close_session(session)
    for (tid, p), a in answers.items():
        a.leader_id, a.leader_epoch = leader_of(node, tid, p)
    return build(mod.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=topic_responses(mod, list(answers.values()), fetch=False),
                 node_endpoints=())
