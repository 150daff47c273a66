"""UnregisterBroker (API 64, v0, KIP-631): drop a broker's registration, sent on to the
active controller (broker/controller/rpc/unregister_broker.py) as Kafka's brokers forward it.

The controller first takes the broker out of every ISR and leadership it holds (as when it
is fenced), then writes the unregistration; BROKER_ID_NOT_REGISTERED when the broker has no
registration. Meant for brokers that are gone for good: a live broker registers again on
its next heartbeat. A controller that cannot be reached is REQUEST_TIMED_OUT or
NOT_CONTROLLER, with the reason as error_message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import unregister_broker as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 64
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await rpc.serve(node.controller, request)
