"""What the share coordinator's state APIs (Initialize/Read/Write/Delete/ReadSummary
ShareGroupState, APIs 83-87, KIP-932) have in common: one result per (topic id, partition)
of the request, each from the share coordinator of that share-partition
(broker/share/coordinator_shell.py), NOT_COORDINATOR where that is not this broker.
CLUSTER_ACTION is checked for the whole request by the dispatcher (_authz.CLUSTER_CHECKS)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.kio_build import build, response_module
from broker.share.coordinator import StateResult
from broker.share.coordinator_shell import (
    ShareCoordinatorNode,
    ShareCoordinatorService,
    share_coordinator_of,
)
from broker.share.records import SharePartitionKey

StateCall = Callable[[ShareCoordinatorService, SharePartitionKey, Any],
                     Awaitable[StateResult]]


async def answer(node: ShareCoordinatorNode, request: Any, response: str, result: str,
                 call: StateCall,
                 fields: Callable[[StateResult], dict[str, Any]] | None = None) -> Any:
    """The response named `response`, its topics' class `result`: `call(service, key,
    partition request)` for each partition; `fields(result)` adds what the API answers
    beyond the error (start offset, epochs, batches)."""
    mod = response_module(request)
    group_id = str(request.group_id or "")
    try:
        service: ShareCoordinatorService | None = share_coordinator_of(node)
        error, message = ErrorCode.none, None
    except KafkaError as exc:
        service, error, message = None, exc.error_code, exc.message
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if service is None:
                r = StateResult(error, message)
            elif not group_id or topic.topic_id is None:
                r = StateResult(ErrorCode.invalid_request,
                                "The group id and the topic id must be set.")
            else:
                r = await call(service, SharePartitionKey(
                    group_id, topic.topic_id, int(p.partition)), p)
            extra = fields(r) if fields is not None else {}
            partitions.append(build(mod.PartitionResult, partition=p.partition,
                                    error_code=r.error, error_message=r.message, **extra))
        results.append(build(getattr(mod, result), topic_id=topic.topic_id,
                             partitions=tuple(partitions)))
    return build(getattr(mod, response), results=tuple(results))


def refused(request: Any, response: str, result: str, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION), as Kafka answers them."""
    mod = response_module(request)
    return build(getattr(mod, response), results=tuple(
        build(getattr(mod, result), topic_id=t.topic_id, partitions=tuple(
            build(mod.PartitionResult, partition=p.partition, error_code=code,
                  error_message=None, state_epoch=0, leader_epoch=-1, start_offset=-1,
                  state_batches=(), delivery_complete_count=-1) for p in t.partitions))
        for t in request.topics))
