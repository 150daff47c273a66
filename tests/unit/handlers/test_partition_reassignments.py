"""AlterPartitionReassignments v0-1 and ListPartitionReassignments v0 through the real
controller service."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.alter_partition_reassignments.v0 import request as alter_req
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import request as list_req

from broker.controller.requests import CreatableTopic
from broker.handlers import alter_partition_reassignments, list_partition_reassignments
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip

A: Any = alter_req
L: Any = list_req


def alter(node: TestNode, topic: str, partition: int, replicas: list[int] | None) -> Any:
    req = A.AlterPartitionReassignmentsRequest(
        timeout=datetime.timedelta(seconds=5), topics=(A.ReassignableTopic(
            name=topic, partitions=(A.ReassignablePartition(
                partition_index=partition,
                replicas=None if replicas is None else tuple(replicas)),)),))
    resp = asyncio.run(alter_partition_reassignments.handle(node, make_ctx(45, 0), req))
    assert roundtrip(resp) == resp
    return resp


def listing(node: TestNode) -> Any:
    req = L.ListPartitionReassignmentsRequest(timeout=datetime.timedelta(seconds=5),
                                              topics=None)
    resp = asyncio.run(list_partition_reassignments.handle(node, make_ctx(46, 0), req))
    assert roundtrip(resp) == resp
    return resp


def test_reassignment_starts_lists_and_cancels(node: TestNode) -> None:
    asyncio.run(node.register(2))
    asyncio.run(node.register(3))
    [res] = asyncio.run(node.controller.create_topics(
        [CreatableTopic("mv", assignments={0: [NODE_ID, 2]})]))
    assert res.error is ErrorCode.none
    resp = alter(node, "mv", 0, [2, 3])
    assert resp.error_code is ErrorCode.none
    assert [(p.partition_index, p.error_code) for t in resp.responses
            for p in t.partitions] == [(0, ErrorCode.none)]
    # broker 3 has not caught up (nothing replicates here), so the move is in progress
    ongoing = listing(node)
    assert [(t.name, p.partition_index, sorted(p.adding_replicas), sorted(p.removing_replicas))
            for t in ongoing.topics for p in t.partitions] == [("mv", 0, [3], [NODE_ID])]
    cancel = alter(node, "mv", 0, None)
    assert [p.error_code for t in cancel.responses for p in t.partitions] == [ErrorCode.none]
    assert listing(node).topics == ()
    assert sorted(node.topic("mv").partitions[0].replicas) == sorted([NODE_ID, 2])


def test_unknown_partition_and_cancel_without_reassignment(node: TestNode) -> None:
    resp = alter(node, "ghost", 0, [NODE_ID])
    assert [p.error_code for t in resp.responses for p in t.partitions] == [
        ErrorCode.unknown_topic_or_partition]
    [res] = asyncio.run(node.controller.create_topics([CreatableTopic("still", 1, 1)]))
    assert res.error is ErrorCode.none
    resp = alter(node, "still", 0, None)
    assert [p.error_code for t in resp.responses for p in t.partitions] == [
        ErrorCode.no_reassignment_in_progress]


def alter_v1(node: TestNode, items: dict[int, list[int]], allow: bool) -> Any:
    from kio.schema.alter_partition_reassignments.v1 import request as v1

    m: Any = v1
    req = m.AlterPartitionReassignmentsRequest(
        timeout=datetime.timedelta(seconds=5), allow_replication_factor_change=allow,
        topics=(m.ReassignableTopic(name="rf", partitions=tuple(
            m.ReassignablePartition(partition_index=i, replicas=tuple(r))
            for i, r in items.items())),))
    resp = asyncio.run(alter_partition_reassignments.handle(node, make_ctx(45, 1), req))
    assert int(resp.__version__) == 1 and roundtrip(resp) == resp
    assert resp.allow_replication_factor_change is allow
    return {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}


def test_v1_refuses_a_replication_factor_change_unless_allowed(node: TestNode) -> None:
    """KIP-860: with AllowReplicationFactorChange false, a target of another size is refused
    with INVALID_REPLICATION_FACTOR and nothing of it starts; a move that keeps the size goes
    ahead in the same request. With it true (the default) the size may change."""
    asyncio.run(node.register(2))
    asyncio.run(node.register(3))
    [res] = asyncio.run(node.controller.create_topics(
        [CreatableTopic("rf", assignments={0: [NODE_ID, 2], 1: [NODE_ID, 2]})]))
    assert res.error is ErrorCode.none
    assert alter_v1(node, {0: [NODE_ID, 2, 3], 1: [2, 3]}, allow=False) == {
        0: ErrorCode.invalid_replication_factor, 1: ErrorCode.none}
    assert sorted(node.topic("rf").partitions[0].replicas) == sorted([NODE_ID, 2])
    assert sorted(node.topic("rf").partitions[1].adding_replicas) == [3]
    assert alter_v1(node, {0: [NODE_ID, 2, 3]}, allow=True) == {0: ErrorCode.none}
    assert sorted(node.topic("rf").partitions[0].adding_replicas) == [3]
