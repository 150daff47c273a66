# mypy: disable-error-code="no-any-return"
"""CreateTopics (API 19): a broker forwards its clients' topic creations to the active
controller (KRaft brokers never write metadata themselves). The codec both the
client-facing handler (broker/handlers/create_topics.py, versions 0-7) and the controller
listener (v7) use; the answer is of the request's version. From v5 a created topic's answer
carries its id, partition count, replication factor and configs: the controller listener
sends the explicit ones (DYNAMIC_TOPIC_CONFIG), the handler every config with its source."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kio.schema.create_topics.v7 import request as kreq
from kio.schema.create_topics.v7 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import CreatableTopic, CreateTopicResult
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 19
VERSION = 7
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config source of a topic's explicit config


class TopicConfig(NamedTuple):
    """One config of a created topic as CreateTopics v5+ answers it."""
    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False


# A created topic's configs: (topic_config_error_code, configs)
ConfigsOf = Callable[[CreateTopicResult], tuple[ErrorCode, Sequence[TopicConfig]]]


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


def creatable_of(t: Any) -> CreatableTopic | CreateTopicResult:
    """One CreatableTopic of any version, or its refusal (a partition assigned twice)."""
    assignments: dict[int, tuple[int, ...]] | None = None
    if t.assignments:
        assignments = {}
        for a in t.assignments:
            if int(a.partition_index) in assignments:
                return CreateTopicResult(
                    t.name, ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition "
                    f"{a.partition_index}")
            assignments[int(a.partition_index)] = tuple(int(b) for b in a.broker_ids)
    return CreatableTopic(
        name=t.name, num_partitions=int(t.num_partitions),
        replication_factor=int(t.replication_factor), assignments=assignments,
        configs={c.name: c.value for c in t.configs})


def explicit_configs(x: CreateTopicResult) -> tuple[ErrorCode, list[TopicConfig]]:
    """The configs the topic was created with, as the controller knows them."""
    return ErrorCode.none, [TopicConfig(k, v, _DYNAMIC_TOPIC_CONFIG)
                            for k, v in x.configs.items()]


def response(request: Any, results: Sequence[CreateTopicResult],
             configs_of: ConfigsOf = explicit_configs,
             throttle_time: datetime.timedelta = NO_THROTTLE) -> Any:
    """The answer to `request`, of its version; `configs_of` gives a created topic's
    configs (v5+). A sensitive config's value is withheld."""
    mod = response_module(request)
    described = hasattr(mod, "CreatableTopicConfigs")
    topics = []
    for x in results:
        ok = x.error is ErrorCode.none
        config_error, configs = configs_of(x) if ok and described else (ErrorCode.none, ())
        topics.append(build(
            mod.CreatableTopicResult, name=x.name, topic_id=x.topic_id, error_code=x.error,
            error_message=x.message or None, topic_config_error_code=config_error,
            num_partitions=x.num_partitions if ok else -1,
            replication_factor=x.replication_factor if ok else -1,
            configs=tuple(build(
                mod.CreatableTopicConfigs, name=c.name, value=None if c.sensitive else c.value,
                read_only=c.read_only, config_source=c.source, is_sensitive=c.sensitive)
                for c in configs)))
    return build(mod.CreateTopicsResponse, throttle_time=throttle_time, topics=tuple(topics))


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


def _failed(r: kreq.CreateTopicsRequest, code: ErrorCode, message: str | None) -> Any:
    return response(r, [CreateTopicResult(t.name, code, message) for t in r.topics])


def error_response(ctx: Any, r: kreq.CreateTopicsRequest, code: ErrorCode) -> Any:
    return _failed(r, code, None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.CreateTopicsRequest) -> Any:
    try:
        service = active_service(node)
        parsed = [creatable_of(t) for t in r.topics]
        topics = [t for t in parsed if isinstance(t, CreatableTopic)]
        refused = [t for t in parsed if isinstance(t, CreateTopicResult)]
        created = await within(
            lambda: service.create_topics(topics, validate_only=r.validate_only),
            to_ms(r.timeout, 0)) if topics else []
        return response(r, [*created, *refused])
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
