# mypy: disable-error-code="no-any-return"
"""CreatePartitions (API 37). The codec both the client-facing handler
(broker/handlers/create_partitions.py, versions 0-3) and the controller listener (v3) use;
the answer is of the request's version."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from kio.schema.create_partitions.v3 import request as kreq
from kio.schema.create_partitions.v3 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import CreatePartitionsResult, CreatePartitionsTopic
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 37
VERSION = 3


def request(topics: Sequence[CreatePartitionsTopic], validate_only: bool,
            timeout_ms: int) -> kreq.CreatePartitionsRequest:
    return Q.CreatePartitionsRequest(
        topics=tuple(Q.CreatePartitionsTopic(
            name=t.name, count=t.count,
            assignments=None if t.assignments is None else tuple(
                Q.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in t.assignments))
            for t in topics),
        timeout=duration(timeout_ms), validate_only=validate_only)


def topic_of(t: Any) -> CreatePartitionsTopic:
    """One CreatePartitionsTopic of any version."""
    return CreatePartitionsTopic(
        name=t.name, count=int(t.count),
        assignments=None if t.assignments is None else [
            [int(b) for b in a.broker_ids] for a in t.assignments])


def parse(r: kreq.CreatePartitionsRequest) -> list[CreatePartitionsTopic]:
    return [topic_of(t) for t in r.topics]


def response(request: Any, results: Sequence[CreatePartitionsResult],
             throttle_time: datetime.timedelta = NO_THROTTLE) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    return build(mod.CreatePartitionsResponse, throttle_time=throttle_time, results=tuple(
        build(mod.CreatePartitionsTopicResult, name=x.name, error_code=x.error,
              error_message=x.message or None)
        for x in results))


def results_of(r: kresp.CreatePartitionsResponse) -> list[CreatePartitionsResult]:
    return [CreatePartitionsResult(x.name, x.error_code, x.error_message) for x in r.results]


def error_code_of(r: kresp.CreatePartitionsResponse) -> ErrorCode:
    return next((t.error_code for t in r.results if t.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def _failed(r: kreq.CreatePartitionsRequest, code: ErrorCode, message: str | None) -> Any:
    return response(r, [CreatePartitionsResult(t.name, code, message) for t in r.topics])


def error_response(ctx: Any, r: kreq.CreatePartitionsRequest, code: ErrorCode) -> Any:
    return _failed(r, code, None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.CreatePartitionsRequest) -> Any:
    try:
        service = active_service(node)
        topics = parse(r)
        return response(r, await within(
            lambda: service.create_partitions(topics, validate_only=r.validate_only),
            to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
