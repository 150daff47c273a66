"""AlterConfigs v0-2 (legacy, whole-set replacement) through the real controller service."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.handlers import alter_configs
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip

VERSIONS = range(0, 3)


def resource(v: int, rtype: int, name: str, configs: dict[str, str | None]) -> Any:
    m = importlib.import_module(f"kio.schema.alter_configs.v{v}.request")
    return build(m.AlterConfigsResource, resource_type=rtype, resource_name=name,
                 configs=tuple(build(m.AlterableConfig, name=k, value=val)
                               for k, val in configs.items()))


def request(v: int, *resources: Any, validate_only: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.alter_configs.v{v}.request")
    return build(m.AlterConfigsRequest, resources=tuple(resources), validate_only=validate_only)


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(alter_configs.handle(node, make_ctx(33, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


@pytest.mark.parametrize("v", VERSIONS)
def test_replaces_the_whole_set(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic(
        "t", 1, 1, configs={"retention.ms": "1000", "segment.ms": "60000"})]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", {
        "retention.ms": "2000", "cleanup.policy": "compact"})))
    assert [(r.resource_type, r.resource_name, r.error_code, r.error_message)
            for r in resp.responses] == [(RESOURCE_TOPIC, "t", ErrorCode.none, None)]
    # segment.ms was not in the request: the legacy API removes it
    assert dict(node.metadata.topic_config("t")) == {
        "retention.ms": "2000", "cleanup.policy": "compact"}


@pytest.mark.parametrize("v", VERSIONS)
def test_validate_only_and_broker_resource(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("t", 1, 1)]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", {"retention.ms": "5"}),
                                 validate_only=True))
    assert resp.responses[0].error_code is ErrorCode.none
    assert dict(node.metadata.topic_config("t")) == {}
    resp = call(node, v, request(v, resource(v, RESOURCE_BROKER, str(NODE_ID),
                                             {"log.retention.ms": "777"})))
    assert resp.responses[0].error_code is ErrorCode.none
    assert dict(node.metadata.broker_config(NODE_ID)) == {"log.retention.ms": "777"}


@pytest.mark.parametrize("v", VERSIONS)
def test_errors_per_resource(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("t", 1, 1)]))
    resp = call(node, v, request(
        v,
        resource(v, RESOURCE_TOPIC, "missing", {"retention.ms": "1"}),
        resource(v, RESOURCE_TOPIC, "t", {"retention.ms": "soon"}),
        resource(v, RESOURCE_BROKER, str(NODE_ID), {"node.id": "5"}),
        resource(v, RESOURCE_BROKER, "", {"retention.ms": "1"}),  # a topic key on a broker
        resource(v, 99, "x", {}),
    ))
    assert [(r.resource_name, r.error_code) for r in resp.responses] == [
        ("missing", ErrorCode.unknown_topic_or_partition),
        ("t", ErrorCode.invalid_config),
        # a BROKER resource's refused config is INVALID_REQUEST, as Kafka's (KAFKA-13609)
        (str(NODE_ID), ErrorCode.invalid_request),
        ("", ErrorCode.invalid_request),
        ("x", ErrorCode.invalid_request),
    ]
    assert all(r.error_message for r in resp.responses)
    assert dict(node.metadata.topic_config("t")) == {}


def test_not_controller(node: TestNode) -> None:
    node.quorum.is_leader = False
    resp = call(node, 2, request(2, resource(2, RESOURCE_BROKER, "", {}),
                                 resource(2, RESOURCE_TOPIC, "t", {})))
    assert [r.error_code for r in resp.responses] == [ErrorCode.not_controller] * 2


def test_empty_request(node: TestNode) -> None:
    assert call(node, 1, request(1)).responses == ()
