"""DescribeQuorum sent to a broker's client listener (issue 23: "DescribeQuorum on the broker
listener too"), as `kafka-metadata-quorum.sh --bootstrap-server` sends it: the broker sends
it on to the quorum leader's controller listener and returns its answer. A broker-only node
(the leader is another process) and a combined node (the leader is itself)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(240)


async def _describe(port: int, version: int) -> Any:
    from broker.protocol.transport import KafkaConnection

    m: Any = __import__(f"kio.schema.describe_quorum.v{version}.request", fromlist=["x"])
    conn = KafkaConnection("127.0.0.1", port, "kafka-metadata-quorum")
    try:
        return await conn.request(55, version, m.DescribeQuorumRequest(topics=(m.TopicData(
            topic_name="__cluster_metadata",
            partitions=(m.PartitionData(partition_index=0),)),)), 10.0)
    finally:
        await conn.close()


def check(port: int, leader: int, voters: set[int]) -> None:
    for version in (0, 1, 2):
        resp = asyncio.run(_describe(port, version))
        assert int(resp.error_code) == 0, resp
        [topic] = resp.topics
        [part] = topic.partitions
        assert int(part.error_code) == 0, part
        assert int(part.leader_id) == leader and int(part.leader_epoch) > 0
        assert int(part.high_watermark) > 0
        assert {int(v.replica_id) for v in part.current_voters} == voters


def test_a_broker_sends_it_on_to_the_quorum_leader(tmp_path: Any) -> None:
    with Cluster(tmp_path, controllers=1, brokers=1) as c:
        [controller], [broker] = c.controller_ids, c.broker_ids
        check(c.nodes[broker].client_port, controller, {controller})


def test_a_combined_node_answers_from_its_own_controller(skiff_node: Any) -> None:
    resp = asyncio.run(_describe(skiff_node.port, 2))
    [part] = resp.topics[0].partitions
    assert int(resp.error_code) == 0 and int(part.error_code) == 0
    assert [int(v.replica_id) for v in part.current_voters] == [int(part.leader_id)]
