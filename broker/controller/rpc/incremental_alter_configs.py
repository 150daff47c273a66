# mypy: disable-error-code="no-any-return"
"""IncrementalAlterConfigs (API 44, KIP-339) on the controller listener."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as kreq
from kio.schema.incremental_alter_configs.v1 import response as kresp

from broker.controller.requests import (
    AlterConfigOp,
    AlterConfigsResult,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc._common import active_service
from broker.controller.rpc.alter_configs import (
    config_results,
    failed_results,
    not_controller_in,
    resource_responses,
)
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 44
VERSION = 1


def request(resources: Sequence[IncrementalAlterConfigsResource],
            validate_only: bool) -> kreq.IncrementalAlterConfigsRequest:
    return Q.IncrementalAlterConfigsRequest(
        resources=tuple(Q.AlterConfigsResource(
            resource_type=r.resource.resource_type, resource_name=r.resource.resource_name,
            configs=tuple(Q.AlterableConfig(name=n, config_operation=int(op), value=v)
                          for n, op, v in r.ops))
            for r in resources),
        validate_only=validate_only)


def parse(r: kreq.IncrementalAlterConfigsRequest) -> list[IncrementalAlterConfigsResource]:
    out = []
    for x in r.resources:
        ops = []
        for c in x.configs:
            try:
                op = AlterConfigOp(int(c.config_operation))
            except ValueError:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"unknown config operation {int(c.config_operation)}") from None
            ops.append((c.name, op, c.value))
        out.append(IncrementalAlterConfigsResource(
            ConfigResource(int(x.resource_type), x.resource_name), ops))
    return out


def response(results: Sequence[AlterConfigsResult]) -> kresp.IncrementalAlterConfigsResponse:
    return P.IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE,
                                             responses=resource_responses(P, results))


def results_of(r: kresp.IncrementalAlterConfigsResponse) -> list[AlterConfigsResult]:
    return config_results(r.responses)


def error_code_of(r: kresp.IncrementalAlterConfigsResponse) -> ErrorCode:
    return not_controller_in(r.responses)


def _failed(r: kreq.IncrementalAlterConfigsRequest, code: ErrorCode, message: str | None
            ) -> kresp.IncrementalAlterConfigsResponse:
    return response(failed_results(r.resources, code, message))


def error_response(ctx: Any, r: kreq.IncrementalAlterConfigsRequest, code: ErrorCode
                   ) -> kresp.IncrementalAlterConfigsResponse:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: kreq.IncrementalAlterConfigsRequest
                 ) -> kresp.IncrementalAlterConfigsResponse:
    try:
        service = active_service(node)
        return response(await service.incremental_alter_configs(
            parse(r), validate_only=r.validate_only))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
