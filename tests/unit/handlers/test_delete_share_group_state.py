"""DeleteShareGroupState (API 86) in process: a tombstone in __share_group_state (null value
under the ShareSnapshot key); the state is gone (a read answers -1), deleting nothing is no
error, and a coordinator loading the partition again sees the deletion."""

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
    delete_share_group_state,
    read_share_group_state,
    write_share_group_state,
)
from broker.share.records import SHARE_GROUP_STATE_TOPIC, SharePartitionKey, decode_key

pytestmark = pytest.mark.anyio


async def test_delete(node: GroupNode) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    delete = state_request("delete_share_group_state", 0, "g", tid, 0)
    assert only(await call(node, delete_share_group_state, 0, delete)).error_code \
        is ErrorCode.none
    assert only(await call(node, write_share_group_state, 1, state_request(
        "write_share_group_state", 1, "g", tid, 0, state_epoch=0, leader_epoch=0,
        start_offset=4, delivery_complete_count=-1, state_batches=()))).error_code \
        is ErrorCode.none
    r = only(await call(node, delete_share_group_state, 0, delete))
    assert (r.partition, r.error_code) == (0, ErrorCode.none)
    read = state_request("read_share_group_state", 0, "g", tid, 0, leader_epoch=0)
    assert only(await call(node, read_share_group_state, 0, read)).start_offset == -1
    key = SharePartitionKey("g", tid, 0)
    p = node.share_coordinator.partition_of(key)
    plog = node.replicas.get(SHARE_GROUP_STATE_TOPIC, p).log
    last = list(plog.read_records(plog.log_start_offset, plog.log_end_offset))[-1]
    assert decode_key(last.key) == (0, key) and last.value is None
    # a coordinator loading the partition again replays the tombstone
    node.add_topic(SHARE_GROUP_STATE_TOPIC, 3, epoch=1)
    await state_topic_loaded(node)
    assert node.share_coordinator.coordinators[p].states == {}
