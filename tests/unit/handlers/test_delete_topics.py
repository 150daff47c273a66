"""DeleteTopics v1-4 through the real controller service."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.handlers import delete_topics
from broker.handlers._build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module

VERSIONS = range(0, 5)


def request(v: int, *names: str) -> Any:
    m = schema_module("delete_topics", v)
    return build(m.DeleteTopicsRequest, topic_names=tuple(names),
                 timeout=datetime.timedelta(seconds=5))


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(delete_topics.handle(node, make_ctx(20, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def create(node: TestNode, *names: str) -> None:
    results = asyncio.run(node.controller.create_topics([CreatableTopic(n, 1, 1) for n in names]))
    assert all(r.error is ErrorCode.none for r in results)


@pytest.mark.parametrize("v", VERSIONS)
def test_delete_is_applied_before_the_answer(node: TestNode, v: int) -> None:
    create(node, "gone", "kept")
    resp = call(node, v, request(v, "gone"))
    assert [(r.name, r.error_code) for r in resp.responses] == [("gone", ErrorCode.none)]
    assert node.metadata.topic("gone") is None
    assert node.metadata.topic("kept") is not None


@pytest.mark.parametrize("v", VERSIONS)
def test_unknown_duplicate_and_mixed(node: TestNode, v: int) -> None:
    create(node, "a", "b")
    resp = call(node, v, request(v, "a", "missing", "b", "b", "bad name"))
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("a", ErrorCode.none),
        ("missing", ErrorCode.unknown_topic_or_partition),
        ("b", ErrorCode.invalid_request),
        ("bad name", ErrorCode.unknown_topic_or_partition),
    ]
    assert node.metadata.topic("a") is None
    assert node.metadata.topic("b") is not None


def test_empty_request(node: TestNode) -> None:
    assert call(node, 4, request(4)).responses == ()


def test_deletion_disabled(node_factory: Any) -> None:
    node = node_factory({"delete.topic.enable": "false"})
    create(node, "stays")
    resp = call(node, 4, request(4, "stays"))
    assert resp.responses[0].error_code is ErrorCode.topic_deletion_disabled
    assert node.metadata.topic("stays") is not None


def test_not_controller(node: TestNode) -> None:
    create(node, "x")
    node.quorum.is_leader = False
    resp = call(node, 3, request(3, "x", "y"))
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("x", ErrorCode.not_controller), ("y", ErrorCode.not_controller)]
    err = delete_topics.error_response(make_ctx(20, 3), request(3, "x", "x"),
                                       ErrorCode.invalid_request)
    assert [(r.name, r.error_code) for r in err.responses] == [("x", ErrorCode.invalid_request)]
    assert roundtrip(err) == err
