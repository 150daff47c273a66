from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.controller.rpc import create_topics as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_create_with_configs_and_manual_assignment_over_the_wire() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2):
            await node.add_broker(b)
        topics = [
            CreatableTopic("a", 3, 2, configs={"cleanup.policy": "compact"}),
            CreatableTopic("b", assignments={0: (2, 1), 1: (1, 2)}),
        ]
        results = rpc.results_of(await call(rpc, node, rpc.request(topics, False, 5000)))
        by_name = {r.name: r for r in results}
        assert by_name["a"].error is ErrorCode.none and by_name["b"].error is ErrorCode.none
        a = node.metadata.topic("a")
        assert a is not None and by_name["a"].topic_id == a.topic_id
        assert by_name["a"].num_partitions == 3 and by_name["a"].replication_factor == 2
        assert by_name["a"].configs == {"cleanup.policy": "compact"}
        b = node.metadata.topic("b")
        assert b is not None and b.partitions[0].replicas == (2, 1)
    run(go())


def test_validate_only_writes_nothing_and_errors_come_back_per_topic() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        results = rpc.results_of(await call(rpc, node, rpc.request(
            [CreatableTopic("ok", 1, 1), CreatableTopic("bad", 1, 3)], True, 5000)))
        by_name = {r.name: r for r in results}
        assert by_name["ok"].error is ErrorCode.none and by_name["ok"].num_partitions == 1
        assert by_name["bad"].error is ErrorCode.invalid_replication_factor
        assert by_name["bad"].message
        assert node.metadata.topic("ok") is None
    run(go())


def test_not_controller_marks_every_topic() -> None:
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, rpc.request([CreatableTopic("x"), CreatableTopic("y")],
                                           False, 1000)))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
    assert [r.error for r in rpc.results_of(resp)] == [ErrorCode.not_controller] * 2


def test_a_partition_assigned_twice_is_refused_for_its_topic_alone() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        req = rpc.request([CreatableTopic("twice", assignments={0: (1,)}),
                           CreatableTopic("fine", 1, 1)], False, 5000)
        twice = req.topics[0]
        req = replace(req, topics=(replace(twice, assignments=twice.assignments * 2),
                                   req.topics[1]))
        by_name = {r.name: r for r in rpc.results_of(await call(rpc, node, req))}
        assert by_name["twice"].error is ErrorCode.invalid_replica_assignment
        assert by_name["twice"].message == \
            "Found multiple manual partition assignments for partition 0"
        assert node.metadata.topic("twice") is None
        assert by_name["fine"].error is ErrorCode.none and node.metadata.topic("fine")
    run(go())
