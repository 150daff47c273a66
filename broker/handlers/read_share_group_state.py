"""ReadShareGroupState (API 84, KIP-932): a share-partition leader loads the state of a
share-partition (start offset, state epoch, state batches); FENCED_LEADER_EPOCH for a leader
epoch older than the last one recorded. No state yet: start offset -1, state epoch 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._share_state import answer, refused
from broker.protocol.kio_build import build, response_module
from broker.share.coordinator_shell import ShareCoordinatorNode

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 84


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition answers `code` (a refused CLUSTER_ACTION)."""
    return refused(request, "ReadShareGroupStateResponse", "ReadStateResult", code)


async def handle(node: ShareCoordinatorNode, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    return await answer(
        node, request, "ReadShareGroupStateResponse", "ReadStateResult",
        lambda s, key, p: s.read(key, int(p.leader_epoch)),
        lambda r: {"state_epoch": r.state_epoch, "start_offset": r.start_offset,
                   "state_batches": tuple(build(
                       mod.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                       delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in r.state_batches)})
