# mypy: disable-error-code="no-any-return"
"""ControllerRegistration (API 70) on the controller listener (KIP-919): every controller
registers its listeners and supported feature ranges with the active controller, which
writes a RegisterController record (cluster_control.py); UpdateFeatures checks them."""

from __future__ import annotations

from typing import Any

from kio.schema.controller_registration.v0 import request as kreq
from kio.schema.controller_registration.v0 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import ApiError, ControllerRegistrationRequest
from broker.controller.rpc._common import (
    SECURITY_PROTOCOL_IDS,
    SECURITY_PROTOCOL_NAMES,
    ControllerNode,
    active_service,
)
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

Q: Any = kreq
P: Any = kresp

API_KEY = 70
VERSION = 0


def request(req: ControllerRegistrationRequest) -> Any:
    return Q.ControllerRegistrationRequest(
        controller_id=req.controller_id, incarnation_id=req.incarnation_id,
        zk_migration_ready=False,
        listeners=tuple(Q.Listener(name=n, host=h, port=p,
                                   security_protocol=SECURITY_PROTOCOL_IDS.get(sp, 0))
                        for n, h, p, sp in req.listeners),
        features=tuple(Q.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                       for n, lo, hi in req.features))


def parse(r: Any) -> ControllerRegistrationRequest:
    if r.incarnation_id is None:
        raise KafkaError(ErrorCode.invalid_request,
                         "a controller registration needs an incarnation id")
    return ControllerRegistrationRequest(
        controller_id=int(r.controller_id), incarnation_id=r.incarnation_id,
        listeners=[(x.name, x.host, int(x.port),
                    SECURITY_PROTOCOL_NAMES.get(int(x.security_protocol), "PLAINTEXT"))
                   for x in r.listeners],
        features=[(f.name, int(f.min_supported_version), int(f.max_supported_version))
                  for f in r.features])


def response(error: ApiError) -> Any:
    return P.ControllerRegistrationResponse(throttle_time=NO_THROTTLE, error_code=error.error,
                                            error_message=error.message)


def reply_of(r: Any) -> ApiError:
    return ApiError(r.error_code, r.error_message)


def error_code_of(r: Any) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode) -> Any:
    return response(ApiError(code))


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    try:
        return response(await active_service(node).register_controller(parse(r)))
    except KafkaError as exc:
        return response(ApiError(exc.error_code, exc.message or None))
