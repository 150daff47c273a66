"""UnregisterBroker (API 64) on the client listener: sent on to the controller, its answer
passed back."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0 import request as m

from broker.controller.requests import CreatableTopic
from broker.errors import KafkaError
from broker.handlers import unregister_broker
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip


def call(node: TestNode, broker_id: int) -> tuple[ErrorCode, str | None]:
    resp = asyncio.run(unregister_broker.handle(
        node, make_ctx(unregister_broker.API_KEY, 0),
        m.UnregisterBrokerRequest(broker_id=broker_id)))  # type: ignore[arg-type]
    assert roundtrip(resp) == resp
    return resp.error_code, resp.error_message


def test_unregister_a_peer_then_an_unknown_broker(node: TestNode) -> None:
    asyncio.run(node.register(7))
    results = asyncio.run(node.controller.create_topics(
        [CreatableTopic("t", assignments={0: (7, NODE_ID)})]))
    assert results[0].error is ErrorCode.none
    assert call(node, 7) == (ErrorCode.none, None)
    assert 7 not in node.metadata.brokers
    p = node.metadata.partition("t", 0)
    assert p is not None and p.leader == NODE_ID and 7 not in p.isr
    error, message = call(node, 7)
    assert error is ErrorCode.broker_id_not_registered and message


def test_a_controller_out_of_reach_is_the_answer(node: TestNode) -> None:
    async def refuse(broker_id: int) -> tuple[ErrorCode, str | None]:
        raise KafkaError(ErrorCode.request_timed_out, "controller 3 did not answer in time")

    node.controller.unregister_broker = refuse  # type: ignore[method-assign]
    assert call(node, 7) == (ErrorCode.request_timed_out, "controller 3 did not answer in time")
