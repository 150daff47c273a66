"""UnregisterBroker (API 64) on the controller listener: the broker leaves every ISR and
leadership, then its registration; an unknown broker is BROKER_ID_NOT_REGISTERED; a node
whose controller is not active says NOT_CONTROLLER."""

from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.controller.rpc import unregister_broker as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_unregister_drops_the_registration_and_the_replicas_leadership() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2):
            await node.add_broker(b)
        service = node.controller_service
        assert service is not None
        await service.create_topics([CreatableTopic("t", assignments={0: (2, 1)})])
        assert node.metadata.partition("t", 0).leader == 2  # type: ignore[union-attr]
        error, message = rpc.reply_of(await call(rpc, node, rpc.request(2)))
        assert (error, message) == (ErrorCode.none, None)
        assert 2 not in node.metadata.brokers
        p = node.metadata.partition("t", 0)
        assert p is not None and p.leader == 1 and p.isr == (1,)
        error, message = rpc.reply_of(await call(rpc, node, rpc.request(2)))
        assert error is ErrorCode.broker_id_not_registered
        assert message == "Broker ID 2 is not currently registered"
    run(go())


def test_an_inactive_controller_says_not_controller() -> None:
    async def go() -> None:
        node = ControllerNode()
        node.controller_service = None
        reply = await call(rpc, node, rpc.request(1))
        assert rpc.error_code_of(reply) is ErrorCode.not_controller
    run(go())
