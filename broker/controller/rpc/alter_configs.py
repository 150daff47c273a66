# mypy: disable-error-code="no-any-return"
"""AlterConfigs (API 33, the legacy replace-all form) on the controller listener."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.alter_configs.v2 import request as kreq
from kio.schema.alter_configs.v2 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterConfigsResource, AlterConfigsResult, ConfigResource
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

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


def parse(r: kreq.AlterConfigsRequest) -> list[AlterConfigsResource]:
    return [AlterConfigsResource(ConfigResource(int(x.resource_type), x.resource_name),
                                 {c.name: c.value for c in x.configs})
            for x in r.resources]


def response(results: Sequence[AlterConfigsResult]) -> kresp.AlterConfigsResponse:
    return P.AlterConfigsResponse(throttle_time=NO_THROTTLE,
                                  responses=resource_responses(P, results))


def results_of(r: kresp.AlterConfigsResponse) -> list[AlterConfigsResult]:
    return config_results(r.responses)


def error_code_of(r: kresp.AlterConfigsResponse) -> ErrorCode:
    return not_controller_in(r.responses)


def _failed(r: kreq.AlterConfigsRequest, code: ErrorCode, message: str | None
            ) -> kresp.AlterConfigsResponse:
    return response(failed_results(r.resources, code, message))


# Shared with IncrementalAlterConfigs, whose answers have the same per-resource shape.

def resource_responses(p: Any, results: Sequence[AlterConfigsResult]) -> tuple[Any, ...]:
    """Per-resource answers of kio response module `p` (AlterConfigsResourceResponse)."""
    return tuple(
        p.AlterConfigsResourceResponse(
            error_code=x.error, error_message=x.message,
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


def error_response(ctx: Any, r: kreq.AlterConfigsRequest, code: ErrorCode
                   ) -> kresp.AlterConfigsResponse:
    return _failed(r, code, None)


async def handle(node: Any, ctx: Any, r: kreq.AlterConfigsRequest) -> kresp.AlterConfigsResponse:
    try:
        return response(await active_service(node).alter_configs(
            parse(r), validate_only=r.validate_only))
    except KafkaError as exc:
        return _failed(r, exc.error_code, exc.message or None)
