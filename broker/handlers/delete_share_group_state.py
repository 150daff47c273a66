"""DeleteShareGroupState (API 86, KIP-932): the group coordinator deletes share-partition
states (DeleteGroups, DeleteShareGroupOffsets): a tombstone in __share_group_state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._share_state import answer, refused
from broker.share.coordinator_shell import ShareCoordinatorNode

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 86


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION)."""
    return refused(request, "DeleteShareGroupStateResponse", "DeleteStateResult", code)


async def handle(node: ShareCoordinatorNode, ctx: RequestContext, request: Any) -> Any:
    return await answer(node, request, "DeleteShareGroupStateResponse", "DeleteStateResult",
                        lambda s, key, p: s.delete(key))
