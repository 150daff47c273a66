"""ControllerRegistration (API 70, KIP-919) over the wire to the controller listener."""

import uuid

from kio.schema.errors import ErrorCode

from broker.controller.requests import ControllerRegistrationRequest
from broker.controller.rpc import controller_registration as rpc
from broker.metadata.features import supported_features
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def _req() -> ControllerRegistrationRequest:
    return ControllerRegistrationRequest(
        controller_id=2, incarnation_id=uuid.UUID(int=5),
        listeners=[("CONTROLLER", "127.0.0.1", 9093, "SSL")],
        features=list(supported_features()))


def test_registration_is_recorded_in_the_image() -> None:
    node = ControllerNode()
    reply = rpc.reply_of(run(call(rpc, node, rpc.request(_req()))))
    assert reply.error is ErrorCode.none
    reg = node.metadata.controllers[2]
    assert reg.incarnation_id == uuid.UUID(int=5)
    assert [(e.name, e.port, e.security_protocol) for e in reg.endpoints] == [
        ("CONTROLLER", 9093, "SSL")]
    assert reg.features == supported_features()


def test_parse_keeps_every_field() -> None:
    assert rpc.parse(rpc.request(_req())) == _req()


def test_not_controller_when_inactive() -> None:
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, rpc.request(_req())))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
