"""DeleteTopics (API 20), versions 0-5: delete topics by name (v0, dropped by Kafka 4.0 in
KIP-896, answers without throttle time). v5 (KIP-599) answers THROTTLING_QUOTA_EXCEEDED
for a topic asked for while the controller mutation quota is exceeded (broker/handlers/
_quotas.MutationQuota), with an error message per topic.

The controller answers once the RemoveTopic records are committed and applied on this
node, so a client that gets NONE no longer sees the topic in Metadata. (Deletion by topic
id is v6, not served.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.deadline import within as await_controller
from broker.controller.requests import DeleteTopicResult
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._build import build, response_module
from broker.handlers._quotas import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from broker.protocol.durations import NO_THROTTLE, duration, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 20


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
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
    responses = tuple(
        build(mod.DeletableTopicResult, name=n, error_code=results[n].error,
              error_message=results[n].message or None)
        for n in order
    )
    return build(mod.DeleteTopicsResponse, throttle_time=duration(quota.throttle_ms()),
                 responses=responses)


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    mod = response_module(request)
    return build(mod.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(
        build(mod.DeletableTopicResult, name=n, error_code=code)
        for n in dict.fromkeys(request.topic_names)))
