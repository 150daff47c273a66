# mypy: disable-error-code="no-any-return"
"""UpdateFeatures (API 57), handled by broker/controller/feature_control.py. The codec both
the client-facing handler (broker/handlers/update_features.py, versions 0-2), the controller
listener (v2) and a broker's ControllerChannel use; the answer is of the request's version.
v0-v1 answer per feature (each NONE, the outcome in the top-level error, as Kafka 3.9+
answers) when the update succeeds, and with no features when it fails, as Kafka 4.4 does;
v2 has the top-level error only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.update_features.v2 import request as kreq
from kio.static.primitive import i8, i16

from broker.controller.api import ControllerApi
from broker.controller.feature_control import FeatureUpdate, UpgradeType
from broker.controller.requests import ApiError
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration
from broker.protocol.kio_build import build, response_module

Q: Any = kreq

API_KEY = 57
VERSION = 2


def request(updates: Sequence[FeatureUpdate], validate_only: bool = False,
            timeout_ms: int = 60_000) -> Any:
    return Q.UpdateFeaturesRequest(
        timeout=duration(timeout_ms), validate_only=validate_only,
        feature_updates=tuple(Q.FeatureUpdateKey(feature=u.feature,
                                                 max_version_level=i16(u.level),
                                                 upgrade_type=i8(u.upgrade_type))
                              for u in updates))


def parse(r: Any) -> tuple[list[FeatureUpdate], bool]:
    """Any version's request. v0 has allow_downgrade instead of upgrade_type (downgrade
    meaning SAFE_DOWNGRADE, as Kafka maps it) and no validate_only."""
    out = []
    for u in r.feature_updates:
        if hasattr(u, "upgrade_type"):
            kind = int(u.upgrade_type)
        else:
            kind = int(UpgradeType.SAFE_DOWNGRADE if getattr(u, "allow_downgrade", False)
                       else UpgradeType.UPGRADE)
        out.append(FeatureUpdate(str(u.feature), int(u.max_version_level), kind))
    return out, bool(getattr(r, "validate_only", False))


def response(r: Any, error: ApiError) -> Any:
    """The answer to `r`, of its version: a refused update lists no features (Kafka 4.4)."""
    mod = response_module(r)
    results = tuple(
        build(mod.UpdatableFeatureResult, feature=str(u.feature), error_code=ErrorCode.none,
              error_message=None)
        for u in r.feature_updates) if (hasattr(mod, "UpdatableFeatureResult")
                                        and error.error is ErrorCode.none) else ()
    return build(mod.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, error_code=error.error,
                 error_message=error.message, results=results)


def reply_of(r: Any) -> ApiError:
    return ApiError(r.error_code, r.error_message)


def error_code_of(r: Any) -> ErrorCode:
    return r.error_code if r.error_code is ErrorCode.not_controller else ErrorCode.none


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    return response(r, ApiError(code, message))


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, await controller.update_features(*parse(r)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    return await on_active(node, r, serve, failed)
