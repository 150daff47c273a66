"""ControllerService.rebalance_leaders: the auto.leader.rebalance.enable step the active
controller runs every leader.imbalance.check.interval.seconds."""

from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AlterPartitionItem,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    CreatableTopic,
)
from tests.unit.controller.rpc.rpc_support import ControllerNode, run


def test_leadership_returns_to_the_preferred_replica_once_it_is_in_sync() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2, 3):
            await node.add_broker(b)
        service = node.controller_service
        assert service is not None
        await service.create_topics([CreatableTopic(
            "t", assignments={0: (1, 2, 3), 1: (1, 3, 2), 2: (2, 3, 1)})])
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, want_fence=True))
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset))
        assert await service.rebalance_leaders(10) == 0  # 1 is not in sync yet
        t = node.metadata.topic("t")
        assert t is not None
        for idx in (0, 1):  # the leaders let 1 back into the ISR
            p = t.partitions[idx]
            reply = await service.alter_partition(AlterPartitionRequest(
                p.leader, node.epochs[p.leader], [(t.topic_id, [AlterPartitionItem(
                    idx, p.leader_epoch, p.partition_epoch,
                    [(b, -1) for b in (*p.isr, 1)])])]))
            assert reply.topics[0][1][0].error is ErrorCode.none
        assert await service.rebalance_leaders(10) == 2
        after = node.metadata.topic("t")
        assert after is not None
        assert {i: p.leader for i, p in after.partitions.items()} == {0: 1, 1: 1, 2: 2}
        assert await service.rebalance_leaders(10) == 0  # balanced: nothing to do
        node.quorum.is_leader = False
        assert await service.rebalance_leaders(10) == 0
    run(go())
