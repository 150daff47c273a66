"""ApiVersions (key 18, v0-v4): the API version ranges this listener advertises.

A request at a version above what we support never reaches `handle`: the server answers it
with `unsupported_version_response` at v0 (UNSUPPORTED_VERSION plus our ranges, so the client
retries with a version we know), as Kafka does. Tagged fields (supported_features, ...) are left
at their defaults, so kio does not write them (kcat's librdkafka 2.0.2 fails on them).
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32Timedelta

from broker.protocol.api import API_VERSIONS, ApiTable
from broker.protocol.durations import NO_THROTTLE
from broker.server.context import RequestContext

API_KEY = API_VERSIONS

# Kafka's ApiVersionsRequest.isValid for client_software_name/version (v3+).
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@functools.lru_cache(maxsize=64)
def build_response(version: int, apis: ApiTable, error_code: ErrorCode) -> Any:
    """Cached: kio entities are immutable, and a listener's table does not change."""
    schema = load_response_schema(API_VERSIONS, version)
    module = importlib.import_module(schema.__module__)
    api_version_cls = module.ApiVersion
    keys = tuple(
        api_version_cls(
            api_key=i16(r.api_key), min_version=i16(r.min_version), max_version=i16(r.max_version)
        )
        for r in apis
    )
    if version == 0:
        return schema(error_code=error_code, api_keys=keys)  # type: ignore[call-arg]
    return schema(  # type: ignore[call-arg]
        error_code=error_code, api_keys=keys, throttle_time=i32Timedelta.parse(NO_THROTTLE)
    )


def unsupported_version_response(apis: ApiTable) -> Any:
    """The v0 answer to an ApiVersions request of a version we do not support."""
    return build_response(0, apis, ErrorCode.unsupported_version)


def is_valid_request(request: Any) -> bool:
    if int(request.__version__) < 3:
        return True
    return bool(
        _SOFTWARE_RE.fullmatch(request.client_software_name)
        and _SOFTWARE_RE.fullmatch(request.client_software_version)
    )


async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
    if not is_valid_request(request):
        return build_response(ctx.api_version, ApiTable([]), ErrorCode.invalid_request)
    return build_response(ctx.api_version, ctx.apis, ErrorCode.none)


def error_response(ctx: RequestContext, request: Any, error_code: ErrorCode) -> Any:
    return build_response(ctx.api_version, ApiTable([]), error_code)
