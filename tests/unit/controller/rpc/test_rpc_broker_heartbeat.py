import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerHeartbeatRequest
from broker.controller.rpc import broker_heartbeat as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, over_the_wire, run


def test_heartbeat_unfences_a_caught_up_broker_and_answers_over_the_wire() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(2, unfence=False)
        assert node.metadata.brokers[2].fenced
        behind = rpc.reply_of(await call(rpc, node, rpc.request(
            BrokerHeartbeatRequest(2, epoch, current_metadata_offset=-1))))
        assert behind.error is ErrorCode.none and behind.is_fenced and not behind.is_caught_up
        beat = rpc.reply_of(await call(rpc, node, rpc.request(
            BrokerHeartbeatRequest(2, epoch, node.metadata.offset))))
        assert beat.error is ErrorCode.none and not beat.is_fenced and beat.is_caught_up
        assert not node.metadata.brokers[2].fenced
    run(go())


def test_want_shut_down_is_carried_and_answered() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(2)
        first = rpc.reply_of(await call(rpc, node, rpc.request(BrokerHeartbeatRequest(
            2, epoch, node.metadata.offset, want_shut_down=True))))
        assert node.metadata.brokers[2].in_controlled_shutdown
        assert not first.should_shut_down
        second = rpc.reply_of(await call(rpc, node, rpc.request(BrokerHeartbeatRequest(
            2, epoch, node.metadata.offset, want_shut_down=True))))
        assert second.should_shut_down  # leads nothing, caught up
    run(go())


def test_stale_epoch_and_unknown_broker() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(2)
        stale = rpc.reply_of(await call(rpc, node, rpc.request(
            BrokerHeartbeatRequest(2, epoch - 1, node.metadata.offset))))
        assert stale.error is ErrorCode.stale_broker_epoch
        unknown = rpc.reply_of(await call(rpc, node, rpc.request(
            BrokerHeartbeatRequest(9, 1, node.metadata.offset))))
        assert unknown.error is ErrorCode.broker_id_not_registered
    run(go())


def test_not_controller() -> None:
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, rpc.request(BrokerHeartbeatRequest(2, 1, 0))))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
    assert rpc.reply_of(resp).error is ErrorCode.not_controller


def test_v1_heartbeats_of_the_previous_build_are_served() -> None:
    """A rolling upgrade: a broker still sending v1 (no cordoned_log_dirs) is answered in v1."""
    from kio.schema.broker_heartbeat.v1 import request as v1

    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(2)
        old: Any = v1
        wire = over_the_wire(old.BrokerHeartbeatRequest(
            broker_id=2, broker_epoch=epoch, current_metadata_offset=node.metadata.offset,
            want_fence=False, want_shut_down=False), rpc.API_KEY, 1, response=False)
        answer = over_the_wire(await rpc.handle(node, None, wire), rpc.API_KEY, 1,
                               response=True)
        assert answer.error_code is ErrorCode.none and not answer.is_fenced
    run(go())


def test_cordoned_dirs_are_carried() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(2)
        wire = rpc.request(BrokerHeartbeatRequest(2, epoch, node.metadata.offset,
                                                  cordoned_log_dirs=[uuid.UUID(int=7)]))
        assert rpc.parse(over_the_wire(wire, rpc.API_KEY, rpc.VERSION, response=False)
                         ).cordoned_log_dirs == (uuid.UUID(int=7),)
        unknown = rpc.request(BrokerHeartbeatRequest(2, epoch, node.metadata.offset))
        assert rpc.parse(over_the_wire(unknown, rpc.API_KEY, rpc.VERSION, response=False)
                         ).cordoned_log_dirs is None
    run(go())
