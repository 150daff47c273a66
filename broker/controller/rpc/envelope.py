# mypy: disable-error-code="no-any-return"
"""Envelope (API 58, KIP-590): how a broker sends the active controller a request that
must be served as its client's principal, as Kafka's brokers forward the delegation-token
writes (CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken): the client's
request (header and body), its principal (DefaultPrincipalData, token_authenticated
included) and address. The controller listener serves only those three inside an Envelope
(anything else: INVALID_REQUEST); the answer carries the inner response (header and body).

The inner requests are sent at VERSIONS (what the controller answers in), built and read
by this module; broker/controller/channel.py calls `request`, `error_code_of` and the
`*_reply_of` readers, the controller listener `handle`.
"""

from __future__ import annotations

import io
import ipaddress
from types import SimpleNamespace
from typing import Any

from kio.schema.create_delegation_token.v3 import request as create_req
from kio.schema.default_principal_data.v0.data import DefaultPrincipalData
from kio.schema.envelope.v0 import request as envelope_req
from kio.schema.envelope.v0 import response as envelope_resp
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2 import request as expire_req
from kio.schema.renew_delegation_token.v2 import request as renew_req
from kio.serial import entity_reader, entity_writer

from broker.controller.delegation_token_control import CreateTokenReply, TokenTimeReply
from broker.controller.rpc import delegation_tokens as codec
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol import headers
from broker.protocol.frame_reader import FrameError
from broker.security.delegation_token import join_principal, split_principal

API_KEY = 58
VERSION = 0
CREATE, RENEW, EXPIRE = 38, 39, 40
VERSIONS = {CREATE: 3, RENEW: 2, EXPIRE: 2}
_CLIENT_ID = "skiff-forwarding"

A: Any = envelope_resp
Q: Any = SimpleNamespace(
    EnvelopeRequest=envelope_req.EnvelopeRequest,
    CreateDelegationTokenRequest=create_req.CreateDelegationTokenRequest,
    CreatableRenewers=create_req.CreatableRenewers,
    RenewDelegationTokenRequest=renew_req.RenewDelegationTokenRequest,
    ExpireDelegationTokenRequest=expire_req.ExpireDelegationTokenRequest)


def _principal_bytes(principal: str, token_authenticated: bool) -> bytes:
    kind, name = split_principal(principal)
    buf = io.BytesIO()
    entity_writer(DefaultPrincipalData)(
        buf, DefaultPrincipalData(type_=kind, name=name, token_authenticated=token_authenticated))
    return buf.getvalue()


def _principal_of(data: bytes | None) -> tuple[str, bool]:
    if not data:
        raise KafkaError(ErrorCode.principal_deserialization_failure,
                         "an Envelope without the client's principal")
    try:
        p, _n = entity_reader(DefaultPrincipalData)(data, 0)
    except Exception as exc:  # kio: BufferUnderflow, UnicodeDecodeError, ...
        raise KafkaError(ErrorCode.principal_deserialization_failure, str(exc)) from None
    return join_principal(p.type_, p.name), bool(p.token_authenticated)


def _host_bytes(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def request(inner: Any, principal: str, token_authenticated: bool,
            host: str = "") -> Any:
    """An Envelope around `inner` (a request of VERSIONS[its api key]) sent on behalf of
    `principal`."""
    frame = headers.encode_request(int(inner.__api_key__), int(inner.__version__), 0,
                                   _CLIENT_ID, inner)
    return Q.EnvelopeRequest(request_data=frame[4:],
                             request_principal=_principal_bytes(principal, token_authenticated),
                             client_host_address=_host_bytes(host))


def create_request(owner: str | None, renewers: list[str], max_lifetime_ms: int) -> Any:
    import datetime

    kind, name = split_principal(owner) if owner else (None, None)
    return Q.CreateDelegationTokenRequest(
        owner_principal_type=kind, owner_principal_name=name,
        renewers=tuple(Q.CreatableRenewers(principal_type=split_principal(r)[0],
                                                    principal_name=split_principal(r)[1])
                       for r in renewers),
        max_lifetime=datetime.timedelta(milliseconds=max_lifetime_ms))


def renew_request(hmac: bytes, renew_period_ms: int) -> Any:
    import datetime

    return Q.RenewDelegationTokenRequest(
        hmac=hmac, renew_period=datetime.timedelta(milliseconds=renew_period_ms))


def expire_request(hmac: bytes, expiry_period_ms: int) -> Any:
    import datetime

    return Q.ExpireDelegationTokenRequest(
        hmac=hmac, expiry_time_period=datetime.timedelta(milliseconds=expiry_period_ms))


def error_code_of(r: Any) -> ErrorCode:
    return r.error_code


def _inner(r: Any, api_key: int) -> Any:
    if r.error_code is not ErrorCode.none:
        raise KafkaError(r.error_code, f"the controller refused the Envelope: {r.error_code.name}")
    try:
        return headers.parse_response(bytes(r.response_data or b""), api_key, VERSIONS[api_key])
    except FrameError as exc:
        raise KafkaError(ErrorCode.unknown_server_error,
                         f"unreadable answer from the controller: {exc}") from None


def _ms(value: Any) -> int:
    return round(value.timestamp() * 1000)


def create_reply_of(r: Any) -> CreateTokenReply:
    x = _inner(r, CREATE)
    return CreateTokenReply(
        x.error_code, join_principal(x.principal_type, x.principal_name),
        join_principal(x.token_requester_principal_type, x.token_requester_principal_name),
        _ms(x.issue_timestamp), _ms(x.expiry_timestamp), _ms(x.max_timestamp), x.token_id,
        bytes(x.hmac))


def renew_reply_of(r: Any) -> TokenTimeReply:
    x = _inner(r, RENEW)
    return TokenTimeReply(x.error_code, _ms(x.expiry_timestamp))


def expire_reply_of(r: Any) -> TokenTimeReply:
    x = _inner(r, EXPIRE)
    return TokenTimeReply(x.error_code, _ms(x.expiry_timestamp))


def _answer(code: ErrorCode, inner: Any = None, correlation_id: int = 0) -> Any:
    data = None if inner is None else headers.encode_response(inner, correlation_id)[4:]
    return A.EnvelopeResponse(response_data=data, error_code=code)


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return _answer(code)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    """The controller listener: serve the enveloped token request as its client's
    principal on this node's active controller."""
    try:
        service = active_service(node)
        principal, _token = _principal_of(r.request_principal)
        try:
            parsed = headers.parse_request(bytes(r.request_data))
        except FrameError as exc:
            raise KafkaError(ErrorCode.invalid_request, f"enveloped request: {exc}") from None
        body: Any = parsed.body
        key = parsed.api_key
        if VERSIONS.get(key) != parsed.api_version:
            raise KafkaError(ErrorCode.invalid_request,
                             f"api {key} v{parsed.api_version} is not served in an Envelope")
        from broker.protocol.durations import to_ms

        if key == CREATE:
            owner = (join_principal(body.owner_principal_type or "", body.owner_principal_name)
                     if body.owner_principal_name else None)
            c = await service.create_delegation_token(
                principal, owner,
                [join_principal(x.principal_type, x.principal_name) for x in body.renewers],
                to_ms(body.max_lifetime))
            inner = codec.create_response(body, c.error, c.owner, c.requester, c.issue_ms,
                                      c.expiry_ms, c.max_ms, c.token_id, c.hmac)
        elif key == RENEW:
            t = await service.renew_delegation_token(principal, bytes(body.hmac),
                                                     to_ms(body.renew_period))
            inner = codec.renew_response(body, t.error, t.expiry_ms)
        else:
            t = await service.expire_delegation_token(principal, bytes(body.hmac),
                                                      to_ms(body.expiry_time_period))
            inner = codec.expire_response(body, t.error, t.expiry_ms)
    except KafkaError as exc:
        return _answer(exc.error_code)
    return _answer(ErrorCode.none, inner, parsed.correlation_id)

