from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.controller.rpc import list_partition_reassignments as rpc
from broker.errors import KafkaError
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_lists_only_the_named_partitions_that_move() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2, 3):
            await node.add_broker(b)
        service = node.controller_service
        assert service is not None
        await service.create_topics([CreatableTopic("t", assignments={0: (1,), 1: (2,)})])
        await service.alter_partition_reassignments([("t", 0, [3]), ("t", 1, [3])])
        named = rpc.results_of(await call(rpc, node, rpc.request([("t", 1), ("x", 0)], 5000)))
        assert [(o.topic, o.partition, o.replicas) for o in named] == [("t", 1, (3, 2))]
        everything = rpc.results_of(await call(rpc, node, rpc.request(None, 5000)))
        assert sorted(o.partition for o in everything) == [0, 1]
    run(go())


def test_parse_and_not_controller() -> None:
    assert rpc.parse(rpc.request([("a", 1), ("a", 2)], 10)) == [("a", 1), ("a", 2)]
    assert rpc.parse(rpc.request(None, 10)) is None
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, rpc.request(None, 10)))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
    try:
        rpc.results_of(resp)
    except KafkaError as exc:
        assert exc.error_code is ErrorCode.not_controller
    else:
        raise AssertionError("results_of must raise on a top-level error")
