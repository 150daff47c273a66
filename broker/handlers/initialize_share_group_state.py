"""InitializeShareGroupState (API 83, KIP-932): the group coordinator sets a share-partition's
start offset and state epoch (a new subscription, AlterShareGroupOffsets). FENCED_STATE_EPOCH
unless the state epoch is above the current one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._share_state import answer, refused
from broker.share.coordinator_shell import ShareCoordinatorNode

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 83


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION)."""
    return refused(request, "InitializeShareGroupStateResponse", "InitializeStateResult", code)


async def handle(node: ShareCoordinatorNode, ctx: RequestContext, request: Any) -> Any:
    return await answer(
        node, request, "InitializeShareGroupStateResponse", "InitializeStateResult",
        lambda s, key, p: s.initialize(key, int(p.state_epoch), int(p.start_offset)))
