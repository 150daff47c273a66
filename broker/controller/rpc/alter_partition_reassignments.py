# mypy: disable-error-code="no-any-return"
"""AlterPartitionReassignments (API 45, KIP-455): start (target replicas) or cancel (null
replicas) a reassignment, per partition. The codec both the client-facing handler
(broker/handlers/alter_partition_reassignments.py, versions 0-1) and the controller
listener (v0, below) use; the answer is of the request's version (v1 echoes
AllowReplicationFactorChange)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.alter_partition_reassignments.v0 import request as kreq
from kio.schema.alter_partition_reassignments.v0 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.api import ControllerApi
from broker.controller.deadline import within
from broker.controller.requests import ReassignmentResult
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 45
VERSION = 0
Reassignment = tuple[str, int, Sequence[int] | None]


def request(items: Sequence[Reassignment],
            timeout_ms: int) -> kreq.AlterPartitionReassignmentsRequest:
    grouped: dict[str, list[kreq.ReassignablePartition]] = {}
    for topic, idx, replicas in items:
        grouped.setdefault(topic, []).append(Q.ReassignablePartition(
            partition_index=idx, replicas=None if replicas is None else tuple(replicas)))
    return Q.AlterPartitionReassignmentsRequest(
        timeout=duration(timeout_ms),
        topics=tuple(Q.ReassignableTopic(name=t, partitions=tuple(ps))
                     for t, ps in grouped.items()))


def parse(r: kreq.AlterPartitionReassignmentsRequest) -> list[Reassignment]:
    return [(t.name, int(p.partition_index),
             None if p.replicas is None else [int(b) for b in p.replicas])
            for t in r.topics for p in t.partitions]


def response(request: Any, results: Sequence[ReassignmentResult],
             error: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    grouped: dict[str, list[ReassignmentResult]] = {}
    for x in results:
        grouped.setdefault(x.topic, []).append(x)
    return build(
        mod.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE,
        allow_replication_factor_change=bool(
            getattr(request, "allow_replication_factor_change", True)),
        error_code=error, error_message=message,
        responses=tuple(build(mod.ReassignableTopicResponse, name=t, partitions=tuple(
            build(mod.ReassignablePartitionResponse, partition_index=x.partition,
                  error_code=x.error, error_message=x.message) for x in xs))
            for t, xs in grouped.items()))


def results_of(r: kresp.AlterPartitionReassignmentsResponse) -> list[ReassignmentResult]:
    if r.error_code is not ErrorCode.none:
        raise KafkaError(r.error_code, r.error_message or "")
    return [ReassignmentResult(t.name, int(p.partition_index), p.error_code, p.error_message)
            for t in r.responses for p in t.partitions]


def error_code_of(r: kresp.AlterPartitionReassignmentsResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    """A refused request (CLUSTER_AUTHORIZATION_FAILED, ...): the top-level error and each
    named partition's, as Kafka's AlterPartitionReassignmentsRequest.getErrorResponse."""
    return response(r, [ReassignmentResult(t.name, int(p.partition_index), code, None)
                        for t in r.topics or () for p in t.partitions], code)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    return response(r, [], code, message)


async def serve(controller: ControllerApi, r: Any, items: Sequence[Reassignment] | None = None,
                refused: Sequence[ReassignmentResult] = ()) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener:
    `items` (default: all of `r`'s) go to the controller, `refused` are answered as given."""
    wanted = parse(r) if items is None else items
    results: list[ReassignmentResult] = []
    if wanted:
        try:
            results = await within(lambda: controller.alter_partition_reassignments(wanted),
                                   to_ms(r.timeout, 0))
        except KafkaError as exc:
            return failed(r, exc.error_code, exc.message or None)
    return response(r, [*results, *refused])


async def handle(node: ControllerNode, ctx: Any, r: kreq.AlterPartitionReassignmentsRequest) -> Any:
    return await on_active(node, r, serve, failed)
