"""OffsetFetch: listed partitions, all partitions (v2+), batched groups (v8+), error shapes."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    commit,
    fetch,
    fetched,
    node_fixture,
    ready,
    topic_id_of,
)
from kio.schema.errors import ErrorCode

from broker.group.records import OFFSETS_TOPIC

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
async def test_listed_partitions(node: GroupNode, version: int) -> None:
    node.add_topic("t", 2)
    await ready(node)
    await commit(node, "g", {("t", 0): 9}, metadata="md")
    resp = await fetch(node, "g", [("t", 0), ("t", 1)], version=version)
    topics = resp.groups[0].topics if version >= 8 else resp.topics
    if version >= 10:
        assert [t.topic_id for t in topics] == [node.metadata.topic("t").topic_id]
    assert fetched(topics, node) == {("t", 0): 9, ("t", 1): -1}
    p0 = next(p for t in topics for p in t.partitions if p.partition_index == 0)
    assert p0.metadata == "md"
    if version >= 5:
        assert p0.committed_leader_epoch == 3


@pytest.mark.parametrize("version", [2, 7, 8, 10])
async def test_all_partitions(node: GroupNode, version: int) -> None:
    node.add_topic("a", 1)
    node.add_topic("b", 2)
    await ready(node)
    await commit(node, "g", {("a", 0): 1, ("b", 1): 2})
    resp = await fetch(node, "g", None, version=version)
    topics = resp.groups[0].topics if version >= 8 else resp.topics
    assert fetched(topics, node) == {("a", 0): 1, ("b", 1): 2}


async def test_v10_unknown_ids_and_topics_gone(node: GroupNode) -> None:
    node.add_topic("a", 1)
    node.add_topic("b", 1)
    await ready(node)
    await commit(node, "g", {("a", 0): 1, ("b", 0): 2})
    node.remove_topic("b")
    stray = str(topic_id_of(node, "nope"))
    resp = await fetch(node, "g", [("a", 0), ("nope", 3)], version=10)
    topics = resp.groups[0].topics
    assert fetched(topics, node) == {("a", 0): 1, (stray, 3): -1}
    errors = {p.partition_index: p.error_code for t in topics for p in t.partitions}
    assert errors == {0: ErrorCode.none, 3: ErrorCode.unknown_topic_id}
    # All topics: "b" has no id any more, so it cannot be named in a v10 answer.
    every = await fetch(node, "g", None, version=10)
    assert fetched(every.groups[0].topics, node) == {("a", 0): 1}


async def test_unknown_group_returns_no_offsets(node: GroupNode) -> None:
    await ready(node)
    resp = await fetch(node, "never", [("t", 0)], version=7)
    assert resp.error_code is ErrorCode.none and fetched(resp.topics) == {("t", 0): -1}
    resp = await fetch(node, "never", None, version=7)
    assert resp.topics == ()


async def test_not_coordinator_error_shapes(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4, leader=7)
    v1 = await fetch(node, "g", [("t", 0)], version=1)
    assert [p.error_code for t in v1.topics for p in t.partitions] == [
        ErrorCode.not_coordinator]
    v7 = await fetch(node, "g", [("t", 0)], version=7)
    assert v7.error_code is ErrorCode.not_coordinator and v7.topics == ()
    v8 = await fetch(node, "g", [("t", 0)], version=8)
    assert v8.groups[0].error_code is ErrorCode.not_coordinator
