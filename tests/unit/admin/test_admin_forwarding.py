"""Writes on a node that is not the active controller go to the controller's admin listener."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc

from broker.admin import AdminServer
from tests.unit.admin.harness import Admin, AdminTestNode, pb, status_of

S = grpc.StatusCode
T, C = pb.topics, pb.configs


async def _pair(tmp: Path, body: Any, controller_of_a: int = 2) -> Any:
    """Node A (id 1, not the controller) and node B (the controller, registered in A's
    metadata as broker 2 with an ADMIN endpoint at B's admin server)."""
    b = AdminTestNode(tmp / "b")
    a = AdminTestNode(tmp / "a")
    await b.register(1)
    b.ready.set()
    server_b = AdminServer(b, ["127.0.0.1:0"], grace_s=0)
    await server_b.start()
    server_a = AdminServer(a, ["127.0.0.1:0"], grace_s=0)
    try:
        await a.register(1)
        await a.register(2, listeners=("PLAINTEXT", "ADMIN"), port=server_b.ports[0])
        for n in (a, b):
            await n.create_topic("shared")
        a.quorum.is_leader = False
        a.quorum.driver = SimpleNamespace(leader_and_epoch=(controller_of_a, 1))
        a.ready.set()
        await server_a.start()
        async with grpc.aio.insecure_channel(server_a.addresses[0]) as ch:
            return await asyncio.wait_for(body(Admin(ch, server_a), a, b), 30)
    finally:
        await server_a.stop()
        await server_b.stop()
        a.close()
        b.close()


def test_writes_are_forwarded_and_answers_relayed(tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        resp = await adm.topics.CreateTopic(T.CreateTopicRequest(name="fwd", num_partitions=2))
        assert resp.topic.topic_id == b.topic("fwd").topic_id.bytes
        assert a.metadata.topic("fwd") is None  # A's image is not B's in this test
        code, details = await status_of(adm.topics.CreateTopic(T.CreateTopicRequest(
            name="fwd")))
        assert code is S.ALREADY_EXISTS and "already exists" in details
        await adm.configs.AlterConfigs(C.AlterConfigsRequest(changes=[pb.meta.Config(
            resource_type=2, resource_name="shared", name="retention.ms", value="1234")]))
        assert dict(b.metadata.topic_config("shared")) == {"retention.ms": "1234"}
        assert dict(a.metadata.topic_config("shared")) == {}
        elected = await adm.partitions.ElectLeaders(pb.partitions.ElectLeadersRequest(
            partitions=[pb.partitions.TopicPartition(topic="shared", partition=0)]))
        assert elected.results[0].outcome == pb.partitions.ELECTION_OUTCOME_NOT_NEEDED
        cluster = await adm.cluster.DescribeCluster(pb.cluster.DescribeClusterRequest())
        assert cluster.controller_id == 2
        assert [b.is_controller for b in cluster.brokers] == [False, True]

    asyncio.run(_pair(tmp_path, body))


def test_forwarding_is_one_hop_only(tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        b.quorum.is_leader = False  # B lost leadership too: it must not forward again
        code, details = await status_of(adm.topics.CreateTopic(T.CreateTopicRequest(
            name="x")))
        assert code is S.UNAVAILABLE and "active controller" in details
        assert b.metadata.topic("x") is None

    asyncio.run(_pair(tmp_path, body))


def test_unknown_controller_address_is_unavailable_naming_the_controller(
        tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        code, details = await status_of(adm.topics.DeleteTopic(T.DeleteTopicRequest(
            name="shared")))
        assert code is S.UNAVAILABLE
        assert "node 3 is, and its admin address is unknown" in details
        assert b.metadata.topic("shared") is not None

    asyncio.run(_pair(tmp_path, body, controller_of_a=3))


def test_quorum_describe_on_a_follower_is_answered_by_the_leader(tmp_path: Path) -> None:
    from kio.schema.errors import ErrorCode

    from broker.admin.quorum import QuorumInfo, ReplicaInfo
    from broker.errors import KafkaError

    async def leader_view() -> QuorumInfo:
        return QuorumInfo(2, 9, 77, (ReplicaInfo(2, 77, 5, 5), ReplicaInfo(1, 70, 4, -1)))

    async def follower_view() -> QuorumInfo:
        raise KafkaError(ErrorCode.not_leader_or_follower, "node 1 is not the leader")

    async def body(a: AdminTestNode, b: AdminTestNode) -> None:
        server_b = AdminServer(b, ["127.0.0.1:0"], describe_quorum=leader_view, grace_s=0)
        await server_b.start()
        server_a = AdminServer(a, ["127.0.0.1:0"], describe_quorum=follower_view, grace_s=0,
                               admin_address_of=lambda cid: server_b.addresses[0]
                               if cid == 2 else None)
        await server_a.start()
        try:
            async with grpc.aio.insecure_channel(server_a.addresses[0]) as ch:
                adm = Admin(ch, server_a)
                resp = await adm.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest())
                assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (2, 9, 77)
                assert resp.cluster_id == b.cluster_id
                assert [v.replica_id for v in resp.voters] == [1, 2]  # by id
        finally:
            await server_a.stop()
            await server_b.stop()

    async def main() -> None:
        a, b = AdminTestNode(tmp_path / "a"), AdminTestNode(tmp_path / "b")
        try:
            await a.register(1)
            await b.register(1)
            a.ready.set()
            b.ready.set()
            a.quorum.is_leader = False
            a.quorum.driver = SimpleNamespace(leader_and_epoch=(2, 9))
            await body(a, b)
        finally:
            a.close()
            b.close()

    asyncio.run(main())
