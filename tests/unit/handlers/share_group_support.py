"""A share group with a member that took and acknowledged records, for the share group
offsets handler tests: topic "t" (two partitions, five records each), group "g" with member
"m1" which ACCEPTs offsets 0-2 of partition 0 and leaves, unless told to stay."""

from __future__ import annotations

import uuid
from dataclasses import replace

from group_node import GroupNode, ctx, encodes, ready, request
from test_share_fetch import acknowledge, enable_share_groups, fetch, heartbeat

from broker.handlers import share_group_heartbeat
from broker.metadata.records import RESOURCE_GROUP
from broker.protocol.records import Record, build_batch

ACCEPT = 1


async def _produce(node: GroupNode, partition: int, n: int) -> None:
    batch = build_batch([Record(offset=i, timestamp=0, key=None, value=b"v%d" % i, headers=())
                         for i in range(n)])
    out = await node.replicas.append({("t", partition): batch}, required_acks=-1,
                                     timeout_ms=2000)
    assert not isinstance(out[("t", partition)], Exception), out


async def group_with_offsets(node: GroupNode, *, stay: bool = False) -> uuid.UUID:
    """The group, its share-partition 0 at SPSO 3 (0-2 ACCEPTed); the topic's id."""
    enable_share_groups(node)
    node.add_topic("t", 2)
    tid: uuid.UUID = node.metadata.topic("t").topic_id
    await ready(node)
    await _produce(node, 0, 5)
    await _produce(node, 1, 5)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs, (RESOURCE_GROUP, "g"): {"share.auto.offset.reset": "earliest"}}))
    assert (await heartbeat(node, "m1", 0)).member_epoch == 1
    got = await fetch(node, tid, 0, wait_ms=2000)
    assert got.error_code.value == 0
    ack = await acknowledge(node, tid, 1, ((0, 2, (ACCEPT,)),))
    assert ack.responses[0].partitions[0].error_code.value == 0
    if not stay:
        assert (await acknowledge(node, tid, -1, ())).error_code.value == 0
        req = request("share_group_heartbeat", 1, "ShareGroupHeartbeatRequest", group_id="g",
                      member_id="m1", member_epoch=-1, rack_id=None,
                      subscribed_topic_names=None)
        left = encodes(await share_group_heartbeat.handle(node, ctx(76, 1), req))
        assert left.error_code.value == 0
    return tid

