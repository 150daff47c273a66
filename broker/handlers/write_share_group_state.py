"""WriteShareGroupState (API 85, KIP-932; v1 carries DeliveryCompleteCount, KIP-1226): a
share-partition leader writes a share-partition's start offset and changed state batches,
answered once the record is replicated in __share_group_state. FENCED_LEADER_EPOCH /
FENCED_STATE_EPOCH for epochs older than the recorded ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._share_state import answer, refused
from broker.share.coordinator_shell import ShareCoordinatorNode
from broker.share.records import StateBatch

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 85


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION)."""
    return refused(request, "WriteShareGroupStateResponse", "WriteStateResult", code)


async def handle(node: ShareCoordinatorNode, ctx: RequestContext, request: Any) -> Any:
    return await answer(
        node, request, "WriteShareGroupStateResponse", "WriteStateResult",
        lambda s, key, p: s.write(
            key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset),
            tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                             int(b.delivery_count)) for b in p.state_batches),
            int(getattr(p, "delivery_complete_count", -1))))
