"""DescribeTopicPartitions v0 (KIP-966) against a real controller, publisher and image:
sorting, unknown and illegal names, pagination with the cursor, the partition limit, ELR."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.describe_topic_partitions.v0 import request as m
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.errors import KafkaError
from broker.handlers import describe_topic_partitions as dtp
from broker.handlers.metadata import TOPIC_OPERATIONS
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip


def request(names: list[str], limit: int = 2000,
            cursor: tuple[str, int] | None = None) -> Any:
    return m.DescribeTopicPartitionsRequest(
        topics=tuple(m.TopicRequest(name=n) for n in names), response_partition_limit=limit,
        cursor=None if cursor is None else m.Cursor(topic_name=cursor[0],
                                                    partition_index=cursor[1]))


def call(node: TestNode, req: Any) -> Any:
    resp = asyncio.run(dtp.handle(node, make_ctx(dtp.API_KEY, 0), req))
    assert roundtrip(resp) == resp
    return resp


def create(node: TestNode, *topics: CreatableTopic) -> None:
    results = asyncio.run(node.controller.create_topics(list(topics)))
    assert all(r.error is ErrorCode.none for r in results), results


def pages(node: TestNode, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page until next_cursor is null: (topic, partition) per page."""
    out: list[list[tuple[str, int]]] = []
    cursor = None
    for _ in range(50):
        resp = call(node, request(names, limit, cursor))
        out.append([(t.name, p.partition_index) for t in resp.topics for p in t.partitions])
        if resp.next_cursor is None:
            return out
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    raise AssertionError("no last page")


def test_named_topics_sorted_with_errors_for_unknown_and_illegal(node: TestNode) -> None:
    create(node, CreatableTopic("beta", 2, 1), CreatableTopic("alpha", 1, 1))
    resp = call(node, request(["beta", "nope", "alpha", "bad/name"]))
    assert [t.name for t in resp.topics] == ["alpha", "bad/name", "beta", "nope"]
    by = {t.name: t for t in resp.topics}
    assert by["nope"].error_code is ErrorCode.unknown_topic_or_partition
    assert by["nope"].topic_id is None and by["nope"].partitions == ()
    assert by["bad/name"].error_code is ErrorCode.invalid_topic_exception
    beta = by["beta"]
    assert beta.error_code is ErrorCode.none
    assert beta.topic_id == node.topic("beta").topic_id
    assert beta.topic_authorized_operations == TOPIC_OPERATIONS
    assert [p.partition_index for p in beta.partitions] == [0, 1]
    p = beta.partitions[0]
    assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (
        ErrorCode.none, NODE_ID, (NODE_ID,), (NODE_ID,))
    # Every replica in the ISR: no eligible leader replicas, written as empty, not null.
    assert p.eligible_leader_replicas == () and p.last_known_elr == ()
    assert p.offline_replicas == ()
    assert resp.next_cursor is None


def test_all_topics_when_none_named(node: TestNode) -> None:
    create(node, CreatableTopic("b", 1, 1), CreatableTopic("a", 1, 1))
    resp = call(node, request([]))
    assert [t.name for t in resp.topics] == ["a", "b"]


@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7, 100])
def test_pages_cover_every_partition_once(node: TestNode, named: bool, limit: int) -> None:
    create(node, CreatableTopic("a", 3, 1), CreatableTopic("b", 1, 1),
           CreatableTopic("c", 4, 1))
    expected = [("a", i) for i in range(3)] + [("b", 0)] + [("c", i) for i in range(4)]
    got = pages(node, ["c", "a", "b"] if named else [], limit)
    assert [tp for page in got for tp in page] == expected
    assert all(len(page) <= limit for page in got)
    assert len(got) == -(-len(expected) // limit)


def test_a_full_page_ending_a_topic_points_at_the_next_topic(node: TestNode) -> None:
    create(node, CreatableTopic("a", 2, 1), CreatableTopic("b", 1, 1))
    resp = call(node, request([], limit=2))
    assert resp.next_cursor is not None
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("b", 0)
    resp = call(node, request([], limit=1))
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("a", 1)


def test_broker_limit_caps_the_request_limit(node_factory: Any) -> None:
    node = node_factory({"max.request.partition.size.limit": "2"})
    create(node, CreatableTopic("a", 5, 1))
    resp = call(node, request(["a"], limit=1000))
    assert len(resp.topics[0].partitions) == 2
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("a", 2)
    # A limit of 0 still answers one partition (Kafka: at least 1).
    assert len(call(node, request(["a"], limit=0)).topics[0].partitions) == 1


def test_bad_cursors_are_invalid_requests(node: TestNode) -> None:
    create(node, CreatableTopic("a", 1, 1), CreatableTopic("b", 1, 1))
    with pytest.raises(KafkaError) as e:
        call(node, request(["a"], cursor=("b", 0)))
    assert e.value.error_code is ErrorCode.invalid_request
    with pytest.raises(KafkaError):
        call(node, request(["a"], cursor=("a", -1)))
    req = request(["a", "b"], cursor=("z", 0))
    with pytest.raises(KafkaError):
        call(node, req)
    resp = dtp.error_response(make_ctx(dtp.API_KEY, 0), req, ErrorCode.invalid_request)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("a", ErrorCode.invalid_request), ("b", ErrorCode.invalid_request)]
