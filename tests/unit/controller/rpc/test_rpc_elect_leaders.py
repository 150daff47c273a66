from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AlterPartitionItem,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    CreatableTopic,
    ElectionType,
)
from broker.controller.rpc import elect_leaders as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_preferred_election_moves_leadership_back() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2, 3):
            await node.add_broker(b)
        service = node.controller_service
        assert service is not None
        await service.create_topics([CreatableTopic("t", assignments={0: (1, 2, 3)})])
        # broker 1 (the preferred leader) is fenced: leadership moves, 1 leaves the ISR
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset, want_fence=True))
        moved = node.metadata.partition("t", 0)
        assert moved is not None and moved.leader in (2, 3) and 1 not in moved.isr
        not_available = rpc.results_of(await call(rpc, node, rpc.request(
            ElectionType.PREFERRED, [("t", 0)], 5000)))
        assert not_available[0].error is ErrorCode.preferred_leader_not_available
        # 1 comes back and its leader lets it into the ISR again
        await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset))
        t = node.metadata.topic("t")
        assert t is not None
        reply = await service.alter_partition(AlterPartitionRequest(
            moved.leader, node.epochs[moved.leader], [(t.topic_id, [AlterPartitionItem(
                0, moved.leader_epoch, moved.partition_epoch,
                [(b, -1) for b in (*moved.isr, 1)])])]))
        assert reply.topics[0][1][0].error is ErrorCode.none
        results = rpc.results_of(await call(rpc, node, rpc.request(
            ElectionType.PREFERRED, [("t", 0), ("nope", 0)], 5000)))
        by_tp = {(r.topic, r.partition): r.error for r in results}
        assert by_tp == {("t", 0): ErrorCode.none,
                         ("nope", 0): ErrorCode.unknown_topic_or_partition}
        after = node.metadata.partition("t", 0)
        assert after is not None and after.leader == 1
    run(go())


def test_already_preferred_is_not_needed_and_all_partitions_form() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("t", 2, 1)])
        results = rpc.results_of(await call(rpc, node, rpc.request(
            ElectionType.PREFERRED, [("t", 0), ("t", 1)], 5000)))
        assert sorted((r.topic, r.partition, r.error) for r in results) == [
            ("t", 0, ErrorCode.election_not_needed), ("t", 1, ErrorCode.election_not_needed)]
        # every partition (null): those that need no election are left out, as in Kafka
        assert rpc.results_of(await call(rpc, node, rpc.request(
            ElectionType.PREFERRED, None, 5000))) == []
    run(go())


def test_parse_round_trip_and_not_controller() -> None:
    req = rpc.request(ElectionType.UNCLEAN, [("a", 1), ("a", 2), ("b", 0)], 100)
    assert rpc.parse(req) == (ElectionType.UNCLEAN, [("a", 1), ("a", 2), ("b", 0)])
    assert rpc.parse(rpc.request(ElectionType.PREFERRED, None, 100)) == (
        ElectionType.PREFERRED, None)
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, req))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
