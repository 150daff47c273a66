# mypy: disable-error-code="no-any-return"
"""UnregisterBroker (API 64, v0, KIP-631) on the controller listener: the broker's
registration is dropped (its partitions lose it from their ISR and leadership first, as when
it is fenced); BROKER_ID_NOT_REGISTERED when there is none."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0 import request as kreq
from kio.schema.unregister_broker.v0 import response as kresp

from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

Q: Any = kreq
P: Any = kresp

API_KEY = 64
VERSION = 0


def request(broker_id: int) -> kreq.UnregisterBrokerRequest:
    return Q.UnregisterBrokerRequest(broker_id=broker_id)


def response(error: ErrorCode, message: str | None = None) -> kresp.UnregisterBrokerResponse:
    return P.UnregisterBrokerResponse(throttle_time=NO_THROTTLE, error_code=error,
                                      error_message=message)


def reply_of(r: kresp.UnregisterBrokerResponse) -> tuple[ErrorCode, str | None]:
    return r.error_code, r.error_message


def error_code_of(r: kresp.UnregisterBrokerResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: kreq.UnregisterBrokerRequest, code: ErrorCode
                   ) -> kresp.UnregisterBrokerResponse:
    return response(code)


async def handle(node: Any, ctx: Any,
                 r: kreq.UnregisterBrokerRequest) -> kresp.UnregisterBrokerResponse:
    try:
        service = active_service(node)
        return response(*await service.unregister_broker(int(r.broker_id)))
    except KafkaError as exc:
        return response(exc.error_code, exc.message)
