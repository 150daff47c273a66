"""Calls answered by another broker: a group's coordinator, a partition's leader.

Node A (id 1) has no group coordinator (like a controller-only node) and hosts no replica;
its metadata places __consumer_offsets and the topic `shared` on broker 2, registered with
an ADMIN endpoint at node B's admin server. Node B coordinates the groups and leads
`shared` itself. What A answers must be B's answer, checked against B's own state.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from broker.admin import AdminServer
from broker.group.records import OFFSETS_TOPIC
from tests.unit.admin.harness import Admin, AdminTestNode, pb, status_of
from tests.unit.admin.test_admin_groups import committed, produce
from tests.unit.handlers.conftest import NODE_ID
from tests.unit.handlers.group_node import commit, commit_errors

S = grpc.StatusCode
G, P = pb.groups, pb.partitions
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"}


async def _pair(tmp: Path, body: Any, coordinator: int = 2) -> Any:
    from broker.group.shell import GroupCoordinatorService

    b = AdminTestNode(tmp / "b", OVERRIDES)
    a = AdminTestNode(tmp / "a", OVERRIDES)
    await b.register(NODE_ID)
    b.ready.set()
    svc = GroupCoordinatorService(b, tick_interval_s=0.02)
    b.group_coordinator = svc  # type: ignore[attr-defined]
    svc.start()
    server_b = AdminServer(b, ["127.0.0.1:0"], grace_s=0)
    await server_b.start()
    server_a = AdminServer(a, ["127.0.0.1:0"], grace_s=0)
    try:
        assert (await svc.ensure_offsets_topic()).name == "none"
        for _ in range(500):
            if len(svc.coordinators) == svc.partition_count():
                break
            await asyncio.sleep(0.01)
        await b.create_topic("shared", partitions=2)
        await produce(b, "shared", 0, 7)
        await produce(b, "shared", 1, 3)
        await a.register(NODE_ID)
        await a.register(2, listeners=("PLAINTEXT", "ADMIN"), port=server_b.ports[0])
        if coordinator not in (2, NODE_ID):
            await a.register(coordinator)  # no ADMIN endpoint
        await a.create_topic(OFFSETS_TOPIC, assignments={0: [coordinator], 1: [coordinator]})
        await a.create_topic("shared", assignments={0: [2], 1: [2]})
        a.ready.set()
        await server_a.start()
        async with grpc.aio.insecure_channel(server_a.addresses[0]) as ch:
            return await asyncio.wait_for(body(Admin(ch, server_a), a, b), 30)
    finally:
        await server_a.stop()
        await server_b.stop()
        await svc.stop()
        a.close()
        b.close()


def test_group_rpcs_go_to_the_coordinator_and_list_merges(tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        assert getattr(a, "group_coordinator", None) is None
        errs = commit_errors(await commit(b, "g", {("shared", 0): 5,  # type: ignore[arg-type]
                                                   ("shared", 1): 1}))
        assert errs == {("shared", 0): 0, ("shared", 1): 0}
        listed = await adm.groups.ListGroups(G.ListGroupsRequest())
        assert [g.group_id for g in listed.groups] == ["g"]
        desc = await adm.groups.DescribeGroup(G.DescribeGroupRequest(group_id="g"))
        assert desc.coordinator_id == b.node_id and desc.state == "Empty"
        assert [(o.partition, o.committed_offset, o.log_end_offset, o.lag)
                for o in desc.offsets] == [(0, 5, 7, 2), (1, 1, 3, 2)]
        reset = await adm.groups.ResetOffsets(G.ResetOffsetsRequest(
            group_id="g", topics=["shared"], strategy=G.RESET_STRATEGY_LATEST))
        assert reset.applied
        assert committed(b, "g") == {("shared", 0): 7, ("shared", 1): 3}
        await adm.groups.DeleteOffsets(G.DeleteOffsetsRequest(
            group_id="g", partitions=[P.TopicPartition(topic="shared", partition=1)]))
        assert committed(b, "g") == {("shared", 0): 7}
        await adm.groups.DeleteGroup(G.DeleteGroupRequest(group_id="g"))
        code, details = await status_of(adm.groups.DescribeGroup(
            G.DescribeGroupRequest(group_id="g")))
        assert code is S.NOT_FOUND and "no group g" in details

    asyncio.run(_pair(tmp_path, body))


def test_coordinator_without_an_admin_address_is_unavailable_naming_it(
        tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        code, details = await status_of(adm.groups.DescribeGroup(
            G.DescribeGroupRequest(group_id="g")))
        assert code is S.UNAVAILABLE and "broker 3" in details and "admin address" in details

    asyncio.run(_pair(tmp_path, body, coordinator=3))


def test_reassignment_progress_comes_from_the_partitions_leader(tmp_path: Path) -> None:
    async def body(adm: Admin, a: AdminTestNode, b: AdminTestNode) -> None:
        assert a.replicas.get("shared", 0) is None  # A hosts no replica of it
        listed = await adm.partitions.ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest(include_completed=True, partitions=[
                P.TopicPartition(topic="shared", partition=0),
                P.TopicPartition(topic="shared", partition=1)]))
        got = {(s.partition, s.leader, s.in_progress, s.leader_log_end_offset,
                tuple((p.replica_id, p.log_end_offset) for p in s.progress))
               for s in listed.reassignments}
        # leader 2 in A's metadata; the offsets are B's (its node id leads its copy)
        assert got == {(0, 2, False, 7, ((NODE_ID, 7),)), (1, 2, False, 3, ((NODE_ID, 3),))}
        # without include_completed only ongoing reassignments are listed
        ongoing = await adm.partitions.ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest())
        assert list(ongoing.reassignments) == []

    asyncio.run(_pair(tmp_path, body))
