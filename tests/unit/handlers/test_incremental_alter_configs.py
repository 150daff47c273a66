"""IncrementalAlterConfigs v0-1: SET, DELETE, APPEND, SUBTRACT through the controller."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.handlers import incremental_alter_configs
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip

VERSIONS = range(0, 2)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def resource(v: int, rtype: int, name: str, ops: list[tuple[str, int, str | None]]) -> Any:
    m = importlib.import_module(f"kio.schema.incremental_alter_configs.v{v}.request")
    return build(m.AlterConfigsResource, resource_type=rtype, resource_name=name,
                 configs=tuple(build(m.AlterableConfig, name=k, config_operation=op, value=val)
                               for k, op, val in ops))


def request(v: int, *resources: Any, validate_only: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.incremental_alter_configs.v{v}.request")
    return build(m.IncrementalAlterConfigsRequest, resources=tuple(resources),
                 validate_only=validate_only)


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(incremental_alter_configs.handle(node, make_ctx(44, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


@pytest.mark.parametrize("v", VERSIONS)
def test_operations(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic(
        "t", 1, 1, configs={"segment.ms": "60000"})]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [
        ("retention.ms", SET, "1000"), ("segment.ms", DELETE, None),
        ("cleanup.policy", APPEND, "compact")])))
    assert [(r.resource_name, r.error_code, r.error_message) for r in resp.responses] == [
        ("t", ErrorCode.none, None)]
    # APPEND starts from the default [delete]
    assert dict(node.metadata.topic_config("t")) == {
        "retention.ms": "1000", "cleanup.policy": "delete,compact"}
    call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [
        ("cleanup.policy", SUBTRACT, "delete")])))
    assert node.metadata.topic_config("t")["cleanup.policy"] == "compact"


@pytest.mark.parametrize("v", VERSIONS)
def test_validate_only(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("t", 1, 1)]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [
        ("retention.ms", SET, "1000")]), validate_only=True))
    assert resp.responses[0].error_code is ErrorCode.none
    assert dict(node.metadata.topic_config("t")) == {}


@pytest.mark.parametrize("v", VERSIONS)
def test_errors_per_resource(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("t", 1, 1),
                                              CreatableTopic("u", 1, 1)]))
    resp = call(node, v, request(
        v,
        resource(v, RESOURCE_TOPIC, "t", [("retention.ms", 9, "1")]),          # unknown op
        resource(v, RESOURCE_TOPIC, "u", [("retention.ms", APPEND, "1")]),     # not a list
        resource(v, RESOURCE_TOPIC, "missing", [("retention.ms", SET, "1")]),
        resource(v, RESOURCE_BROKER, "", [("log.retention.ms", SET, "x")]),
        resource(v, RESOURCE_BROKER, "", [("log.retention.ms", SET, "5")]),    # duplicate
    ))
    assert [(r.resource_name, r.error_code) for r in resp.responses] == [
        ("t", ErrorCode.invalid_request),
        ("u", ErrorCode.invalid_config),
        ("missing", ErrorCode.unknown_topic_or_partition),
        ("", ErrorCode.invalid_request),
        ("", ErrorCode.invalid_request),
    ]
    assert dict(node.metadata.topic_config("t")) == {}
    assert dict(node.metadata.broker_config()) == {}


@pytest.mark.parametrize("v", VERSIONS)
def test_delete_of_any_topic_config_name_is_accepted(node: TestNode, v: int) -> None:
    """Kafka 4.4 checks a topic's configs as they are after the change, so a DELETE of a name
    it does not know, or of one Skiff does not serve, is accepted (checked against a
    reference node). MirrorMaker 2's topic-config sync sends one for every config at its
    default on the source: Kafka 4.4's errors.deadletterqueue.group.enable and remote.*
    failed the whole sync to Skiff. A SET of an unknown name is still refused."""
    asyncio.run(node.controller.create_topics([CreatableTopic(
        "t", 1, 1, configs={"segment.ms": "60000"})]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [
        ("errors.deadletterqueue.group.enable", DELETE, None),
        ("remote.storage.enable", DELETE, None), ("no.such.config", DELETE, None),
        ("segment.ms", DELETE, None), ("retention.ms", SET, "12345")])))
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(ErrorCode.none, None)]
    assert dict(node.metadata.topic_config("t")) == {"retention.ms": "12345"}
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [
        ("no.such.config", SET, "1")])))
    assert [(r.error_code, r.error_message) for r in resp.responses] == [
        (ErrorCode.invalid_config, "Unknown topic config name: no.such.config")]
    assert dict(node.metadata.topic_config("t")) == {"retention.ms": "12345"}


def test_broker_dynamic_default(node: TestNode) -> None:
    resp = call(node, 1, request(1, resource(1, RESOURCE_BROKER, "", [
        ("log.retention.ms", SET, "86400000")])))
    assert resp.responses[0].error_code is ErrorCode.none
    assert dict(node.metadata.broker_config()) == {"log.retention.ms": "86400000"}


def test_not_controller(node: TestNode) -> None:
    node.quorum.is_leader = False
    resp = call(node, 0, request(0, resource(0, RESOURCE_BROKER, "", [])))
    assert resp.responses[0].error_code is ErrorCode.not_controller
