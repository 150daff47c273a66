import uuid

from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.controller.rpc import delete_topics as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_delete_by_name_and_by_id() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("a"), CreatableTopic("b")])
        b = node.metadata.topic("b")
        assert b is not None
        results = rpc.results_of(await call(rpc, node, rpc.request(["a"], [b.topic_id], 5000)))
        assert all(r.error is ErrorCode.none for r in results), results
        assert {r.name for r in results} == {"a", "b"}
        assert node.metadata.topic("a") is None and node.metadata.topic("b") is None
    run(go())


def test_unknown_topics_and_not_controller() -> None:
    async def go() -> None:
        node = ControllerNode()
        results = rpc.results_of(await call(rpc, node, rpc.request(
            ["nope"], [uuid.UUID(int=42)], 5000)))
        assert [r.error for r in results] == [ErrorCode.unknown_topic_or_partition,
                                              ErrorCode.unknown_topic_id]
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request(["nope"], [], 5000))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())


def test_parse_tells_names_from_ids() -> None:
    names, ids = rpc.parse(rpc.request(["x"], [uuid.UUID(int=7)], 10))
    assert names == ["x"] and ids == [uuid.UUID(int=7)]
