"""TopicService: every RPC, its results against the metadata image, and its error statuses."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc

from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of
from tests.unit.handlers.datapath import produce_ok, records

S = grpc.StatusCode
T = pb.topics


def test_create_topic_then_list_and_describe(node: AdminTestNode) -> None:
    async def body(a: Admin) -> Any:
        created = await a.topics.CreateTopic(T.CreateTopicRequest(
            name="orders", num_partitions=3, replication_factor=1,
            configs={"retention.ms": "60000"}))
        listed = await a.topics.ListTopics(T.ListTopicsRequest())
        described = await a.topics.DescribeTopics(T.DescribeTopicsRequest(names=["orders"]))
        return created, listed, described

    created, listed, described = serve(node, body)
    t = node.topic("orders")
    assert created.topic.name == "orders" and created.topic.topic_id == t.topic_id.bytes
    assert (created.num_partitions, created.replication_factor) == (3, 1)
    assert dict(created.configs) == {"retention.ms": "60000"}
    assert [(s.topic.name, s.num_partitions, s.replication_factor) for s in listed.topics] == [
        ("orders", 3, 1)]
    [d] = described.topics
    assert dict(d.configs) == {"retention.ms": "60000"}
    assert [p.partition.partition_id for p in d.partitions] == [0, 1, 2]
    for p in d.partitions:
        reg = t.partitions[p.partition.partition_id]
        assert p.partition.topic_id == t.topic_id.bytes
        assert (p.partition.leader, p.partition.leader_epoch, list(p.partition.isr),
                list(p.partition.replicas)) == (reg.leader, reg.leader_epoch, list(reg.isr),
                                                list(reg.replicas))
        assert list(p.offline_replicas) == []
        assert p.HasField("high_watermark") and p.high_watermark == 0


def test_create_validate_only_creates_nothing(node: AdminTestNode) -> None:
    async def body(a: Admin) -> Any:
        return await a.topics.CreateTopic(T.CreateTopicRequest(
            name="dry", num_partitions=2, validate_only=True))

    resp = serve(node, body)
    assert resp.validate_only and resp.num_partitions == 2
    assert node.metadata.topic("dry") is None


def test_create_with_manual_assignment(node: AdminTestNode) -> None:
    asyncio.run(node.register(2))

    async def body(a: Admin) -> Any:
        return await a.topics.CreateTopic(T.CreateTopicRequest(name="m", assignments=[
            T.ReplicaAssignment(partition=0, replicas=[2, 1]),
            T.ReplicaAssignment(partition=1, replicas=[1, 2])]))

    resp = serve(node, body)
    assert (resp.num_partitions, resp.replication_factor) == (2, 2)
    t = node.topic("m")
    assert t.partitions[0].replicas == (2, 1) and t.partitions[0].leader == 2


def test_create_errors(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("exists"))

    async def body(a: Admin) -> list[tuple[Any, str]]:
        req = T.CreateTopicRequest
        return [
            await status_of(a.topics.CreateTopic(req(name="exists"))),
            await status_of(a.topics.CreateTopic(req(name=""))),
            await status_of(a.topics.CreateTopic(req(name="bad/name"))),
            await status_of(a.topics.CreateTopic(req(name="x", replication_factor=3))),
            await status_of(a.topics.CreateTopic(req(name="x", num_partitions=-2))),
            await status_of(a.topics.CreateTopic(req(name="x", configs={"retention.ms": "no"}))),
            await status_of(a.topics.CreateTopic(req(name="x", assignments=[
                T.ReplicaAssignment(partition=0, replicas=[9])]))),
            await status_of(a.topics.CreateTopic(req(name="x", assignments=[
                T.ReplicaAssignment(partition=0, replicas=[1]),
                T.ReplicaAssignment(partition=0, replicas=[1])]))),
        ]

    results = serve(node, body)
    codes = [c for c, _ in results]
    assert codes == [S.ALREADY_EXISTS] + [S.INVALID_ARGUMENT] * 7
    assert "TOPIC_ALREADY_EXISTS" in results[0][1]
    assert "replication factor" in results[3][1].lower()
    assert "retention.ms" in results[5][1]
    assert node.metadata.topic("x") is None


def test_delete_topic_by_name_and_by_id(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("a"))
    asyncio.run(node.create_topic("b"))
    b_id = node.topic("b").topic_id

    async def body(a: Admin) -> Any:
        r1 = await a.topics.DeleteTopic(T.DeleteTopicRequest(name="a"))
        r2 = await a.topics.DeleteTopic(T.DeleteTopicRequest(topic_id=b_id.bytes))
        return r1, r2

    r1, r2 = serve(node, body)
    assert r1.topic.name == "a" and r2.topic.name == "b"
    assert r2.topic.topic_id == b_id.bytes
    assert node.metadata.topic("a") is None and node.metadata.topic("b") is None


def test_delete_errors(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("keep"))

    async def body(a: Admin) -> list[tuple[Any, str]]:
        req = T.DeleteTopicRequest
        return [
            await status_of(a.topics.DeleteTopic(req(name="nope"))),
            await status_of(a.topics.DeleteTopic(req(topic_id=uuid.uuid4().bytes))),
            await status_of(a.topics.DeleteTopic(req())),
            await status_of(a.topics.DeleteTopic(req(name="keep", topic_id=b"x" * 16))),
            await status_of(a.topics.DeleteTopic(req(topic_id=b"short"))),
        ]

    codes = [c for c, _ in serve(node, body)]
    assert codes == [S.NOT_FOUND, S.NOT_FOUND, S.INVALID_ARGUMENT, S.INVALID_ARGUMENT,
                     S.INVALID_ARGUMENT]
    assert node.metadata.topic("keep") is not None


def test_list_hides_internal_topics_unless_asked(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("__consumer_offsets"))
    asyncio.run(node.create_topic("user"))

    async def body(a: Admin) -> Any:
        return (await a.topics.ListTopics(T.ListTopicsRequest()),
                await a.topics.ListTopics(T.ListTopicsRequest(include_internal=True)),
                await a.topics.DescribeTopics(T.DescribeTopicsRequest()))

    plain, everything, described = serve(node, body)
    assert [t.topic.name for t in plain.topics] == ["user"]
    assert [(t.topic.name, t.internal) for t in everything.topics] == [
        ("__consumer_offsets", True), ("user", False)]
    assert [t.topic.name for t in described.topics] == ["user"]


def test_describe_shows_offline_replicas_isr_and_elr_after_fencing(node: AdminTestNode) -> None:
    async def setup() -> None:
        await node.register(2)
        await node.register(3)
        await node.create_topic("r", assignments={0: [2, 1, 3]}, **{"min.insync.replicas": "3"})
        await node.fence(2)

    asyncio.run(setup())

    async def body(a: Admin) -> Any:
        return await a.topics.DescribeTopics(T.DescribeTopicsRequest(names=["r"]))

    [t] = serve(node, body).topics
    [p] = t.partitions
    reg = node.topic("r").partitions[0]
    assert list(p.offline_replicas) == [2]
    assert 2 not in p.partition.isr and p.partition.leader in (1, 3)
    assert p.partition.leader_epoch == reg.leader_epoch > 0
    # ISR fell below min.insync.replicas=3: the fenced replica is kept eligible (KIP-966)
    assert list(p.partition.elr) == list(reg.elr) == [2]
    assert list(p.partition.isr) == list(reg.isr)


def test_describe_reports_offsets_of_partitions_this_node_leads(node: AdminTestNode) -> None:
    async def setup() -> None:
        await node.register(2)
        await node.create_topic("o", assignments={0: [1], 1: [2]})
        await produce_ok(node, "o", records(b"a", b"b", b"c"))

    asyncio.run(setup())

    async def body(a: Admin) -> Any:
        return await a.topics.DescribeTopics(T.DescribeTopicsRequest(names=["o"]))

    [t] = serve(node, body).topics
    mine, theirs = t.partitions
    assert (mine.log_start_offset, mine.high_watermark, mine.log_end_offset) == (0, 3, 3)
    assert not theirs.HasField("high_watermark") and not theirs.HasField("log_end_offset")


def test_describe_unknown_topic_is_not_found(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("here"))

    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.topics.DescribeTopics(
            T.DescribeTopicsRequest(names=["here", "gone"])))

    code, details = serve(node, body)
    assert code is S.NOT_FOUND and "'gone'" in details


def test_create_partitions(node: AdminTestNode) -> None:
    asyncio.run(node.register(2))
    asyncio.run(node.create_topic("grow", partitions=1))

    async def body(a: Admin) -> Any:
        dry = await a.topics.CreatePartitions(T.CreatePartitionsRequest(
            topic="grow", total_count=5, validate_only=True))
        assert len(dry.topic.partitions) == 1
        r1 = await a.topics.CreatePartitions(T.CreatePartitionsRequest(topic="grow",
                                                                      total_count=2))
        r2 = await a.topics.CreatePartitions(T.CreatePartitionsRequest(
            topic="grow", total_count=3,
            assignments=[T.ReplicaAssignment(partition=2, replicas=[2])]))
        return r1, r2

    r1, r2 = serve(node, body)
    assert len(r1.topic.partitions) == 2 and len(r2.topic.partitions) == 3
    assert node.topic("grow").partitions[2].replicas == (2,)


def test_create_partitions_errors(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("g", partitions=2))

    async def body(a: Admin) -> list[Any]:
        req = T.CreatePartitionsRequest
        return [
            await status_of(a.topics.CreatePartitions(req(topic="nope", total_count=3))),
            await status_of(a.topics.CreatePartitions(req(topic="g", total_count=2))),
            await status_of(a.topics.CreatePartitions(req(topic="g", total_count=1))),
            await status_of(a.topics.CreatePartitions(req(topic="g", total_count=4, assignments=[
                T.ReplicaAssignment(partition=3, replicas=[1])]))),
            await status_of(a.topics.CreatePartitions(req(topic="g", total_count=3, assignments=[
                T.ReplicaAssignment(partition=2, replicas=[7])]))),
            await status_of(a.topics.CreatePartitions(req(topic="", total_count=3))),
        ]

    results = serve(node, body)
    assert [c for c, _ in results] == [S.NOT_FOUND] + [S.INVALID_ARGUMENT] * 5
    assert "cannot be removed" in results[2][1]
    assert node.topic("g").num_partitions == 2


def test_writes_on_a_node_that_is_not_the_controller_are_unavailable(
        node: AdminTestNode) -> None:
    node.quorum.is_leader = False

    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.topics.CreateTopic(T.CreateTopicRequest(name="t")))

    code, details = serve(node, body)
    assert code is S.UNAVAILABLE and "active controller" in details
