"""ReadShareGroupStateSummary (API 87) in process: the start offset and epochs without the
batches; v1 adds DeliveryCompleteCount (KIP-1226), which an initialized state holds as 0 and
a written one as the writer counted it; no state answers start offset -1."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    node_fixture,
)
from kio.schema.errors import ErrorCode
from share_state_support import call, only, state_request, state_topic_loaded

from broker.handlers import (
    initialize_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)

pytestmark = pytest.mark.anyio
S = "read_share_group_state_summary"


@pytest.mark.parametrize("version", [0, 1])
async def test_summary(node: GroupNode, version: int) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    req = state_request(S, version, "g", tid, 0, leader_epoch=-1)
    r = only(await call(node, read_share_group_state_summary, version, req))
    assert (r.error_code, r.start_offset) == (ErrorCode.none, -1)
    assert only(await call(node, initialize_share_group_state, 0, state_request(
        "initialize_share_group_state", 0, "g", tid, 0, state_epoch=1,
        start_offset=2))).error_code is ErrorCode.none
    r = only(await call(node, read_share_group_state_summary, version, req))
    assert (r.start_offset, r.state_epoch, r.leader_epoch) == (2, 1, -1)
    assert getattr(r, "delivery_complete_count", 0) == 0
    assert only(await call(node, write_share_group_state, 1, state_request(
        "write_share_group_state", 1, "g", tid, 0, state_epoch=1, leader_epoch=3,
        start_offset=2, delivery_complete_count=3,
        state_batches=((2, 4, 2, 1),)))).error_code is ErrorCode.none
    r = only(await call(node, read_share_group_state_summary, version, req))
    assert (r.start_offset, r.state_epoch, r.leader_epoch) == (2, 1, 3)
    if version >= 1:
        assert r.delivery_complete_count == 3
