"""ElectLeaders (API 43, KIP-460), versions 0-2: preferred (or, when asked, unclean)
leader elections, sent on to the active controller.

v0 has no election type (preferred); v1 adds it; v2 is flexible. Null topic partitions
(v1+) means every partition. The answer lists each partition's result; a whole-request
failure (e.g. no controller within the timeout) is the top-level error (v1+) or each
partition's error (v0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.deadline import within as await_controller
from broker.controller.requests import ElectionType, ElectLeadersResult
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 43


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    asked = None if request.topic_partitions is None else [
        (t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    top_error = ErrorCode.none
    try:
        election_type = ElectionType(int(getattr(request, "election_type", 0)))
    except ValueError:
        election_type = None
        top_error = ErrorCode.invalid_request
    results: list[ElectLeadersResult] = []
    if election_type is not None:
        try:
            results = await await_controller(
                lambda: node.controller.elect_leaders(election_type, asked),
                to_ms(request.timeout, 0))
        except KafkaError as exc:
            top_error = exc.error_code
    if top_error is not ErrorCode.none and ctx.api_version == 0:
        results = [ElectLeadersResult(t, p, top_error) for t, p in asked or ()]
    grouped: dict[str, list[ElectLeadersResult]] = {}
    for r in results:
        grouped.setdefault(r.topic, []).append(r)
    return build(
        mod.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=top_error,
        replica_election_results=tuple(
            build(mod.ReplicaElectionResult, topic=topic, partition_result=tuple(
                build(mod.PartitionResult, partition_id=r.partition, error_code=r.error,
                      error_message=r.message) for r in rs))
            for topic, rs in grouped.items()))
