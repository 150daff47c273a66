# mypy: disable-error-code="no-any-return"
"""UnregisterBroker (API 64, v0, KIP-631): the broker's registration is dropped (its
partitions lose it from their ISR and leadership first, as when it is fenced);
BROKER_ID_NOT_REGISTERED when there is none. The codec both the client-facing handler
(broker/handlers/unregister_broker.py) and the controller listener use; the answer is of
the request's version."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0 import request as kreq
from kio.schema.unregister_broker.v0 import response as kresp

from broker.controller.api import ControllerApi
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

Q: Any = kreq

API_KEY = 64
VERSION = 0


def request(broker_id: int) -> kreq.UnregisterBrokerRequest:
    return Q.UnregisterBrokerRequest(broker_id=broker_id)


def response(request: Any, error: ErrorCode, message: str | None = None) -> Any:
    """The answer to `request`, of its version."""
    return build(response_module(request).UnregisterBrokerResponse, throttle_time=NO_THROTTLE,
                 error_code=error, error_message=message)


def reply_of(r: kresp.UnregisterBrokerResponse) -> tuple[ErrorCode, str | None]:
    return r.error_code, r.error_message


def error_code_of(r: kresp.UnregisterBrokerResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: kreq.UnregisterBrokerRequest, code: ErrorCode) -> Any:
    return response(r, code)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, *await controller.unregister_broker(int(r.broker_id)))
    except KafkaError as exc:
        return response(r, exc.error_code, exc.message)


async def handle(node: ControllerNode, ctx: Any, r: kreq.UnregisterBrokerRequest) -> Any:
    return await on_active(node, r, serve, response)
