# mypy: disable-error-code="no-any-return"
"""CreateTopics (API 19) on the controller listener: a broker forwards its clients' topic
creations here (KRaft brokers never write metadata themselves). Answers carry each created
topic's id, partition count, replication factor and its explicit configs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.create_topics.v7 import request as kreq
from kio.schema.create_topics.v7 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import CreatableTopic, CreateTopicResult
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 19
VERSION = 7
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config source of a topic's explicit config


def request(topics: Sequence[CreatableTopic], validate_only: bool,
            timeout_ms: int) -> kreq.CreateTopicsRequest:
    return Q.CreateTopicsRequest(
        topics=tuple(
            Q.CreatableTopic(
                name=t.name, num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=tuple(
                    Q.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(b))
                    for i, b in sorted((t.assignments or {}).items())),
                configs=tuple(Q.CreatableTopicConfig(name=k, value=v)
                              for k, v in t.configs.items()))
            for t in topics),
        timeout=duration(timeout_ms), validate_only=validate_only)


def parse(r: kreq.CreateTopicsRequest) -> list[CreatableTopic]:
    return [CreatableTopic(
        name=t.name, num_partitions=int(t.num_partitions),
        replication_factor=int(t.replication_factor),
        assignments={int(a.partition_index): tuple(int(b) for b in a.broker_ids)
                     for a in t.assignments} or None,
        configs={c.name: c.value for c in t.configs})
        for t in r.topics]


def response(results: Sequence[CreateTopicResult]) -> kresp.CreateTopicsResponse:
    return P.CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(
        P.CreatableTopicResult(
            name=x.name, topic_id=x.topic_id or uuid.UUID(int=0), error_code=x.error,
            error_message=x.message, topic_config_error_code=0,
            num_partitions=x.num_partitions, replication_factor=x.replication_factor,
            configs=tuple(P.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=_DYNAMIC_TOPIC_CONFIG,
                is_sensitive=False) for k, v in x.configs.items()))
        for x in results))


def results_of(r: kresp.CreateTopicsResponse) -> list[CreateTopicResult]:
    return [CreateTopicResult(
        name=t.name, error=t.error_code, message=t.error_message,
        topic_id=None if t.topic_id is None or t.topic_id.int == 0 else t.topic_id,
        num_partitions=int(t.num_partitions), replication_factor=int(t.replication_factor),
        configs={c.name: c.value for c in t.configs or () if c.value is not None})
        for t in r.topics]


def error_code_of(r: kresp.CreateTopicsResponse) -> ErrorCode:
    return next((t.error_code for t in r.topics if t.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def _failed(r: kreq.CreateTopicsRequest, code: ErrorCode, message: str | None
            ) -> kresp.CreateTopicsResponse:
    return response([CreateTopicResult(t.name, code, message) for t in r.topics])


def error_response(ctx: Any, r: kreq.CreateTopicsRequest, code: ErrorCode
                   ) -> kresp.CreateTopicsResponse:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: kreq.CreateTopicsRequest) -> kresp.CreateTopicsResponse:
    try:
        service = active_service(node)
        topics = parse(r)
        return response(await within(
            lambda: service.create_topics(topics, validate_only=r.validate_only),
            to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
