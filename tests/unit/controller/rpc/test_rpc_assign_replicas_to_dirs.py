"""AssignReplicasToDirs (API 73) and the heartbeat's offline_log_dirs (KIP-858) on the
controller listener: a broker's replicas are recorded in their log directories; a directory
reported offline loses the broker's ISR membership, ELR membership and leadership of exactly
the partitions kept there, and no later election gives them back; errors per partition and
per request as Kafka answers them."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AssignReplicasToDirsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    ElectionType,
)
from broker.controller.rpc import assign_replicas_to_dirs as rpc
from broker.controller.rpc import broker_heartbeat
from tests.unit.controller.rpc.rpc_support import CLUSTER_ID, ControllerNode, call, run

DIR_A = uuid.UUID(int=0xA0)
DIR_B = uuid.UUID(int=0xB0)


async def jbod_cluster() -> ControllerNode:
    """Brokers 1-3; broker 1 registers two log dirs. Topics 'a' and 'b', both led by 1."""
    node = ControllerNode()
    service = node.controller_service
    assert service is not None
    for b in (1, 2, 3):
        reply = await service.register_broker(BrokerRegistrationRequest(
            broker_id=b, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
            listeners=[("PLAINTEXT", "127.0.0.1", 20000 + b, "PLAINTEXT")],
            log_dirs=(DIR_A, DIR_B) if b == 1 else ()))
        assert reply.error is ErrorCode.none
        node.epochs[b] = reply.broker_epoch
        beat = await service.broker_heartbeat(BrokerHeartbeatRequest(
            b, reply.broker_epoch, node.metadata.offset))
        assert not beat.is_fenced
    for name in ("a", "b"):
        [res] = await service.create_topics([CreatableTopic(name, assignments={0: (1, 2, 3)})])
        assert res.error is ErrorCode.none
    assert node.metadata.brokers[1].log_dirs == (DIR_A, DIR_B)
    return node


def tid(node: ControllerNode, name: str) -> uuid.UUID:
    t = node.metadata.topic(name)
    assert t is not None
    return t.topic_id


def test_assignment_is_recorded_per_replica() -> None:
    async def go() -> None:
        node = await jbod_cluster()
        reply = rpc.reply_of(await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_A, tid(node, "a"), 0), (DIR_B, tid(node, "b"), 0)]))))
        assert reply.error is ErrorCode.none
        assert sorted(r[3] for r in reply.results) == [ErrorCode.none] * 2
        pa, pb_ = node.metadata.partition("a", 0), node.metadata.partition("b", 0)
        assert pa is not None and pb_ is not None
        assert pa.directories == (DIR_A, uuid.UUID(int=0), uuid.UUID(int=0))
        assert pa.directory_of(1) == DIR_A and pb_.directory_of(1) == DIR_B
        assert pa.leader == 1 and pa.isr == (1, 2, 3)  # an online dir changes nothing else
        epoch = pa.partition_epoch
        # the same assignment again writes nothing
        await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_A, tid(node, "a"), 0)])))
        again = node.metadata.partition("a", 0)
        assert again is not None and again.partition_epoch == epoch
    run(go())


def test_errors_per_partition_and_per_request() -> None:
    async def go() -> None:
        node = await jbod_cluster()
        service = node.controller_service
        assert service is not None
        [res] = await service.create_topics([CreatableTopic("elsewhere", assignments={0: (2,)})])
        assert res.error is ErrorCode.none
        reply = rpc.reply_of(await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_A, uuid.UUID(int=77), 0), (DIR_A, tid(node, "a"), 5),
                                (DIR_A, tid(node, "elsewhere"), 0)]))))
        assert reply.error is ErrorCode.none
        assert {(r[1], r[2]): r[3] for r in reply.results} == {
            (uuid.UUID(int=77), 0): ErrorCode.unknown_topic_id,
            (tid(node, "a"), 5): ErrorCode.unknown_topic_or_partition,
            (tid(node, "elsewhere"), 0): ErrorCode.not_leader_or_follower}
        stale = rpc.reply_of(await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1] - 1, [(DIR_A, tid(node, "a"), 0)]))))
        assert stale.error is ErrorCode.stale_broker_epoch
        unknown = rpc.reply_of(await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            9, 1, [(DIR_A, tid(node, "a"), 0)]))))
        assert unknown.error is ErrorCode.broker_id_not_registered
        node.controller_service = None
        inactive = await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(1, 1, [])))
        assert rpc.error_code_of(inactive) is ErrorCode.not_controller
    run(go())


def test_offline_dir_in_a_heartbeat_moves_only_its_partitions() -> None:
    async def go() -> None:
        node = await jbod_cluster()
        service = node.controller_service
        assert service is not None
        await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_A, tid(node, "a"), 0), (DIR_B, tid(node, "b"), 0)])))
        beat = broker_heartbeat.reply_of(await call(broker_heartbeat, node,
                                                    broker_heartbeat.request(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, offline_log_dirs=(DIR_B,)))))
        assert beat.error is ErrorCode.none and not beat.is_fenced
        assert node.metadata.brokers[1].log_dirs == (DIR_A,)
        assert not node.metadata.brokers[1].fenced  # the broker stays up
        pa, pb_ = node.metadata.partition("a", 0), node.metadata.partition("b", 0)
        assert pa is not None and pb_ is not None
        assert (pa.leader, pa.isr) == (1, (1, 2, 3))
        assert pb_.leader in (2, 3) and 1 not in pb_.isr and 1 not in pb_.elr
        # the preferred replica (1) is not eligible for 'b' any more
        [res] = await service.elect_leaders(ElectionType.PREFERRED, [("b", 0)])
        assert res.error is ErrorCode.preferred_leader_not_available
        # reporting it again changes nothing
        offset = node.metadata.offset
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, offline_log_dirs=(DIR_B,)))
        assert node.metadata.offset == offset
        # when every other replica goes, 'b' has no leader rather than broker 1
        for b in (2, 3):
            await service.broker_heartbeat(BrokerHeartbeatRequest(
                b, node.epochs[b], node.metadata.offset, want_fence=True))
        pb_ = node.metadata.partition("b", 0)
        assert pb_ is not None and pb_.leader == -1
        pa = node.metadata.partition("a", 0)
        assert pa is not None and pa.leader == 1
    run(go())


def test_assignment_to_an_offline_dir_moves_leadership_away() -> None:
    """A replica placed before its directory failed, whose assignment reaches the
    controller only after the broker reported the directory offline."""
    async def go() -> None:
        node = await jbod_cluster()
        service = node.controller_service
        assert service is not None
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, offline_log_dirs=(DIR_B,)))
        pa = node.metadata.partition("a", 0)
        assert pa is not None and pa.leader == 1  # unassigned: counted online
        reply = rpc.reply_of(await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_B, tid(node, "a"), 0)]))))
        assert [r[3] for r in reply.results] == [ErrorCode.none]
        pa = node.metadata.partition("a", 0)
        assert pa is not None and pa.directory_of(1) == DIR_B
        assert pa.leader in (2, 3) and 1 not in pa.isr
    run(go())


def test_registration_checks_directory_ids() -> None:
    """Kafka's registration checks (KIP-858): no reserved id, none twice, none that another
    broker registered (a copied disk)."""
    async def go() -> None:
        node = await jbod_cluster()
        service = node.controller_service
        assert service is not None

        async def register(b: int, dirs: tuple[uuid.UUID, ...]) -> tuple[ErrorCode, str | None]:
            reply = await service.register_broker(BrokerRegistrationRequest(
                broker_id=b, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
                listeners=[("PLAINTEXT", "127.0.0.1", 20000 + b, "PLAINTEXT")], log_dirs=dirs))
            return reply.error, reply.message

        assert await register(4, (uuid.UUID(int=1),)) == (
            ErrorCode.invalid_registration, "Reserved directory ID in request")
        assert await register(4, (uuid.UUID(int=9), uuid.UUID(int=9))) == (
            ErrorCode.invalid_registration, "Duplicate directory ID in request")
        assert await register(4, (DIR_B,)) == (
            ErrorCode.invalid_registration,
            f"Broker 1 is already registered with directory {DIR_B}")
        assert (await register(4, (uuid.UUID(int=9),)))[0] is ErrorCode.none
    run(go())


def test_a_replica_in_an_offline_dir_cannot_rejoin_the_isr() -> None:
    """AlterPartition naming a replica whose directory is offline is INELIGIBLE_REPLICA, as
    Kafka's isEligibleReplica answers; once the replica lives in an online dir again
    (AssignReplicasToDirs), it may join."""
    from broker.controller.requests import AlterPartitionItem, AlterPartitionRequest

    async def go() -> None:
        node = await jbod_cluster()
        service = node.controller_service
        assert service is not None
        t = tid(node, "b")
        await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_B, t, 0)])))
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, offline_log_dirs=(DIR_B,)))
        p = node.metadata.partition("b", 0)
        assert p is not None and 1 not in p.isr
        leader = p.leader

        async def add_back() -> ErrorCode:
            q = node.metadata.partition("b", 0)
            assert q is not None
            reply = await service.alter_partition(AlterPartitionRequest(
                leader, node.epochs[leader], [(t, [AlterPartitionItem(
                    0, q.leader_epoch, q.partition_epoch,
                    [(b, node.epochs[b]) for b in (*q.isr, 1)])])]))
            return reply.topics[0][1][0].error

        assert await add_back() is ErrorCode.ineligible_replica
        await call(rpc, node, rpc.request(AssignReplicasToDirsRequest(
            1, node.epochs[1], [(DIR_A, t, 0)])))
        assert await add_back() is ErrorCode.none
        q = node.metadata.partition("b", 0)
        assert q is not None and 1 in q.isr
    run(go())
