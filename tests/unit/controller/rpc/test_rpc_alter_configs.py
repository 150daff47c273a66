from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterConfigsResource, ConfigResource, CreatableTopic
from broker.controller.rpc import alter_configs as rpc
from broker.metadata.records import RESOURCE_TOPIC
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_replace_topic_configs_and_refuse_unknown_keys() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        assert node.controller_service is not None
        await node.controller_service.create_topics(
            [CreatableTopic("a", configs={"retention.ms": "1000"})])
        res = ConfigResource(RESOURCE_TOPIC, "a")
        [r] = rpc.results_of(await call(rpc, node, rpc.request(
            [AlterConfigsResource(res, {"cleanup.policy": "compact"})], False)))
        assert r.error is ErrorCode.none and r.resource == res
        assert node.metadata.topic_config("a") == {"cleanup.policy": "compact"}
        [r] = rpc.results_of(await call(rpc, node, rpc.request(
            [AlterConfigsResource(res, {"no.such.key": "1"})], False)))
        assert r.error is ErrorCode.invalid_config and r.message
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request([AlterConfigsResource(res, {})], False))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())
