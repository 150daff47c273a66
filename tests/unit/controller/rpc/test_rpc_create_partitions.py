from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic, CreatePartitionsTopic
from broker.controller.rpc import create_partitions as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_grow_with_and_without_assignments() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2):
            await node.add_broker(b)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("a", 1, 1),
                                                     CreatableTopic("b", 1, 1)])
        results = rpc.results_of(await call(rpc, node, rpc.request([
            CreatePartitionsTopic("a", 3), CreatePartitionsTopic("b", 2, [[2]])], False, 5000)))
        assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
        a, b = node.metadata.topic("a"), node.metadata.topic("b")
        assert a is not None and a.num_partitions == 3
        assert b is not None and b.partitions[1].replicas == (2,)
    run(go())


def test_shrinking_is_refused_and_validate_only_writes_nothing() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("a", 2, 1)])
        [r] = rpc.results_of(await call(rpc, node, rpc.request(
            [CreatePartitionsTopic("a", 1)], False, 5000)))
        assert r.error is ErrorCode.invalid_partitions and r.message
        [r] = rpc.results_of(await call(rpc, node, rpc.request(
            [CreatePartitionsTopic("a", 4)], True, 5000)))
        assert r.error is ErrorCode.none
        t = node.metadata.topic("a")
        assert t is not None and t.num_partitions == 2
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request([CreatePartitionsTopic("a", 4)], False, 5000))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())


def test_parse_inverts_request() -> None:
    topics = [CreatePartitionsTopic("x", 5, [[1, 2], [2, 3]]), CreatePartitionsTopic("y", 2)]
    assert rpc.parse(rpc.request(topics, False, 1)) == [
        CreatePartitionsTopic("x", 5, [[1, 2], [2, 3]]), CreatePartitionsTopic("y", 2, None)]
