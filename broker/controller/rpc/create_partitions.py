# mypy: disable-error-code="no-any-return"
"""CreatePartitions (API 37) on the controller listener."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.create_partitions.v3 import request as kreq
from kio.schema.create_partitions.v3 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import CreatePartitionsResult, CreatePartitionsTopic
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

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


def parse(r: kreq.CreatePartitionsRequest) -> list[CreatePartitionsTopic]:
    return [CreatePartitionsTopic(
        name=t.name, count=int(t.count),
        assignments=None if t.assignments is None else [
            [int(b) for b in a.broker_ids] for a in t.assignments])
        for t in r.topics]


def response(results: Sequence[CreatePartitionsResult]) -> kresp.CreatePartitionsResponse:
    return P.CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(
        P.CreatePartitionsTopicResult(name=x.name, error_code=x.error,
                                          error_message=x.message)
        for x in results))


def results_of(r: kresp.CreatePartitionsResponse) -> list[CreatePartitionsResult]:
    return [CreatePartitionsResult(x.name, x.error_code, x.error_message) for x in r.results]


def error_code_of(r: kresp.CreatePartitionsResponse) -> ErrorCode:
    return next((t.error_code for t in r.results if t.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def _failed(r: kreq.CreatePartitionsRequest, code: ErrorCode, message: str | None
            ) -> kresp.CreatePartitionsResponse:
    return response([CreatePartitionsResult(t.name, code, message) for t in r.topics])


def error_response(ctx: Any, r: kreq.CreatePartitionsRequest, code: ErrorCode
                   ) -> kresp.CreatePartitionsResponse:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: kreq.CreatePartitionsRequest
                 ) -> kresp.CreatePartitionsResponse:
    try:
        service = active_service(node)
        topics = parse(r)
        return response(await within(
            lambda: service.create_partitions(topics, validate_only=r.validate_only),
            to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
