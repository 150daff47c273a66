"""PartitionService: reassignments (start, progress, cancel, list) and leader elections."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode
P = pb.partitions


def tp(topic: str, partition: int) -> Any:
    return P.TopicPartition(topic=topic, partition=partition)


def setup_brokers(node: AdminTestNode, *ids: int) -> None:
    async def go() -> None:
        for b in ids:
            await node.register(b)
    asyncio.run(go())


def test_reassign_list_and_cancel(node: AdminTestNode) -> None:
    setup_brokers(node, 2, 3)
    asyncio.run(node.create_topic("r", assignments={0: [1], 1: [1]}))

    async def body(a: Admin) -> Any:
        started = await a.partitions.AlterPartitionReassignments(
            P.AlterPartitionReassignmentsRequest(reassignments=[
                P.Reassignment(topic="r", partition=0, replicas=[1, 2])]))
        listed = await a.partitions.ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest())
        only_p1 = await a.partitions.ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest(partitions=[tp("r", 1)]))
        cancelled = await a.partitions.AlterPartitionReassignments(
            P.AlterPartitionReassignmentsRequest(reassignments=[
                P.Reassignment(topic="r", partition=0, cancel=True)]))
        after = await a.partitions.ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest())
        return started, listed, only_p1, cancelled, after

    started, listed, only_p1, cancelled, after = serve(node, body)
    [s] = started.partitions
    assert (s.topic, s.partition, s.in_progress) == ("r", 0, True)
    assert list(s.replicas) == [1, 2] and list(s.adding_replicas) == [2]
    # this node leads r-0: copy progress of every replica is reported
    assert s.leader_log_end_offset == 0
    assert [(p.replica_id, p.in_isr) for p in s.progress] == [(1, True), (2, False)]
    assert [(x.topic, x.partition) for x in listed.reassignments] == [("r", 0)]
    assert list(only_p1.reassignments) == []
    [c] = cancelled.partitions
    assert not c.in_progress and list(c.replicas) == [1]
    assert list(after.reassignments) == []
    assert node.topic("r").partitions[0].replicas == (1,)


def test_reassign_pure_reorder_completes_at_once_then_preferred_election(
        node: AdminTestNode) -> None:
    setup_brokers(node, 2)
    asyncio.run(node.create_topic("e", assignments={0: [1, 2], 1: [1, 2]}))

    async def body(a: Admin) -> Any:
        moved = await a.partitions.AlterPartitionReassignments(
            P.AlterPartitionReassignmentsRequest(reassignments=[
                P.Reassignment(topic="e", partition=0, replicas=[2, 1])]))
        elected = await a.partitions.ElectLeaders(P.ElectLeadersRequest(
            election_type=P.ELECTION_TYPE_PREFERRED, partitions=[tp("e", 0), tp("e", 1)]))
        return moved, elected

    moved, elected = serve(node, body)
    assert not moved.partitions[0].in_progress
    r0, r1 = elected.results
    assert (r0.outcome, r0.leader) == (P.ELECTION_OUTCOME_ELECTED, 2)
    assert r1.outcome == P.ELECTION_OUTCOME_NOT_NEEDED and r1.leader == 1
    assert node.topic("e").partitions[0].leader == 2


def test_preferred_election_fails_when_the_preferred_replica_is_fenced(
        node: AdminTestNode) -> None:
    setup_brokers(node, 2)

    async def setup() -> None:
        await node.create_topic("f", assignments={0: [2, 1]})
        await node.fence(2)

    asyncio.run(setup())

    async def body(a: Admin) -> Any:
        return await a.partitions.ElectLeaders(P.ElectLeadersRequest())  # every partition

    [r] = serve(node, body).results
    assert (r.topic, r.partition, r.outcome) == ("f", 0, P.ELECTION_OUTCOME_FAILED)
    assert r.message == "preferred_leader_not_available"  # Kafka's controller gives no text
    assert r.leader == 1


def test_unclean_election_of_a_partition_with_a_leader_is_not_needed(
        node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("u"))

    async def body(a: Admin) -> Any:
        return await a.partitions.ElectLeaders(P.ElectLeadersRequest(
            election_type=P.ELECTION_TYPE_UNCLEAN, partitions=[tp("u", 0)]))

    [r] = serve(node, body).results
    assert r.outcome == P.ELECTION_OUTCOME_NOT_NEEDED


def test_reassignment_errors_change_nothing(node: AdminTestNode) -> None:
    setup_brokers(node, 2)
    asyncio.run(node.create_topic("x", assignments={0: [1], 1: [1]}))

    async def body(a: Admin) -> list[tuple[Any, str]]:
        alter = a.partitions.AlterPartitionReassignments
        req = P.AlterPartitionReassignmentsRequest
        R = P.Reassignment
        return [
            await status_of(alter(req())),
            await status_of(alter(req(reassignments=[R(topic="nope", partition=0,
                                                       replicas=[1])]))),
            await status_of(alter(req(reassignments=[R(topic="x", partition=7,
                                                       replicas=[1])]))),
            await status_of(alter(req(reassignments=[R(topic="x", partition=0)]))),
            # one valid item and one naming an unregistered broker: nothing is started
            await status_of(alter(req(reassignments=[
                R(topic="x", partition=0, replicas=[2]),
                R(topic="x", partition=1, replicas=[9])]))),
            await status_of(alter(req(reassignments=[R(topic="x", partition=0, cancel=True)]))),
            await status_of(alter(req(reassignments=[R(topic="x", partition=0, replicas=[1]),
                                                     R(topic="x", partition=0, replicas=[2])]))),
            await status_of(a.partitions.ListPartitionReassignments(
                P.ListPartitionReassignmentsRequest(partitions=[tp("x", 5)]))),
            await status_of(a.partitions.ElectLeaders(P.ElectLeadersRequest(
                partitions=[tp("nope", 0)]))),
        ]

    r = serve(node, body)
    assert [c for c, _ in r] == [
        S.INVALID_ARGUMENT, S.NOT_FOUND, S.NOT_FOUND, S.INVALID_ARGUMENT, S.INVALID_ARGUMENT,
        S.FAILED_PRECONDITION, S.INVALID_ARGUMENT, S.NOT_FOUND, S.NOT_FOUND]
    assert "broker 9" in r[4][1]
    assert "No ongoing reassignment" in r[5][1]
    assert "partitions 0..1" in r[2][1]
    t = node.topic("x")
    assert [t.partitions[i].replicas for i in (0, 1)] == [(1,), (1,)]
    assert not t.partitions[0].adding_replicas
