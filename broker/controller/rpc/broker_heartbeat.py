# mypy: disable-error-code="no-any-return"
"""BrokerHeartbeat (API 63) on the controller listener (KIP-631)."""

from __future__ import annotations

from typing import Any

from kio.schema.broker_heartbeat.v2 import request as kreq
from kio.schema.broker_heartbeat.v2 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerHeartbeatReply, BrokerHeartbeatRequest
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 63
VERSION = 2  # v2: cordoned_log_dirs (KIP-1066)
# v1 is still served: during a rolling upgrade brokers of the previous build heartbeat at v1
MIN_VERSION = 1


def request(req: BrokerHeartbeatRequest) -> kreq.BrokerHeartbeatRequest:
    return Q.BrokerHeartbeatRequest(
        broker_id=req.broker_id, broker_epoch=req.broker_epoch,
        current_metadata_offset=req.current_metadata_offset, want_fence=req.want_fence,
        want_shut_down=req.want_shut_down, offline_log_dirs=tuple(req.offline_log_dirs),
        cordoned_log_dirs=(None if req.cordoned_log_dirs is None
                           else tuple(req.cordoned_log_dirs)))


def parse(r: kreq.BrokerHeartbeatRequest) -> BrokerHeartbeatRequest:
    cordoned = getattr(r, "cordoned_log_dirs", None)  # v2 only
    return BrokerHeartbeatRequest(
        broker_id=int(r.broker_id), broker_epoch=int(r.broker_epoch),
        current_metadata_offset=int(r.current_metadata_offset), want_fence=r.want_fence,
        want_shut_down=r.want_shut_down,
        offline_log_dirs=tuple(d for d in r.offline_log_dirs if d is not None),
        cordoned_log_dirs=(None if cordoned is None else
                           tuple(d for d in cordoned if d is not None)))


def response(reply: BrokerHeartbeatReply, request: Any = None) -> kresp.BrokerHeartbeatResponse:
    """The answer, in the request's version (v1 and v2 answers hold the same fields)."""
    cls = (P.BrokerHeartbeatResponse if request is None
           else response_module(request).BrokerHeartbeatResponse)
    return cls(
        throttle_time=NO_THROTTLE, error_code=reply.error, is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced, should_shut_down=reply.should_shut_down)


def reply_of(r: kresp.BrokerHeartbeatResponse) -> BrokerHeartbeatReply:
    return BrokerHeartbeatReply(error=r.error_code, is_caught_up=r.is_caught_up,
                                is_fenced=r.is_fenced, should_shut_down=r.should_shut_down)


def error_code_of(r: kresp.BrokerHeartbeatResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode) -> kresp.BrokerHeartbeatResponse:
    return response(BrokerHeartbeatReply(error=code), request)


async def handle(node: ControllerNode, ctx: Any, r: kreq.BrokerHeartbeatRequest
                 ) -> kresp.BrokerHeartbeatResponse:
    try:
        # The connection lets the controller fence a broker whose process died as soon as
        # that connection closes (ControllerService.connection_closed).
        connection_id = ctx.connection_id if ctx is not None else ""
        return response(await active_service(node).broker_heartbeat(
            parse(r), connection_id=connection_id), r)
    except KafkaError as exc:
        return response(BrokerHeartbeatReply(error=exc.error_code, message=exc.message), r)
