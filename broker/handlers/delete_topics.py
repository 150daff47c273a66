"""DeleteTopics (API 20), versions 0-6: delete topics by name (v0, dropped by Kafka 4.0 in
KIP-896, answers without throttle time); v5 answers an error message, and
THROTTLING_QUOTA_EXCEEDED (KIP-599) for a topic asked for while the controller mutation
quota is exceeded (broker/handlers/_quotas.MutationQuota); v6 names each topic by name or
by id (KIP-516).

The controller answers once the RemoveTopic records are committed and applied on this
node, so a client that gets NONE no longer sees the topic in Metadata. v6 follows Kafka's
controller: a topic with neither a name nor an id, or with both, and a name or id given more
than once, are INVALID_REQUEST; an unknown id is UNKNOWN_TOPIC_ID (answered without a name).
Every version needs DELETE on each topic (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.deadline import within as await_controller
from broker.controller.requests import DeleteTopicResult
from broker.controller.rpc import delete_topics as rpc
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._quotas import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from broker.protocol.durations import duration, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 20
TOPIC_IDS_VERSION = 6
error_response = rpc.error_response


def _authorized(node: BrokerServices, ctx: RequestContext, names: list[str],
                ids: list[uuid.UUID], answers: list[DeleteTopicResult]
                ) -> tuple[list[str], list[uuid.UUID]]:
    """The names and ids the caller may delete; TOPIC_AUTHORIZATION_FAILED for the others,
    appended to `answers` as Kafka's ControllerApis.deleteTopics answers them: a name without
    DELETE on its topic; an id whose topic may be described but not deleted (answered with
    its name) or not even described (answered without one, so its name is not given away).
    An unknown id goes on to the controller (UNKNOWN_TOPIC_ID)."""
    image = node.metadata
    keep_names: list[str] = []
    for n in names:
        if allowed(node, ctx, Op.DELETE, Res.TOPIC, n):
            keep_names.append(n)
        else:
            answers.append(DeleteTopicResult(n, None, ErrorCode.topic_authorization_failed,
                                             None))
    keep_ids: list[uuid.UUID] = []
    for tid in ids:
        topic = image.topic_by_id(tid)
        if topic is None or allowed(node, ctx, Op.DELETE, Res.TOPIC, topic.name):
            keep_ids.append(tid)
        elif allowed(node, ctx, Op.DESCRIBE, Res.TOPIC, topic.name):
            answers.append(DeleteTopicResult(topic.name, tid,
                                             ErrorCode.topic_authorization_failed, None))
        else:
            answers.append(DeleteTopicResult(None, tid, ErrorCode.topic_authorization_failed,
                                             None))
    return keep_names, keep_ids


def _within_quota(node: BrokerServices, ctx: RequestContext, names: list[str],
                  ids: list[uuid.UUID], answers: list[DeleteTopicResult]
                  ) -> tuple[list[str], list[uuid.UUID], MutationQuota]:
    """controller_mutation_rate (KIP-599, strict at v6): the partitions of each topic count;
    a topic asked for once the quota is used up is THROTTLING_QUOTA_EXCEEDED, as by name
    in earlier versions. Unknown names and ids cost nothing (the controller answers them)."""
    quota = MutationQuota(node, ctx, strict=True)
    image = node.metadata
    keep_names: list[str] = []
    for n in names:
        topic = image.topic(n)
        if quota.admit(topic.num_partitions if topic else 0):
            keep_names.append(n)
        else:
            answers.append(DeleteTopicResult(n, None, ErrorCode.throttling_quota_exceeded,
                                             THROTTLING_QUOTA_EXCEEDED_MESSAGE))
    keep_ids: list[uuid.UUID] = []
    for tid in ids:
        topic = image.topic_by_id(tid)
        if quota.admit(topic.num_partitions if topic else 0):
            keep_ids.append(tid)
        else:
            answers.append(DeleteTopicResult(topic.name if topic else None, tid,
                                             ErrorCode.throttling_quota_exceeded,
                                             THROTTLING_QUOTA_EXCEEDED_MESSAGE))
    return keep_names, keep_ids, quota


async def _by_ids(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """v6: each topic by name or by id (the controller answers duplicates)."""
    answers: list[DeleteTopicResult] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for t in request.topics:
        tid = rpc.topic_id_of(t)
        if t.name is None and tid is None:
            answers.append(DeleteTopicResult(None, None, ErrorCode.invalid_request,
                                             "Neither topic name nor id were specified."))
        elif t.name is not None and tid is not None:
            answers.append(DeleteTopicResult(t.name, tid, ErrorCode.invalid_request,
                                             "You may not specify both topic name and topic id."))
        elif tid is not None:
            ids.append(tid)
        else:
            names.append(t.name)
    names, ids = _authorized(node, ctx, names, ids, answers)
    names, ids, quota = _within_quota(node, ctx, names, ids, answers)
    if names or ids:
        try:
            answers.extend(await await_controller(
                lambda: node.controller.delete_topics(names, ids), to_ms(request.timeout, 0)))
        except KafkaError as exc:
            answers.extend(DeleteTopicResult(n, None, exc.error_code, exc.message)
                           for n in dict.fromkeys(names))
            answers.extend(DeleteTopicResult(None, i, exc.error_code, exc.message)
                           for i in dict.fromkeys(ids))
    once: list[DeleteTopicResult] = []
    seen: set[tuple[str | None, uuid.UUID | None]] = set()
    for r in answers:  # one answer per duplicated name or id, as Kafka's controller
        key = (r.name, r.topic_id)
        if key != (None, None) and key in seen:
            continue
        seen.add(key)
        once.append(r)
    return rpc.response(request, once, duration(quota.throttle_ms()))


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= TOPIC_IDS_VERSION:
        return await _by_ids(node, ctx, request)
    names = list(request.topic_names)
    order = list(dict.fromkeys(names))  # one answer per distinct name, in request order
    results: dict[str, DeleteTopicResult] = {}
    # controller_mutation_rate (KIP-599): the partitions deleted count; strict from v5
    quota = MutationQuota(node, ctx, strict=ctx.api_version >= 5)
    image = node.metadata
    for n in order:
        if not allowed(node, ctx, Op.DELETE, Res.TOPIC, n):  # else TOPIC_AUTHORIZATION_FAILED
            results[n] = DeleteTopicResult(n, None, ErrorCode.topic_authorization_failed,
                                           None)
            continue
        topic = image.topic(n)
        if not quota.admit(topic.num_partitions if topic else 0):
            results[n] = DeleteTopicResult(n, None, ErrorCode.throttling_quota_exceeded,
                                           THROTTLING_QUOTA_EXCEEDED_MESSAGE)
    names = [n for n in names if n not in results]
    if names:
        try:
            deleted = await await_controller(
                lambda: node.controller.delete_topics(names), to_ms(request.timeout, 0))
            for r in deleted:
                if r.name is not None:
                    results.setdefault(r.name, r)
        except KafkaError as exc:
            for n in dict.fromkeys(names):
                results[n] = DeleteTopicResult(n, None, exc.error_code, exc.message)
    return rpc.response(request, [results[n] for n in order], duration(quota.throttle_ms()))
