"""ReadShareGroupState (API 84) in process: nothing written answers start offset -1 and
state epoch 0 (Kafka: an uninitialized share-partition), a written state comes back with its
batches, a read at a newer leader epoch fences the older leader's writes and an older one is
fenced itself."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    node_fixture,
)
from kio.schema.errors import ErrorCode
from share_state_support import call, only, state_request, state_topic_loaded

from broker.handlers import read_share_group_state, write_share_group_state

pytestmark = pytest.mark.anyio


def _read(tid: object, leader_epoch: int, partition: int = 0) -> object:
    return state_request("read_share_group_state", 0, "g", tid, partition,
                         leader_epoch=leader_epoch)


def _write(tid: object, leader_epoch: int) -> object:
    return state_request("write_share_group_state", 1, "g", tid, 0, state_epoch=0,
                         leader_epoch=leader_epoch, start_offset=7,
                         delivery_complete_count=2,
                         state_batches=((7, 8, 2, 1), (9, 9, 4, 5)))


async def test_read_nothing_then_the_written_state(node: GroupNode) -> None:
    node.add_topic("t", 2)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    r = only(await call(node, read_share_group_state, 0, _read(tid, 0)))
    assert (r.error_code, r.start_offset, r.state_epoch, r.state_batches) == (
        ErrorCode.none, -1, 0, ())
    assert only(await call(node, write_share_group_state, 1, _write(tid, 1))).error_code \
        is ErrorCode.none
    r = only(await call(node, read_share_group_state, 0, _read(tid, 1)))
    assert (r.error_code, r.start_offset, r.state_epoch) == (ErrorCode.none, 7, 0)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in r.state_batches] == [(7, 8, 2, 1), (9, 9, 4, 5)]
    # the other partition has no state
    assert only(await call(node, read_share_group_state, 0, _read(tid, 0, 1))).start_offset == -1


async def test_leader_epochs(node: GroupNode) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    assert only(await call(node, write_share_group_state, 1, _write(tid, 2))).error_code \
        is ErrorCode.none
    r = only(await call(node, read_share_group_state, 0, _read(tid, 1)))
    assert r.error_code is ErrorCode.fenced_leader_epoch
    # a new leader (epoch 3) reads: the one at epoch 2 can no longer write
    assert only(await call(node, read_share_group_state, 0, _read(tid, 3))).error_code \
        is ErrorCode.none
    assert only(await call(node, write_share_group_state, 1, _write(tid, 2))).error_code \
        is ErrorCode.fenced_leader_epoch
