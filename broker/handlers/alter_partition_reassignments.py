"""AlterPartitionReassignments (API 45, KIP-455), versions 0-1: start (target replicas) or
cancel (null replicas) partition reassignments, sent on to the active controller. The new
replicas join at once and fetch; the old ones leave once the new ones are in the ISR.

v1 (KIP-860) carries AllowReplicationFactorChange (default true). When it is false, a target
whose replica count differs from the partition's replication factor (its replicas without
those being added by a reassignment in progress, as Kafka counts it) is refused with
INVALID_REPLICATION_FACTOR and not sent on; the others go ahead. The answer echoes the flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.deadline import within as await_controller
from broker.controller.requests import ReassignmentResult
from broker.controller.rpc import alter_partition_reassignments as rpc
from broker.errors import KafkaError
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.metadata.image import MetadataImage
    from broker.server import RequestContext

API_KEY = 45


def _response(request: Any, results: Sequence[ReassignmentResult],
              error: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
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


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _response(request, [], code)


def _changes_replication_factor(image: MetadataImage, topic: str, index: int,
                                target: Sequence[int]) -> int | None:
    """The partition's replication factor when `target` has another count, else None."""
    p = image.partition(topic, index)
    if p is None:
        return None  # the controller answers UNKNOWN_TOPIC_OR_PARTITION
    current = len(p.replicas) - len(p.adding_replicas)
    return current if len(set(target)) != current else None


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    items = rpc.parse(request)
    refused: list[ReassignmentResult] = []
    if not getattr(request, "allow_replication_factor_change", True):
        image = node.metadata
        kept = []
        for topic, index, target in items:
            rf = None if target is None else _changes_replication_factor(
                image, topic, index, target)
            if rf is None:
                kept.append((topic, index, target))
            else:
                refused.append(ReassignmentResult(
                    topic, index, ErrorCode.invalid_replication_factor,
                    f"The replication factor is changed from {rf} to {len(set(target or ()))} "
                    "but AllowReplicationFactorChange is false"))
        items = kept
    results: list[ReassignmentResult] = []
    if items:
        try:
            results = await await_controller(
                lambda: node.controller.alter_partition_reassignments(items),
                to_ms(request.timeout, 0))
        except KafkaError as exc:
            return _response(request, [], exc.error_code, exc.message or None)
    return _response(request, [*results, *refused])
