from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AlterConfigOp,
    ConfigResource,
    CreatableTopic,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc import incremental_alter_configs as rpc
from broker.metadata.records import RESOURCE_TOPIC
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_set_append_delete_over_the_wire() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics(
            [CreatableTopic("a", configs={"retention.ms": "1000"})])
        res = ConfigResource(RESOURCE_TOPIC, "a")
        [r] = rpc.results_of(await call(rpc, node, rpc.request([IncrementalAlterConfigsResource(
            res, [("retention.ms", AlterConfigOp.DELETE, None),
                  ("cleanup.policy", AlterConfigOp.APPEND, "compact")])], False)))
        assert r.error is ErrorCode.none, r
        assert node.metadata.topic_config("a") == {"cleanup.policy": "delete,compact"}
    run(go())


def test_validate_only_unknown_op_and_not_controller() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("a")])
        res = ConfigResource(RESOURCE_TOPIC, "a")
        ok = IncrementalAlterConfigsResource(res, [("retention.ms", AlterConfigOp.SET, "5")])
        [r] = rpc.results_of(await call(rpc, node, rpc.request([ok], True)))
        assert r.error is ErrorCode.none and node.metadata.topic_config("a") == {}
        bad = rpc.request([ok], False)

        broken = replace(bad, resources=(replace(bad.resources[0], configs=(
            replace(bad.resources[0].configs[0], config_operation=9),)),))
        [r] = rpc.results_of(await call(rpc, node, broken))
        assert r.error is ErrorCode.invalid_request
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request([ok], False))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())


def test_an_unknown_op_fails_its_resource_alone() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics([CreatableTopic("a"), CreatableTopic("b")])
        req = rpc.request([
            IncrementalAlterConfigsResource(ConfigResource(RESOURCE_TOPIC, t),
                                            [("retention.ms", AlterConfigOp.SET, "5")])
            for t in ("a", "b")], False)
        bad = replace(req.resources[0], configs=(
            replace(req.resources[0].configs[0], config_operation=9),))
        a, b = rpc.results_of(await call(rpc, node, replace(
            req, resources=(bad, req.resources[1]))))
        assert a.error is ErrorCode.invalid_request and a.message, a
        assert b.error is ErrorCode.none, b
        assert node.metadata.topic_config("a") == {}
        assert node.metadata.topic_config("b") == {"retention.ms": "5"}
    run(go())
