# mypy: disable-error-code="no-any-return"
"""BrokerRegistration (API 62) on the controller listener (KIP-631).

Both directions: `request`/`response_to_reply` for the broker's channel, `parse` and
`handle` on the controller.
"""

from __future__ import annotations

from typing import Any

from kio.schema.broker_registration.v4 import request as kreq
from kio.schema.broker_registration.v4 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerRegistrationReply, BrokerRegistrationRequest
from broker.controller.rpc._common import (
    SECURITY_PROTOCOL_IDS,
    SECURITY_PROTOCOL_NAMES,
    ControllerNode,
    active_service,
)
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 62
VERSION = 4


def request(req: BrokerRegistrationRequest) -> kreq.BrokerRegistrationRequest:
    return Q.BrokerRegistrationRequest(
        broker_id=req.broker_id, cluster_id=req.cluster_id, incarnation_id=req.incarnation_id,
        listeners=tuple(
            Q.Listener(name=n, host=h, port=p,
                          security_protocol=SECURITY_PROTOCOL_IDS.get(sp, 0))
            for n, h, p, sp in req.listeners),
        features=tuple(Q.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                       for n, lo, hi in req.features),
        rack=req.rack, is_migrating_zk_broker=False, log_dirs=tuple(req.log_dirs),
        previous_broker_epoch=req.previous_broker_epoch,
    )


def parse(r: kreq.BrokerRegistrationRequest) -> BrokerRegistrationRequest:
    if r.incarnation_id is None:
        raise KafkaError(ErrorCode.invalid_request, "a broker registration needs an incarnation id")
    return BrokerRegistrationRequest(
        broker_id=int(r.broker_id), cluster_id=r.cluster_id, incarnation_id=r.incarnation_id,
        listeners=[(x.name, x.host, int(x.port),
                    SECURITY_PROTOCOL_NAMES.get(int(x.security_protocol), "PLAINTEXT"))
                   for x in r.listeners],
        features=[(f.name, int(f.min_supported_version), int(f.max_supported_version))
                  for f in r.features],
        rack=r.rack, log_dirs=[d for d in r.log_dirs if d is not None],
        previous_broker_epoch=int(r.previous_broker_epoch),
    )


def response(reply: BrokerRegistrationReply) -> kresp.BrokerRegistrationResponse:
    return P.BrokerRegistrationResponse(
        throttle_time=NO_THROTTLE, error_code=reply.error, broker_epoch=reply.broker_epoch)


def reply_of(r: kresp.BrokerRegistrationResponse) -> BrokerRegistrationReply:
    return BrokerRegistrationReply(error=r.error_code, broker_epoch=int(r.broker_epoch))


def error_code_of(r: kresp.BrokerRegistrationResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode) -> kresp.BrokerRegistrationResponse:
    return response(BrokerRegistrationReply(error=code))


async def handle(node: ControllerNode, ctx: Any, r: kreq.BrokerRegistrationRequest
                 ) -> kresp.BrokerRegistrationResponse:
    try:
        return response(await active_service(node).register_broker(parse(r)))
    except KafkaError as exc:
        return response(BrokerRegistrationReply(error=exc.error_code, message=exc.message))
