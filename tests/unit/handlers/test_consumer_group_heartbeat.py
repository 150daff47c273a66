"""ConsumerGroupHeartbeat (KIP-848) through the handler and the shell, v0 and v1."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    node_fixture,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode

from broker.group.records import OFFSETS_TOPIC
from broker.handlers import consumer_group_heartbeat

pytestmark = pytest.mark.anyio


async def heartbeat(node: GroupNode, version: int, member_id: str, epoch: int,
                    topics: tuple[str, ...] | None = ("t",), owned: object = None) -> object:
    req = request("consumer_group_heartbeat", version, "ConsumerGroupHeartbeatRequest",
                  group_id="g", member_id=member_id, member_epoch=epoch, instance_id=None,
                  rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                  subscribed_topic_names=topics, subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=owned)
    return encodes(await consumer_group_heartbeat.handle(node, ctx(68, version), req))


@pytest.mark.parametrize("version", [0, 1])
async def test_join_assign_then_second_member_after_revocation(node: GroupNode,
                                                               version: int) -> None:
    node.add_topic("t", 4)
    await ready(node)
    tid = node.metadata.topic("t").topic_id  # type: ignore[union-attr]
    a = await heartbeat(node, version, "" if version == 0 else "member-a", 0, owned=())
    assert a.error_code is ErrorCode.none and a.member_epoch == 1
    assert a.heartbeat_interval == datetime.timedelta(seconds=5)
    assert [(tp.topic_id, tp.partitions) for tp in a.assignment.topic_partitions] == [
        (tid, (0, 1, 2, 3))]
    b = await heartbeat(node, version, "" if version == 0 else "member-b", 0, owned=())
    assert b.member_epoch == 2 and b.assignment.topic_partitions == ()
    tp_cls = request_class("consumer_group_heartbeat", version, "TopicPartitions")
    owned_all = (tp_cls(topic_id=tid, partitions=(0, 1, 2, 3)),)
    a2 = await heartbeat(node, version, a.member_id, 1, topics=None, owned=owned_all)
    kept = a2.assignment.topic_partitions[0].partitions
    assert a2.member_epoch == 1 and len(kept) == 2
    a3 = await heartbeat(node, version, a.member_id, 1, topics=None,
                         owned=(tp_cls(topic_id=tid, partitions=kept),))
    assert a3.member_epoch == 2
    b2 = await heartbeat(node, version, b.member_id, 2, topics=None, owned=())
    assert sorted(b2.assignment.topic_partitions[0].partitions) == sorted(
        set(range(4)) - set(kept))


async def test_kafkas_default_interval_holds_the_second_member_back(tmp_path: Path) -> None:
    """group.consumer.assignment.interval.ms 1000 (Kafka 4.4's default): the first target at
    once, the next one by a heartbeat at least a second after it."""
    node = GroupNode(tmp_path, **{"group.consumer.assignment.interval.ms": 1000})
    await node.start()
    try:
        node.add_topic("t", 4)
        await ready(node)
        tid = node.metadata.topic("t").topic_id  # type: ignore[union-attr]
        tp_cls = request_class("consumer_group_heartbeat", 1, "TopicPartitions")
        owned_all = (tp_cls(topic_id=tid, partitions=(0, 1, 2, 3)),)
        a = await heartbeat(node, 1, "member-a", 0, owned=())
        assert a.member_epoch == 1 and a.assignment.topic_partitions[0].partitions == (0, 1, 2, 3)
        b = await heartbeat(node, 1, "member-b", 0, owned=())
        assert b.member_epoch == 1 and b.assignment.topic_partitions == ()
        a = await heartbeat(node, 1, "member-a", 1, topics=None, owned=owned_all)
        assert a.member_epoch == 1 and a.assignment.topic_partitions[0].partitions == (
            0, 1, 2, 3)
        await asyncio.sleep(1.05)
        a = await heartbeat(node, 1, "member-a", 1, topics=None, owned=owned_all)
        assert a.member_epoch == 1 and len(a.assignment.topic_partitions[0].partitions) == 2
    finally:
        await node.stop()


async def test_errors(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    r = await heartbeat(node, 1, "x", 3, topics=None)
    assert r.error_code is ErrorCode.unknown_member_id
    r = await heartbeat(node, 1, "", 0, topics=None)
    assert r.error_code is ErrorCode.invalid_request and r.error_message
    node.add_topic(OFFSETS_TOPIC, 4, leader=5, epoch=3)
    r = await heartbeat(node, 1, "", 0)
    assert r.error_code is ErrorCode.not_coordinator


async def test_group_version_0_refuses_the_consumer_protocol(node: GroupNode) -> None:
    """As Kafka 4.x: ConsumerGroupHeartbeat and ConsumerGroupDescribe need group.version 1."""
    from dataclasses import replace

    from broker.handlers import consumer_group_describe

    node.add_topic("t", 1)
    await ready(node)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, features={
        k: v for k, v in image.features.items() if k != "group.version"}))
    r = await heartbeat(node, 1, "member-a", 0, owned=())
    assert r.error_code is ErrorCode.unsupported_version
    assert "group.version" in r.error_message
    req = request("consumer_group_describe", 0, "ConsumerGroupDescribeRequest",
                  group_ids=("g",), include_authorized_operations=False)
    d = encodes(await consumer_group_describe.handle(node, ctx(69, 0), req))
    assert [g.error_code for g in d.groups] == [ErrorCode.unsupported_version]
    # upgraded: the same member joins
    node.publisher.load_snapshot(replace(node.publisher.image,
                                         offset=node.publisher.image.offset + 1,
                                         features=image.features))
    r = await heartbeat(node, 1, "member-a", 0, owned=())
    assert r.error_code is ErrorCode.none and r.member_epoch == 1
