import uuid

from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerRegistrationRequest
from broker.controller.rpc import broker_registration as rpc
from tests.unit.controller.rpc.rpc_support import CLUSTER_ID, ControllerNode, call, run


def _req(broker_id: int = 4, **kw: object) -> BrokerRegistrationRequest:
    fields: dict[str, object] = dict(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=99),
        listeners=[("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("ADMIN", "h", 1, "SSL")],
        features=[("metadata.version", 1, 20)], rack="r1", previous_broker_epoch=-1)
    fields.update(kw)
    return BrokerRegistrationRequest(**fields)  # type: ignore[arg-type]


def test_registration_over_the_wire_records_the_broker_fenced_with_a_new_epoch() -> None:
    async def go() -> None:
        node = ControllerNode()
        before = node.metadata.last_broker_epoch
        reply = rpc.reply_of(await call(rpc, node, rpc.request(_req())))
        assert reply.error is ErrorCode.none and reply.broker_epoch > before
        reg = node.metadata.brokers[4]
        assert reg.fenced and reg.epoch == reply.broker_epoch and reg.rack == "r1"
        assert reg.incarnation_id == uuid.UUID(int=99)
        assert reg.endpoint("PLAINTEXT").port == 9092
        assert reg.endpoint("ADMIN").security_protocol == "SSL"
    run(go())


def test_parse_keeps_every_field() -> None:
    req = _req(previous_broker_epoch=17)
    assert rpc.parse(rpc.request(req)) == BrokerRegistrationRequest(
        broker_id=4, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=99),
        listeners=[("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("ADMIN", "h", 1, "SSL")],
        features=[("metadata.version", 1, 20)], rack="r1", log_dirs=[],
        previous_broker_epoch=17)


def test_wrong_cluster_id_is_refused() -> None:
    node = ControllerNode()
    reply = rpc.reply_of(run(call(rpc, node, rpc.request(_req(cluster_id="other")))))
    assert reply.error is ErrorCode.inconsistent_cluster_id
    assert 4 not in node.metadata.brokers


def test_not_controller_when_inactive_or_absent() -> None:
    node = ControllerNode(active=False)
    resp = run(call(rpc, node, rpc.request(_req())))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
    node.controller_service = None
    resp = run(call(rpc, node, rpc.request(_req())))
    assert rpc.error_code_of(resp) is ErrorCode.not_controller
