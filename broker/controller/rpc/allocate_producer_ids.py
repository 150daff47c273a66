# mypy: disable-error-code="no-any-return"
"""AllocateProducerIds (API 67, KIP-730) on the controller listener."""

from __future__ import annotations

from typing import Any

from kio.schema.allocate_producer_ids.v0 import request as kreq
from kio.schema.allocate_producer_ids.v0 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import AllocateProducerIdsReply
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 67
VERSION = 0


def request(broker_id: int, broker_epoch: int) -> kreq.AllocateProducerIdsRequest:
    return Q.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch)


def response(reply: AllocateProducerIdsReply) -> kresp.AllocateProducerIdsResponse:
    return P.AllocateProducerIdsResponse(
        throttle_time=NO_THROTTLE, error_code=reply.error,
        producer_id_start=reply.producer_id_start, producer_id_len=reply.producer_id_len)


def reply_of(r: kresp.AllocateProducerIdsResponse) -> AllocateProducerIdsReply:
    return AllocateProducerIdsReply(error=r.error_code, producer_id_start=int(r.producer_id_start),
                                    producer_id_len=int(r.producer_id_len))


def error_code_of(r: kresp.AllocateProducerIdsResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode) -> kresp.AllocateProducerIdsResponse:
    return response(AllocateProducerIdsReply(error=code))


async def handle(node: ControllerNode, ctx: Any, r: kreq.AllocateProducerIdsRequest
                 ) -> kresp.AllocateProducerIdsResponse:
    try:
        reply = await active_service(node).allocate_producer_ids(int(r.broker_id),
                                                                 int(r.broker_epoch))
    except KafkaError as exc:
        reply = AllocateProducerIdsReply(error=exc.error_code)
    return response(reply)
