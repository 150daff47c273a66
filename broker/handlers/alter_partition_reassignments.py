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

from broker.controller.requests import ReassignmentResult
from broker.controller.rpc import alter_partition_reassignments as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.metadata.image import MetadataImage
    from broker.server import RequestContext

API_KEY = 45


error_response = rpc.error_response


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
    return await rpc.serve(node.controller, request, items, refused)
