"""ConsumerGroupDescribe (KIP-848): epochs, assignor and assignments with topic names."""

from __future__ import annotations

import datetime

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    commit,
    ctx,
    encodes,
    node_fixture,
    ready,
    request,
)
from kio.schema.errors import ErrorCode

from broker.handlers import consumer_group_describe, consumer_group_heartbeat

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("version", [0, 1])
async def test_describe(node: GroupNode, version: int) -> None:
    node.add_topic("t", 2)
    await ready(node)
    hb = request("consumer_group_heartbeat", 1, "ConsumerGroupHeartbeatRequest",
                 group_id="g", member_id="m-1", member_epoch=0, instance_id="inst",
                 rack_id="r1", rebalance_timeout=datetime.timedelta(seconds=30),
                 subscribed_topic_names=("t",), subscribed_topic_regex=None,
                 server_assignor="range", topic_partitions=())
    await consumer_group_heartbeat.handle(node, ctx(68, 1, client_id="app"), hb)
    await commit(node, "classic", {("t", 0): 1})
    req = request("consumer_group_describe", version, "ConsumerGroupDescribeRequest",
                  group_ids=("g", "classic", "none"), include_authorized_operations=False)
    resp = encodes(await consumer_group_describe.handle(node, ctx(69, version), req))
    g, classic, none = resp.groups
    assert g.error_code is ErrorCode.none and g.group_state == "Stable"
    assert (g.group_epoch, g.assignment_epoch, g.assignor_name) == (1, 1, "range")
    [m] = g.members
    assert (m.member_id, m.instance_id, m.rack_id, m.client_id, m.member_epoch) == (
        "m-1", "inst", "r1", "app", 1)
    assert m.subscribed_topic_names == ("t",)
    assert m.subscribed_topic_regex == ""  # as Kafka 4.4 answers (not null)
    [tp] = m.assignment.topic_partitions
    assert (tp.topic_name, tp.partitions) == ("t", (0, 1))
    assert m.target_assignment == m.assignment
    assert classic.error_code is ErrorCode.group_id_not_found
    assert none.error_code is ErrorCode.group_id_not_found
