"""ShareFetch (API 78, KIP-932): acquire records of a share group's partitions, and
acknowledge earlier ones, within a share session (broker/share/sessions.py).

Acknowledgements carried by the request are applied first (each partition's
AcknowledgeErrorCode); then, unless the request closes the session (epoch -1) or only
renews locks (v2's IsRenewAck, KIP-1222), records are acquired from the session's
partitions for the member, waiting up to MaxWaitMs while there are none: at most MaxRecords
in v2's record-limit acquire mode (KIP-1206), and in the batch-optimized mode (v1, and v2's
default) up to the end of the batch holding the MaxRecords-th record, as Kafka aligns an
acquisition with batch boundaries. The answer carries the batches from the first to the last
holding an acquired record, and the AcquiredRecords ranges the member holds, with the lock
duration.
"""

from __future__ import annotations

import datetime
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Op, Res, allowed
from broker.handlers._share import refusal
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

API_KEY = 78
_INT_MAX = 2**31 - 1
RECORD_LIMIT_MODE = 1  # ShareAcquireMode (v2, KIP-1206): 0 batch-optimized, 1 record-limit


def _error(mod: Any, error: ErrorCode, message: str | None, lock_ms: int = 0) -> Any:
    """A whole-request error; a share session's error carries no acquisition lock timeout
    (0), as Kafka 4.4 answers it."""
    return build(mod.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=error,
                 error_message=message,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=(), node_endpoints=())


def acks_of(topics: Any) -> dict[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]]:
    acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]] = {}
    for t in topics:
        for p in t.partitions:
            batches = [(int(b.first_offset), int(b.last_offset),
                        tuple(int(x) for x in b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if batches:
                acks.setdefault((t.topic_id, int(p.partition_index)), []).extend(batches)
    return acks


def renews_consistent(acks: Any, is_renew_ack: bool) -> bool:
    """IsRenewAck must be set exactly when a batch holds a RENEW (4), as Kafka checks."""
    has_renew = any(4 in types for batches in acks.values() for _, _, types in batches)
    return has_renew == is_renew_ack


def topic_responses(mod: Any, answers: list[PartitionAnswer], *, fetch: bool) -> tuple[Any, ...]:
    by_topic: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for a in answers:
        leader = build(mod.LeaderIdAndEpoch, leader_id=a.leader_id, leader_epoch=a.leader_epoch)
        if fetch:
            by_topic[a.topic_id].append(build(
                mod.PartitionData, partition_index=a.partition, error_code=a.error,
                error_message=a.error_message, acknowledge_error_code=int(a.ack_error),
                acknowledge_error_message=a.ack_error_message, current_leader=leader,
                records=a.records, acquired_records=tuple(
                    build(mod.AcquiredRecords, first_offset=r.first_offset,
                          last_offset=r.last_offset, delivery_count=r.delivery_count)
                    for r in a.acquired)))
        else:
            by_topic[a.topic_id].append(build(
                mod.PartitionData, partition_index=a.partition, error_code=a.error,
                error_message=a.error_message, current_leader=leader))
    cls = mod.ShareFetchableTopicResponse if fetch else mod.ShareAcknowledgeTopicResponse
    return tuple(build(cls, topic_id=tid, partitions=tuple(parts))
                 for tid, parts in by_topic.items())


def leader_of(node: ShareNode, tid: uuid.UUID, p: int) -> tuple[int, int]:
    t = node.metadata.topic_by_id(tid)
    reg = t.partition(p) if t is not None else None
    return (reg.leader, reg.leader_epoch) if reg is not None else (-1, -1)


async def handle(node: ShareNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    group_id = str(request.group_id or "")
    member_id = request.member_id or ""
    request_refusal = refusal(node, ctx, group_id, member_id)
    if request_refusal is not None:
        return _error(mod, *request_refusal)
    service = share_service_of(node)
    lock_ms = service.lock_duration_ms(group_id)
    image = node.metadata
    acks = acks_of(request.topics)
    is_renew = bool(getattr(request, "is_renew_ack", False))
    if not renews_consistent(acks, is_renew):
        return _error(mod, ErrorCode.invalid_request,
                      "IsRenewAck must be set exactly when a batch holds a RENEW.", lock_ms)
    # READ on each topic (Kafka: TOPIC_AUTHORIZATION_FAILED per partition)
    refused: set[tuple[uuid.UUID, int]] = set()
    added: list[tuple[uuid.UUID, int]] = []
    for t in request.topics:
        topic = image.topic_by_id(t.topic_id)
        ok = topic is not None and allowed(node, ctx, Op.READ, Res.TOPIC, topic.name)
        for p in t.partitions:
            key = (t.topic_id, int(p.partition_index))
            added.append(key)
            if topic is not None and not ok:
                refused.add(key)
    forgotten = [(t.topic_id, int(p)) for t in request.forgotten_topics_data
                 for p in t.partitions]
    epoch = int(request.share_session_epoch)
    error, session, message = service.sessions.fetch_update(
        group_id, member_id, epoch, added, forgotten, bool(acks))
    if error is not ErrorCode.none or session is None:
        return _error(mod, error, message)
    answers: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
    for key in refused:
        answers[key] = PartitionAnswer(*key, error=ErrorCode.topic_authorization_failed)
    ack_results = await service.acknowledge(
        group_id, member_id, {k: v for k, v in acks.items() if k not in refused})
    for key, (ack_error, ack_message) in ack_results.items():
        a = answers.setdefault(key, PartitionAnswer(*key))
        a.ack_error, a.ack_error_message = ack_error, ack_message
    if epoch == FINAL_EPOCH:
        await service.close_session(session)
    elif not is_renew:
        max_wait_ms = int(request.max_wait.total_seconds() * 1000)
        max_records = int(request.max_records) if int(request.max_records) > 0 else _INT_MAX
        max_bytes = int(request.max_bytes) if int(request.max_bytes) > 0 else _INT_MAX
        # answered at once when acknowledgements or errors are already in the answer
        wait = 0 if answers else max_wait_ms
        record_limit = int(getattr(request, "share_acquire_mode", 0)) == RECORD_LIMIT_MODE
        for a in await service.fetch(group_id, member_id, session, wait, max_records,
                                     max_bytes, refused, whole_batches=not record_limit):
            prior = answers.get((a.topic_id, a.partition))
            if prior is not None:
                a.ack_error, a.ack_error_message = prior.ack_error, prior.ack_error_message
            answers[(a.topic_id, a.partition)] = a
    for (tid, p), a in answers.items():
        if a.leader_id < 0:
            a.leader_id, a.leader_epoch = leader_of(node, tid, p)
    return build(mod.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=topic_responses(mod, list(answers.values()), fetch=True),
                 node_endpoints=())
