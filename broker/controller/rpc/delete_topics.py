# mypy: disable-error-code="no-any-return"
"""DeleteTopics (API 20) on the controller listener, by name or by topic id."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.delete_topics.v6 import request as kreq
from kio.schema.delete_topics.v6 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import DeleteTopicResult
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

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
    ids = [t.topic_id for t in r.topics
           if t.name is None and t.topic_id is not None and t.topic_id != _ZERO]
    return names, ids


def response(results: Sequence[DeleteTopicResult]) -> kresp.DeleteTopicsResponse:
    return P.DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(
        P.DeletableTopicResult(name=x.name, topic_id=x.topic_id or _ZERO,
                                   error_code=x.error, error_message=x.message)
        for x in results))


def results_of(r: kresp.DeleteTopicsResponse) -> list[DeleteTopicResult]:
    return [DeleteTopicResult(
        name=x.name, topic_id=None if x.topic_id is None or x.topic_id == _ZERO else x.topic_id,
        error=x.error_code, message=x.error_message) for x in r.responses]


def error_code_of(r: kresp.DeleteTopicsResponse) -> ErrorCode:
    return next((t.error_code for t in r.responses if t.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def _failed(r: kreq.DeleteTopicsRequest, code: ErrorCode, message: str | None
            ) -> kresp.DeleteTopicsResponse:
    return response([DeleteTopicResult(
        t.name, None if t.topic_id is None or t.topic_id == _ZERO else t.topic_id, code, message)
        for t in r.topics])


def error_response(ctx: Any, r: kreq.DeleteTopicsRequest, code: ErrorCode
                   ) -> kresp.DeleteTopicsResponse:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: kreq.DeleteTopicsRequest) -> kresp.DeleteTopicsResponse:
    try:
        service = active_service(node)
        names, ids = parse(r)
        return response(await within(lambda: service.delete_topics(names, ids),
                                     to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
