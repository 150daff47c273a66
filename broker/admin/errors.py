"""Kafka errors -> gRPC status codes, with messages a person can act on.

Every RPC body raises `KafkaError` (from the controller, the replica manager, the config
code) or `AdminError` (a status of its own); `rpc_errors` turns both into an aborted call.
Unexpected exceptions become INTERNAL with the exception's text, and are logged.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError

log = structlog.get_logger(__name__)
S = grpc.StatusCode

_CODES: dict[ErrorCode, grpc.StatusCode] = {
    ErrorCode.unknown_topic_or_partition: S.NOT_FOUND,
    ErrorCode.unknown_topic_id: S.NOT_FOUND,
    ErrorCode.group_id_not_found: S.NOT_FOUND,
    ErrorCode.broker_id_not_registered: S.NOT_FOUND,
    ErrorCode.topic_already_exists: S.ALREADY_EXISTS,
    ErrorCode.invalid_topic_exception: S.INVALID_ARGUMENT,
    ErrorCode.invalid_partitions: S.INVALID_ARGUMENT,
    ErrorCode.invalid_replication_factor: S.INVALID_ARGUMENT,
    ErrorCode.invalid_replica_assignment: S.INVALID_ARGUMENT,
    ErrorCode.invalid_config: S.INVALID_ARGUMENT,
    ErrorCode.invalid_request: S.INVALID_ARGUMENT,
    ErrorCode.policy_violation: S.INVALID_ARGUMENT,
    ErrorCode.invalid_required_acks: S.INVALID_ARGUMENT,
    ErrorCode.invalid_record: S.INVALID_ARGUMENT,
    ErrorCode.invalid_timestamp: S.INVALID_ARGUMENT,
    ErrorCode.corrupt_message: S.INVALID_ARGUMENT,
    ErrorCode.message_too_large: S.INVALID_ARGUMENT,
    ErrorCode.record_list_too_large: S.INVALID_ARGUMENT,
    ErrorCode.unsupported_compression_type: S.INVALID_ARGUMENT,
    ErrorCode.offset_out_of_range: S.OUT_OF_RANGE,
    ErrorCode.not_controller: S.UNAVAILABLE,
    ErrorCode.broker_not_available: S.UNAVAILABLE,
    ErrorCode.leader_not_available: S.UNAVAILABLE,
    ErrorCode.not_enough_replicas: S.UNAVAILABLE,
    ErrorCode.not_enough_replicas_after_append: S.UNAVAILABLE,
    ErrorCode.coordinator_not_available: S.UNAVAILABLE,
    ErrorCode.coordinator_load_in_progress: S.UNAVAILABLE,
    ErrorCode.kafka_storage_error: S.UNAVAILABLE,
    ErrorCode.eligible_leaders_not_available: S.UNAVAILABLE,
    ErrorCode.preferred_leader_not_available: S.UNAVAILABLE,
    ErrorCode.request_timed_out: S.DEADLINE_EXCEEDED,
    ErrorCode.not_leader_or_follower: S.FAILED_PRECONDITION,
    ErrorCode.fenced_leader_epoch: S.FAILED_PRECONDITION,
    ErrorCode.no_reassignment_in_progress: S.FAILED_PRECONDITION,
    ErrorCode.reassignment_in_progress: S.FAILED_PRECONDITION,
    ErrorCode.topic_deletion_disabled: S.FAILED_PRECONDITION,
    ErrorCode.non_empty_group: S.FAILED_PRECONDITION,
    ErrorCode.election_not_needed: S.FAILED_PRECONDITION,
    ErrorCode.cluster_authorization_failed: S.PERMISSION_DENIED,
    ErrorCode.topic_authorization_failed: S.PERMISSION_DENIED,
    ErrorCode.group_authorization_failed: S.PERMISSION_DENIED,
    ErrorCode.security_disabled: S.FAILED_PRECONDITION,
    ErrorCode.invalid_update_version: S.FAILED_PRECONDITION,
    ErrorCode.feature_update_failed: S.FAILED_PRECONDITION,
}

# What to do about it, where the Kafka message alone does not say.
_HINTS: dict[ErrorCode, str] = {
    ErrorCode.not_controller: "this node is not the active controller; retry, or send the "
                              "request to the active controller's admin listener",
    ErrorCode.not_enough_replicas: "wait for replicas to rejoin the ISR, or lower "
                                   "min.insync.replicas / use acks=1",
    ErrorCode.topic_deletion_disabled: "set delete.topic.enable=true on the controllers",
}


class AdminError(Exception):
    """An RPC failure with its own gRPC status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status_of(exc: KafkaError) -> tuple[grpc.StatusCode, str]:
    code = _CODES.get(exc.error_code, S.INTERNAL)
    text = exc.message or exc.error_code.name.upper()
    hint = _HINTS.get(exc.error_code)
    detail = f"{text} ({exc.error_code.name.upper()})"
    return code, f"{detail}: {hint}" if hint else detail


def from_kafka(exc: KafkaError) -> AdminError:
    return AdminError(*status_of(exc))


def _translate(exc: BaseException, method: str) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, AdminError):
        return exc.code, exc.message
    if isinstance(exc, KafkaError):
        return status_of(exc)
    if isinstance(exc, TimeoutError):
        return S.DEADLINE_EXCEEDED, f"{method} timed out: retry, or check the node's health"
    log.exception("admin_rpc_failed", method=method)
    return S.INTERNAL, f"{method} failed unexpectedly: {type(exc).__name__}: {exc}"


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
G = TypeVar("G", bound=Callable[..., AsyncIterator[Any]])


def rpc_errors(fn: F) -> F:
    """Wrap a unary RPC method: KafkaError/AdminError/other -> context.abort(status)."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            code, message = _translate(exc, fn.__name__)
            await context.abort(code, message)

    return wrapper  # type: ignore[return-value]


def stream_errors(fn: G) -> G:
    """The same for a server-streaming RPC method."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any,
                      context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in fn(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            code, message = _translate(exc, fn.__name__)
            await context.abort(code, message)

    return wrapper  # type: ignore[return-value]
