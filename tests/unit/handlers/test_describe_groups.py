"""DescribeGroups v0-v6: members with metadata and assignment once Stable; Dead for unknown
groups (v6: GROUP_ID_NOT_FOUND with Kafka's messages)."""

from __future__ import annotations

import datetime

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    join_fully,
    node_fixture,
    ready,
    request,
    sync,
)
from kio.schema.errors import ErrorCode

from broker.group.records import OFFSETS_TOPIC
from broker.handlers import consumer_group_heartbeat, describe_groups

pytestmark = pytest.mark.anyio


async def describe(node: GroupNode, version: int, *groups: str, ops: bool = False) -> object:
    req = request("describe_groups", version, "DescribeGroupsRequest", groups=groups,
                  include_authorized_operations=ops)
    return encodes(await describe_groups.handle(node, ctx(15, version), req))


@pytest.mark.parametrize("version", [0, 3, 4, 5, 6])
async def test_describe(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node, "g", instance="inst" if version >= 4 else None)
    await sync(node, "g", a.member_id, a.generation_id, assignments=((a.member_id, b"asg"),),
               instance="inst" if version >= 4 else None)
    resp = await describe(node, version, "g", "missing", ops=True)
    g, missing = resp.groups
    assert g.error_code is ErrorCode.none and g.group_state == "Stable"
    assert (g.protocol_type, g.protocol_data) == ("consumer", "range")
    [m] = g.members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) \
        == (a.member_id, "client", "/127.0.0.1", b"meta", b"asg")
    if version >= 4:
        assert m.group_instance_id == "inst"
    if version >= 3:
        # READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka 4 group configs)
        assert g.authorized_operations == (1 << 3) | (1 << 8) | (1 << 6) | (1 << 10) | (1 << 11)
    assert missing.group_state == "Dead"
    assert missing.error_code is (ErrorCode.group_id_not_found if version >= 6
                                  else ErrorCode.none)
    if version >= 6:
        assert missing.error_message == "Group missing not found."


async def test_v6_a_consumer_group_is_not_a_classic_group(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    hb = request("consumer_group_heartbeat", 1, "ConsumerGroupHeartbeatRequest",
                 group_id="cg", member_id="m-1", member_epoch=0, instance_id=None,
                 rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                 subscribed_topic_names=("t",), subscribed_topic_regex=None,
                 server_assignor=None, topic_partitions=())
    await consumer_group_heartbeat.handle(node, ctx(68, 1), hb)
    [g] = (await describe(node, 6, "cg")).groups
    assert (g.error_code, g.error_message) == (
        ErrorCode.group_id_not_found, "Group cg is not a classic group.")
    [g5] = (await describe(node, 5, "cg")).groups
    assert (g5.error_code, g5.group_state) == (ErrorCode.none, "Dead")


async def test_not_coordinator(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4, leader=9)
    resp = await describe(node, 5, "g")
    assert resp.groups[0].error_code is ErrorCode.not_coordinator
    assert resp.groups[0].authorized_operations == -(2**31)


async def test_v6_a_share_group_is_not_a_classic_group(node: GroupNode) -> None:
    """Kafka 4.4: ShareGroupDescribe describes a share group; DescribeGroups v6 answers
    GROUP_ID_NOT_FOUND "not a classic group", v5 and older "Dead"."""
    from share_group_support import group_with_offsets

    await group_with_offsets(node, stay=True)
    [g] = (await describe(node, 6, "g")).groups
    assert (g.error_code, g.error_message) == (
        ErrorCode.group_id_not_found, "Group g is not a classic group.")
    [g5] = (await describe(node, 5, "g")).groups
    assert (g5.error_code, g5.group_state) == (ErrorCode.none, "Dead")
