# mypy: disable-error-code="no-any-return"
"""ElectLeaders (API 43, KIP-460) on the controller listener: preferred or unclean
elections for the named partitions, or for every partition when none are named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.elect_leaders.v2 import request as kreq
from kio.schema.elect_leaders.v2 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.deadline import within
from broker.controller.requests import ElectionType, ElectLeadersResult
from broker.controller.rpc._common import active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, duration, to_ms

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

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


def parse(r: kreq.ElectLeadersRequest) -> tuple[ElectionType, list[tuple[str, int]] | None]:
    try:
        election_type = ElectionType(int(r.election_type))
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request,
                         f"unknown election type {int(r.election_type)}") from None
    if r.topic_partitions is None:
        return election_type, None
    return election_type, [(t.topic, int(p)) for t in r.topic_partitions for p in t.partitions]


def response(results: Sequence[ElectLeadersResult], error: ErrorCode = ErrorCode.none
             ) -> kresp.ElectLeadersResponse:
    grouped: dict[str, list[ElectLeadersResult]] = {}
    for x in results:
        grouped.setdefault(x.topic, []).append(x)
    return P.ElectLeadersResponse(
        throttle_time=NO_THROTTLE, error_code=error,
        replica_election_results=tuple(
            P.ReplicaElectionResult(topic=t, partition_result=tuple(
                P.PartitionResult(partition_id=x.partition, error_code=x.error,
                                      error_message=x.message) for x in xs))
            for t, xs in grouped.items()))


def results_of(r: kresp.ElectLeadersResponse) -> list[ElectLeadersResult]:
    if r.error_code is not ErrorCode.none:
        raise KafkaError(r.error_code, "ElectLeaders failed at the controller")
    return [ElectLeadersResult(t.topic, int(p.partition_id), p.error_code, p.error_message)
            for t in r.replica_election_results for p in t.partition_result]


def error_code_of(r: kresp.ElectLeadersResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, r: kreq.ElectLeadersRequest, code: ErrorCode
                   ) -> kresp.ElectLeadersResponse:
    return response([], code)


async def handle(node: Any, ctx: Any, r: kreq.ElectLeadersRequest) -> kresp.ElectLeadersResponse:
    try:
        service = active_service(node)
        election_type, partitions = parse(r)
        return response(await within(
            lambda: service.elect_leaders(election_type, partitions), to_ms(r.timeout, 0)))
    except KafkaError as exc:
        return response([], exc.error_code)
