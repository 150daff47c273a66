"""DeleteTopics v0-6 (v6: by name or id) through the real controller service."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.handlers import delete_topics
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module

VERSIONS = range(0, 7)


def request(v: int, *names: str, ids: tuple[uuid.UUID | None, ...] = ()) -> Any:
    """v6 names each topic in a DeleteTopicState (`ids` as more states, by id)."""
    m = schema_module("delete_topics", v)
    states = tuple(build(m.DeleteTopicState, name=n, topic_id=None) for n in names) + tuple(
        build(m.DeleteTopicState, name=None, topic_id=i) for i in ids) if v >= 6 else ()
    return build(m.DeleteTopicsRequest, topic_names=tuple(names), topics=states,
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
    if v >= 5:
        assert resp.responses[1].error_message == "This server does not host this topic-partition."


def test_v6_by_id_and_kafkas_checks(node: TestNode) -> None:
    create(node, "x", "y")
    x, y = node.topic("x").topic_id, node.topic("y").topic_id
    stray = uuid.uuid4()
    m = schema_module("delete_topics", 6)
    req = build(m.DeleteTopicsRequest, timeout=datetime.timedelta(seconds=5), topics=(
        m.DeleteTopicState(name=None, topic_id=x),
        m.DeleteTopicState(name=None, topic_id=stray),
        m.DeleteTopicState(name="y", topic_id=y),
        m.DeleteTopicState(name=None, topic_id=None),
    ))
    resp = call(node, 6, req)
    got = [(r.name, r.topic_id, r.error_code, r.error_message) for r in resp.responses]
    assert got == [
        ("y", y, ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
        (None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        ("x", x, ErrorCode.none, None),
        (None, stray, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
    ]
    assert node.metadata.topic("x") is None and node.metadata.topic("y") is not None
    dup = call(node, 6, request(6, ids=(y, y)))
    assert [(r.topic_id, r.error_code) for r in dup.responses] == [(y, ErrorCode.invalid_request)]


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
