# mypy: disable-error-code="no-any-return"
"""AlterConfigs (API 33, the legacy replace-all form). The codec both the client-facing
handler (broker/handlers/alter_configs.py, versions 0-2) and the controller listener (v2)
use; the answer is of the request's version. The per-resource answer is shared with
IncrementalAlterConfigs (broker/controller/rpc/incremental_alter_configs.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.alter_configs.v2 import request as kreq
from kio.schema.alter_configs.v2 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterConfigsResource, AlterConfigsResult, ConfigResource
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 33
VERSION = 2


def request(resources: Sequence[AlterConfigsResource],
            validate_only: bool) -> kreq.AlterConfigsRequest:
    return Q.AlterConfigsRequest(
        resources=tuple(Q.AlterConfigsResource(
            resource_type=r.resource.resource_type, resource_name=r.resource.resource_name,
            configs=tuple(Q.AlterableConfig(name=k, value=v) for k, v in r.configs.items()))
            for r in resources),
        validate_only=validate_only)


def parse(r: Any) -> list[AlterConfigsResource]:
    """Any version's request."""
    return [AlterConfigsResource(ConfigResource(int(x.resource_type), x.resource_name),
                                 {c.name: c.value for c in x.configs})
            for x in r.resources]


def response(request: Any, results: Sequence[AlterConfigsResult]) -> Any:
    """The answer to `request`, of its version: one entry per resource, in order."""
    mod = response_module(request)
    return build(mod.AlterConfigsResponse, throttle_time=NO_THROTTLE,
                 responses=resource_responses(mod, results))


def results_of(r: kresp.AlterConfigsResponse) -> list[AlterConfigsResult]:
    return config_results(r.responses)


def error_code_of(r: kresp.AlterConfigsResponse) -> ErrorCode:
    return not_controller_in(r.responses)


def _failed(r: kreq.AlterConfigsRequest, code: ErrorCode, message: str | None) -> Any:
    return response(r, failed_results(r.resources, code, message))


# Shared with IncrementalAlterConfigs, whose answers have the same per-resource shape.

def resource_responses(mod: Any, results: Sequence[AlterConfigsResult]) -> tuple[Any, ...]:
    """Per-resource answers of kio response module `mod` (AlterConfigsResourceResponse),
    the message only with an error."""
    return tuple(
        build(mod.AlterConfigsResourceResponse, error_code=x.error,
              error_message=x.message if x.error is not ErrorCode.none else None,
              resource_type=x.resource.resource_type, resource_name=x.resource.resource_name)
        for x in results)


def config_results(responses: Sequence[Any]) -> list[AlterConfigsResult]:
    return [AlterConfigsResult(ConfigResource(int(x.resource_type), x.resource_name),
                               x.error_code, x.error_message) for x in responses]


def not_controller_in(responses: Sequence[Any]) -> ErrorCode:
    return next((x.error_code for x in responses if x.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def failed_results(resources: Sequence[Any], code: ErrorCode, message: str | None
                   ) -> list[AlterConfigsResult]:
    return [AlterConfigsResult(ConfigResource(int(x.resource_type), x.resource_name),
                               code, message) for x in resources]


def error_response(ctx: Any, r: kreq.AlterConfigsRequest, code: ErrorCode) -> Any:
    return _failed(r, code, None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.AlterConfigsRequest) -> Any:
    try:
        return response(r, await active_service(node).alter_configs(
            parse(r), validate_only=r.validate_only))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
