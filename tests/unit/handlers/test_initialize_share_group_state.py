"""InitializeShareGroupState (API 83) in process: sets a share-partition's start offset at a
new state epoch (what AlterShareGroupOffsets does), FENCED_STATE_EPOCH unless the epoch is
above the current one, and a share-partition leader still writing at the old state epoch is
fenced."""

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
    read_share_group_state,
    write_share_group_state,
)

pytestmark = pytest.mark.anyio


def _init(tid: object, state_epoch: int, start: int) -> object:
    return state_request("initialize_share_group_state", 0, "g", tid, 0,
                         state_epoch=state_epoch, start_offset=start)


async def test_initialize_and_fence(node: GroupNode) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    assert only(await call(node, write_share_group_state, 1, state_request(
        "write_share_group_state", 1, "g", tid, 0, state_epoch=0, leader_epoch=0,
        start_offset=10, delivery_complete_count=-1,
        state_batches=((10, 11, 2, 1),)))).error_code is ErrorCode.none
    r = only(await call(node, initialize_share_group_state, 0, _init(tid, 0, 3)))
    assert r.error_code is ErrorCode.fenced_state_epoch
    r = only(await call(node, initialize_share_group_state, 0, _init(tid, 1, 3)))
    assert (r.partition, r.error_code) == (0, ErrorCode.none)
    read = only(await call(node, read_share_group_state, 0, state_request(
        "read_share_group_state", 0, "g", tid, 0, leader_epoch=0)))
    assert (read.start_offset, read.state_epoch, read.state_batches) == (3, 1, ())
    old_leader = only(await call(node, write_share_group_state, 1, state_request(
        "write_share_group_state", 1, "g", tid, 0, state_epoch=0, leader_epoch=0,
        start_offset=12, delivery_complete_count=-1, state_batches=())))
    assert old_leader.error_code is ErrorCode.fenced_state_epoch


async def test_unknown_topic(node: GroupNode) -> None:
    import uuid

    await state_topic_loaded(node)
    r = only(await call(node, initialize_share_group_state, 0, _init(uuid.uuid4(), 1, 0)))
    assert r.error_code is ErrorCode.unknown_topic_or_partition
