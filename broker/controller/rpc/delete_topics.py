# mypy: disable-error-code="no-any-return"
"""DeleteTopics (API 20), by name or by topic id. The codec both the client-facing handler
(broker/handlers/delete_topics.py, versions 0-6) and the controller listener (v6) use;
the answer is of the request's version (v0-v5 name topics, v6 names or ids)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.delete_topics.v6 import request as kreq
from kio.schema.delete_topics.v6 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import DeleteTopicResult
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 20
VERSION = 6
_ZERO = uuid.UUID(int=0)


def request(names: Sequence[str], topic_ids: Sequence[uuid.UUID],
            timeout_ms: int) -> kreq.DeleteTopicsRequest:
    return Q.DeleteTopicsRequest(
        topics=(*(Q.DeleteTopicState(name=n, topic_id=_ZERO) for n in names),
                *(Q.DeleteTopicState(name=None, topic_id=t) for t in topic_ids)),
        timeout=duration(timeout_ms))


def parse(r: kreq.DeleteTopicsRequest) -> tuple[list[str], list[uuid.UUID]]:
    names = [str(t.name) for t in r.topics if t.name is not None]
    ids = [i for t in r.topics if t.name is None and (i := topic_id_of(t)) is not None]
    return names, ids


def topic_id_of(t: Any) -> uuid.UUID | None:
    """A DeleteTopicState's id, None for the zero Uuid (named by name)."""
    return None if t.topic_id is None or t.topic_id == _ZERO else t.topic_id


def response(request: Any, results: Sequence[DeleteTopicResult],
             throttle_time: datetime.timedelta = NO_THROTTLE) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    return build(mod.DeleteTopicsResponse, throttle_time=throttle_time, responses=tuple(
        build(mod.DeletableTopicResult, name=x.name, topic_id=x.topic_id, error_code=x.error,
              error_message=x.message or None)
        for x in results))


def results_of(r: kresp.DeleteTopicsResponse) -> list[DeleteTopicResult]:
    return [DeleteTopicResult(
        name=x.name, topic_id=None if x.topic_id is None or x.topic_id == _ZERO else x.topic_id,
        error=x.error_code, message=x.error_message) for x in r.responses]


def error_code_of(r: kresp.DeleteTopicsResponse) -> ErrorCode:
    return next((t.error_code for t in r.responses if t.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    """Every topic of `r` answered `code` (v0-v5: once per distinct name)."""
    if hasattr(r, "topic_names"):
        return response(r, [DeleteTopicResult(n, None, code, message)
                            for n in dict.fromkeys(r.topic_names)])
    return response(r, [DeleteTopicResult(t.name, topic_id_of(t), code, message)
                        for t in r.topics])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.DeleteTopicsRequest) -> Any:
    try:
        service = active_service(node)
        names, ids = parse(r)
        return response(r, await within(lambda: service.delete_topics(names, ids),
                                        to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)
