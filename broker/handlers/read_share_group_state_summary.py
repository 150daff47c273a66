"""ReadShareGroupStateSummary (API 87, KIP-932; v1 carries DeliveryCompleteCount, KIP-1226):
a share-partition's start offset and epochs, without its batches (DescribeShareGroupOffsets).
No state yet: start offset -1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._share_state import answer, refused
from broker.share.coordinator_shell import ShareCoordinatorNode

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 87


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION)."""
    return refused(request, "ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult", code)


async def handle(node: ShareCoordinatorNode, ctx: RequestContext, request: Any) -> Any:
    return await answer(
        node, request, "ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult",
        lambda s, key, p: s.read_summary(key),
        lambda r: {"state_epoch": r.state_epoch, "leader_epoch": r.leader_epoch,
                   "start_offset": r.start_offset,
                   "delivery_complete_count": r.delivery_complete_count})
