# mypy: disable-error-code="no-any-return"
"""AlterClientQuotas (API 49), handled by broker/controller/client_quota_control.py. The
codec both the client-facing handler (broker/handlers/alter_client_quotas.py, versions
0-1) and the controller listener (v1) use; the answer is of the request's version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.alter_client_quotas.v1 import request as kreq
from kio.schema.errors import ErrorCode

from broker.controller.api import ControllerApi
from broker.controller.client_quota_control import QuotaAlteration, QuotaAlterResult, QuotaOp
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.quotas.core import make_entity

Q: Any = kreq

API_KEY = 49
VERSION = 1


def request(alterations: Sequence[QuotaAlteration],
            validate_only: bool = False) -> kreq.AlterClientQuotasRequest:
    return Q.AlterClientQuotasRequest(validate_only=validate_only, entries=tuple(
        Q.EntryData(
            entity=tuple(Q.EntityData(entity_type=t, entity_name=n) for t, n in a.entity),
            ops=tuple(Q.OpData(key=o.key, value=0.0 if o.value is None else o.value,
                               remove=o.value is None) for o in a.ops))
        for a in alterations))


def parse(r: Any) -> tuple[list[QuotaAlteration], bool]:
    """Any version's request (v0 and v1 carry the same fields)."""
    return ([QuotaAlteration(
        make_entity((e.entity_type, e.entity_name) for e in entry.entity),
        tuple(QuotaOp(o.key, None if o.remove else float(o.value)) for o in entry.ops))
        for entry in r.entries], bool(r.validate_only))


def response(request: Any, results: Sequence[QuotaAlterResult]) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    return build(mod.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(
        build(mod.EntryData, error_code=x.error, error_message=x.message, entity=tuple(
            build(mod.EntityData, entity_type=t, entity_name=n) for t, n in x.entity))
        for x in results))


def results_of(r: Any) -> list[QuotaAlterResult]:
    return [QuotaAlterResult(make_entity((e.entity_type, e.entity_name) for e in x.entity),
                             x.error_code, x.error_message) for x in r.entries]


def error_code_of(r: Any) -> ErrorCode:
    return next((x.error_code for x in r.entries if x.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    """Every entry of `r` answered `code`."""
    alterations, _ = parse(r)
    return response(r, [QuotaAlterResult(a.entity, code, message) for a in alterations])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, await controller.alter_client_quotas(*parse(r)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    return await on_active(node, r, serve, failed)
