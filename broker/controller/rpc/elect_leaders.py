# mypy: disable-error-code="no-any-return"
"""ElectLeaders (API 43, KIP-460): preferred or unclean elections for the named partitions,
or for every partition when none are named. The codec both the client-facing handler
(broker/handlers/elect_leaders.py, versions 0-2) and the controller listener (v2) use;
the answer is of the request's version. v0 has no election type: PREFERRED."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.elect_leaders.v2 import request as kreq
from kio.schema.elect_leaders.v2 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.api import ControllerApi
from broker.controller.deadline import within
from broker.controller.requests import ElectionType, ElectLeadersResult
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms
from broker.protocol.kio_build import build, response_module

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq

API_KEY = 43
VERSION = 2


def request(election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None,
            timeout_ms: int) -> kreq.ElectLeadersRequest:
    grouped: dict[str, list[int]] = {}
    for topic, idx in partitions or ():
        grouped.setdefault(topic, []).append(idx)
    return Q.ElectLeadersRequest(
        election_type=int(election_type),
        topic_partitions=None if partitions is None else tuple(
            Q.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in grouped.items()),
        timeout=duration(timeout_ms))


def partitions_of(r: Any) -> list[tuple[str, int]] | None:
    """The partitions asked for, None for every partition."""
    if r.topic_partitions is None:
        return None
    return [(t.topic, int(p)) for t in r.topic_partitions for p in t.partitions]


def parse(r: Any) -> tuple[ElectionType, list[tuple[str, int]] | None]:
    """Any version's request; an unknown election type is INVALID_REQUEST."""
    code = int(getattr(r, "election_type", ElectionType.PREFERRED))
    try:
        election_type = ElectionType(code)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"unknown election type {code}") from None
    return election_type, partitions_of(r)


def response(request: Any, results: Sequence[ElectLeadersResult],
             error: ErrorCode = ErrorCode.none) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    grouped: dict[str, list[ElectLeadersResult]] = {}
    for x in results:
        grouped.setdefault(x.topic, []).append(x)
    return build(
        mod.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=error,
        replica_election_results=tuple(
            build(mod.ReplicaElectionResult, topic=t, partition_result=tuple(
                build(mod.PartitionResult, partition_id=x.partition, error_code=x.error,
                      error_message=x.message) for x in xs))
            for t, xs in grouped.items()))


def results_of(r: kresp.ElectLeadersResponse) -> list[ElectLeadersResult]:
    if r.error_code is not ErrorCode.none:
        raise KafkaError(r.error_code, "ElectLeaders failed at the controller")
    return [ElectLeadersResult(t.topic, int(p.partition_id), p.error_code, p.error_message)
            for t in r.replica_election_results for p in t.partition_result]


def error_code_of(r: kresp.ElectLeadersResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: kreq.ElectLeadersRequest, code: ErrorCode) -> Any:
    """A refused request (CLUSTER_AUTHORIZATION_FAILED, ...): the top-level error and each
    named partition's, as Kafka's ElectLeadersRequest.getErrorResponse answers."""
    return response(r, [ElectLeadersResult(t, p, code) for t, p in partitions_of(r) or ()],
                    code)


def failed(r: Any, code: ErrorCode, message: str | None = None) -> Any:
    """A whole-request failure: the top-level error, and v0 (which has none) each
    partition's."""
    if int(r.__version__) > 0:
        return response(r, [], code)
    return response(r, [ElectLeadersResult(t, p, code) for t, p in partitions_of(r) or ()],
                    code)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        election_type, partitions = parse(r)
        return response(r, await within(
            lambda: controller.elect_leaders(election_type, partitions), to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return failed(r, exc.error_code)


async def handle(node: ControllerNode, ctx: Any, r: kreq.ElectLeadersRequest) -> Any:
    return await on_active(node, r, serve, failed)
