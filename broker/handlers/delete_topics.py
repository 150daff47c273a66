"""DeleteTopics (API 20), versions 0-4: delete topics by name (v0, dropped by Kafka 4.0 in
KIP-896, answers without throttle time).

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
from broker.protocol.durations import NO_THROTTLE, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 20


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    names = list(request.topic_names)
    order = list(dict.fromkeys(names))  # one answer per distinct name, in request order
    results: dict[str, DeleteTopicResult] = {}
    for n in order:  # DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED
        if not allowed(node, ctx, Op.DELETE, Res.TOPIC, n):
            results[n] = DeleteTopicResult(n, None, ErrorCode.topic_authorization_failed,
                                           None)
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
        build(mod.DeletableTopicResult, name=n, error_code=results[n].error)
        for n in order
    )
    return build(mod.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=responses)


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    mod = response_module(request)
    return build(mod.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(
        build(mod.DeletableTopicResult, name=n, error_code=code)
        for n in dict.fromkeys(request.topic_names)))
