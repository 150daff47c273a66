from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.controller.rpc import alter_partition_reassignments as rpc
from broker.controller.rpc import list_partition_reassignments as list_rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_start_list_and_cancel_a_reassignment_over_the_wire() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2, 3, 4):
            await node.add_broker(b)
        assert node.controller_service is not None
        await node.controller_service.create_topics(
            [CreatableTopic("t", assignments={0: (1, 2), 1: (2, 3)})])
        results = rpc.results_of(await call(rpc, node, rpc.request(
            [("t", 0, [3, 4]), ("t", 7, [1])], 5000)))
        by_tp = {(r.topic, r.partition): r.error for r in results}
        assert by_tp == {("t", 0): ErrorCode.none,
                         ("t", 7): ErrorCode.unknown_topic_or_partition}
        ongoing = list_rpc.results_of(await call(list_rpc, node, list_rpc.request(None, 5000)))
        assert [(o.topic, o.partition, set(o.adding_replicas), set(o.removing_replicas))
                for o in ongoing] == [("t", 0, {3, 4}, {1, 2})]
        [r] = rpc.results_of(await call(rpc, node, rpc.request([("t", 0, None)], 5000)))
        assert r.error is ErrorCode.none
        assert list_rpc.results_of(await call(list_rpc, node, list_rpc.request(None, 5000))) == []
        p = node.metadata.partition("t", 0)
        assert p is not None and p.replicas == (1, 2)
        [r] = rpc.results_of(await call(rpc, node, rpc.request([("t", 1, None)], 5000)))
        assert r.error is ErrorCode.no_reassignment_in_progress
    run(go())


def test_parse_round_trip_and_not_controller() -> None:
    req = rpc.request([("a", 0, [1, 2]), ("a", 1, None), ("b", 3, [4])], 100)
    assert rpc.parse(req) == [("a", 0, [1, 2]), ("a", 1, None), ("b", 3, [4])]
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, req))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
    try:
        rpc.results_of(resp)
    except Exception as exc:  # a whole-request error is raised to the caller
        assert getattr(exc, "error_code", None) is ErrorCode.not_controller
    else:
        raise AssertionError("results_of must raise on a top-level error")
