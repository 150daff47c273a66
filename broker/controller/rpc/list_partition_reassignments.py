# mypy: disable-error-code="no-any-return"
"""ListPartitionReassignments (API 46, KIP-455): the ongoing reassignments as the active
controller's committed image holds them. The codec both the client-facing handler
(broker/handlers/list_partition_reassignments.py) and the controller listener use; the
answer is of the request's version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import request as kreq
from kio.schema.list_partition_reassignments.v0 import response as kresp

from broker.controller.api import ControllerApi
from broker.controller.deadline import within
from broker.controller.requests import OngoingReassignment
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 46
VERSION = 0


def request(partitions: Sequence[tuple[str, int]] | None,
            timeout_ms: int) -> kreq.ListPartitionReassignmentsRequest:
    grouped: dict[str, list[int]] = {}
    for topic, idx in partitions or ():
        grouped.setdefault(topic, []).append(idx)
    return Q.ListPartitionReassignmentsRequest(
        timeout=duration(timeout_ms),
        topics=None if partitions is None else tuple(
            Q.ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(ps))
            for t, ps in grouped.items()))


def parse(r: kreq.ListPartitionReassignmentsRequest) -> list[tuple[str, int]] | None:
    if r.topics is None:
        return None
    return [(t.name, int(i)) for t in r.topics for i in t.partition_indexes]


def response(request: Any, ongoing: Sequence[OngoingReassignment],
             error: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    grouped: dict[str, list[OngoingReassignment]] = {}
    for x in ongoing:
        grouped.setdefault(x.topic, []).append(x)
    return build(
        mod.ListPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE, error_code=error, error_message=message,
        topics=tuple(build(mod.OngoingTopicReassignment, name=t, partitions=tuple(
            build(mod.OngoingPartitionReassignment,
                  partition_index=x.partition, replicas=x.replicas,
                  adding_replicas=x.adding_replicas, removing_replicas=x.removing_replicas)
            for x in xs)) for t, xs in grouped.items()))


def results_of(r: kresp.ListPartitionReassignmentsResponse) -> list[OngoingReassignment]:
    if r.error_code is not ErrorCode.none:
        raise KafkaError(r.error_code, r.error_message or "")
    return [OngoingReassignment(t.name, int(p.partition_index),
                                tuple(int(b) for b in p.replicas),
                                tuple(int(b) for b in p.adding_replicas),
                                tuple(int(b) for b in p.removing_replicas))
            for t in r.topics for p in t.partitions]


def error_code_of(r: kresp.ListPartitionReassignmentsResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return response(r, [], code)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    return response(r, [], code, message)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    partitions = parse(r)
    try:
        return response(r, await within(
            lambda: controller.list_partition_reassignments(partitions), to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: kreq.ListPartitionReassignmentsRequest) -> Any:
    return await on_active(node, r, serve, failed)
