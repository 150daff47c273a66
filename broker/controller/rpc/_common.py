"""What every controller RPC module shares: finding the active local controller, answering
on the controller listener through an API's one server (`serve`, which takes a ControllerApi:
this node's active ControllerService here, a broker's ControllerChannel in its handler), and
the security protocol ids BrokerRegistration carries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from broker.controller.api import ControllerApi
from broker.errors import KafkaError

if TYPE_CHECKING:
    from broker.controller.service import ControllerService


# Security protocols as BrokerRegistration carries them (Kafka's SecurityProtocol ids).
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


class ControllerNode(Protocol):
    """What the controller listener's handlers read of their node: its id and its
    controller service (None on a broker-only node)."""

    @property
    def node_id(self) -> int: ...

    @property
    def controller_service(self) -> ControllerService | None: ...


def active_service(node: ControllerNode) -> ControllerService:
    """This node's controller service if it is the active controller, else NOT_CONTROLLER
    (the broker's channel then asks the quorum's leader)."""
    service = node.controller_service
    if service is None or not service.quorum.is_leader:
        raise KafkaError(ErrorCode.not_controller,
                         f"node {node.node_id} is not the active controller")
    return service


async def on_active(node: ControllerNode, r: Any,
                    serve: Callable[[ControllerApi, Any], Awaitable[Any]],
                    failed: Callable[[Any, ErrorCode, str | None], Any]) -> Any:
    """The controller listener's answer to `r`: the API's `serve` on this node's active
    controller service, or `failed` with NOT_CONTROLLER."""
    try:
        service = active_service(node)
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)
    return await serve(service, r)
