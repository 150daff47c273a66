# mypy: disable-error-code="no-any-return"
"""IncrementalAlterConfigs (API 44, KIP-339). The codec both the client-facing handler
(broker/handlers/incremental_alter_configs.py, versions 0-1) and the controller listener
(v1) use; the answer is of the request's version. An operation code Kafka does not define
goes through as it is: the controller answers it INVALID_REQUEST for its resource."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as kreq
from kio.schema.incremental_alter_configs.v1 import response as kresp

from broker.controller.requests import (
    AlterConfigOp,
    AlterConfigsResult,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc._common import ControllerNode, active_service
from broker.controller.rpc.alter_configs import (
    config_results,
    failed_results,
    not_controller_in,
    resource_responses,
)
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

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


def parse(r: Any) -> list[IncrementalAlterConfigsResource]:
    """Any version's request."""
    return [IncrementalAlterConfigsResource(
        ConfigResource(int(x.resource_type), x.resource_name),
        [(c.name, cast(AlterConfigOp, int(c.config_operation)), c.value) for c in x.configs])
        for x in r.resources]


def response(request: Any, results: Sequence[AlterConfigsResult]) -> Any:
    """The answer to `request`, of its version: one entry per resource, in order."""
    mod = response_module(request)
    return build(mod.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE,
                 responses=resource_responses(mod, results))


def results_of(r: kresp.IncrementalAlterConfigsResponse) -> list[AlterConfigsResult]:
    return config_results(r.responses)


def error_code_of(r: kresp.IncrementalAlterConfigsResponse) -> ErrorCode:
    return not_controller_in(r.responses)


def _failed(r: kreq.IncrementalAlterConfigsRequest, code: ErrorCode, message: str | None
            ) -> Any:
    return response(r, failed_results(r.resources, code, message))


def error_response(ctx: Any, r: kreq.IncrementalAlterConfigsRequest, code: ErrorCode) -> Any:
    return _failed(r, code, None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.IncrementalAlterConfigsRequest) -> Any:
    try:
        service = active_service(node)
        return response(r, await service.incremental_alter_configs(
            parse(r), validate_only=r.validate_only))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
