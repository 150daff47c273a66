"""CreatePartitions v0-3 through the real controller service."""

from __future__ import annotations

import asyncio
import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.handlers import create_partitions
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip

VERSIONS = range(0, 4)


def topic(v: int, name: str, count: int, assignments: list[list[int]] | None = None) -> Any:
    m = importlib.import_module(f"kio.schema.create_partitions.v{v}.request")
    return build(m.CreatePartitionsTopic, name=name, count=count, assignments=None
                 if assignments is None else tuple(
                     build(m.CreatePartitionsAssignment, broker_ids=tuple(a))
                     for a in assignments))


def request(v: int, *topics: Any, validate_only: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.create_partitions.v{v}.request")
    return build(m.CreatePartitionsRequest, topics=tuple(topics),
                 timeout=datetime.timedelta(seconds=5), validate_only=validate_only)


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(create_partitions.handle(node, make_ctx(37, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def create(node: TestNode, name: str, partitions: int = 1) -> None:
    results = asyncio.run(node.controller.create_topics([CreatableTopic(name, partitions, 1)]))
    assert results[0].error is ErrorCode.none


@pytest.mark.parametrize("v", VERSIONS)
def test_grow_with_and_without_assignments(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    create(node, "grow")
    create(node, "placed")
    resp = call(node, v, request(v, topic(v, "grow", 3), topic(v, "placed", 3, [[2], [NODE_ID]])))
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        ("grow", ErrorCode.none, None), ("placed", ErrorCode.none, None)]
    assert node.topic("grow").num_partitions == 3
    placed = node.topic("placed").partitions
    assert (placed[1].replicas, placed[2].replicas) == ((2,), (NODE_ID,))
    assert placed[1].leader == 2


@pytest.mark.parametrize("v", VERSIONS)
def test_validate_only(node: TestNode, v: int) -> None:
    create(node, "same")
    resp = call(node, v, request(v, topic(v, "same", 5), validate_only=True))
    assert resp.results[0].error_code is ErrorCode.none
    assert node.topic("same").num_partitions == 1


@pytest.mark.parametrize("v", VERSIONS)
def test_errors(node: TestNode, v: int) -> None:
    create(node, "two", 2)
    resp = call(node, v, request(
        v, topic(v, "missing", 2), topic(v, "two", 1), topic(v, "two-b", 2),
        topic(v, "dup", 2), topic(v, "dup", 3)))
    codes = [(r.name, r.error_code) for r in resp.results]
    assert codes == [("missing", ErrorCode.unknown_topic_or_partition),
                     ("two", ErrorCode.invalid_partitions),
                     ("two-b", ErrorCode.unknown_topic_or_partition),
                     ("dup", ErrorCode.invalid_request)]
    assert all(r.error_message for r in resp.results)
    resp = call(node, v, request(v, topic(v, "two", 2)))
    assert resp.results[0].error_code is ErrorCode.invalid_partitions
    resp = call(node, v, request(v, topic(v, "two", 4, [[NODE_ID]])))  # 2 new, 1 assignment
    assert resp.results[0].error_code is ErrorCode.invalid_replica_assignment
    resp = call(node, v, request(v, topic(v, "two", 3, [[77]])))  # no such broker
    assert resp.results[0].error_code is ErrorCode.invalid_replica_assignment
    assert node.topic("two").num_partitions == 2


def test_not_controller(node: TestNode) -> None:
    create(node, "t")
    node.quorum.is_leader = False
    resp = call(node, 3, request(3, topic(3, "t", 2)))
    assert resp.results[0].error_code is ErrorCode.not_controller
