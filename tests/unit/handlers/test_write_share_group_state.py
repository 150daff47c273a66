"""WriteShareGroupState (API 85) in process: a write is answered once its record is in
__share_group_state (Kafka's ShareSnapshot first, ShareUpdate after), what it wrote is read
back, older epochs are fenced, and an unknown partition, an empty group id or a partition
led elsewhere is refused with Kafka's errors."""

from __future__ import annotations

import uuid

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    node_fixture,
)
from kio.schema.errors import ErrorCode
from share_state_support import call, only, state_request, state_topic_loaded

from broker.handlers import read_share_group_state, write_share_group_state
from broker.share.records import (
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_KEY_TYPE,
    SHARE_UPDATE_KEY_TYPE,
    SharePartitionKey,
    decode_key,
)

pytestmark = pytest.mark.anyio
W = "write_share_group_state"


def _write(tid: uuid.UUID | None, *, version: int = 1, group: str = "g", partition: int = 0,
           leader_epoch: int = 0, state_epoch: int = 0, start: int = 0,
           batches: tuple[tuple[int, int, int, int], ...] = ()) -> object:
    return state_request(W, version, group, tid, partition, state_epoch=state_epoch,
                         leader_epoch=leader_epoch, start_offset=start,
                         delivery_complete_count=-1, state_batches=batches)


def _records(node: GroupNode, tid: uuid.UUID) -> list[int]:
    """The record types written for share-partition (g, tid, 0), in log order."""
    key = SharePartitionKey("g", tid, 0)
    p = node.share_coordinator.partition_of(key)
    plog = node.replicas.get(SHARE_GROUP_STATE_TOPIC, p).log
    out = []
    for r in plog.read_records(plog.log_start_offset, plog.log_end_offset):
        record_type, k = decode_key(r.key)
        if k == key:
            out.append(record_type)
    return out


@pytest.mark.parametrize("version", [0, 1])
async def test_write_then_read_back(node: GroupNode, version: int) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    r = only(await call(node, write_share_group_state, version,
                        _write(tid, version=version, start=3, batches=((3, 4, 2, 1),))))
    assert (r.partition, r.error_code) == (0, ErrorCode.none)
    r = only(await call(node, write_share_group_state, version,
                        _write(tid, version=version, start=5, batches=((5, 6, 0, 2),))))
    assert r.error_code is ErrorCode.none
    assert _records(node, tid) == [SHARE_SNAPSHOT_KEY_TYPE, SHARE_UPDATE_KEY_TYPE]
    read = only(await call(node, read_share_group_state, 0, state_request(
        "read_share_group_state", 0, "g", tid, 0, leader_epoch=0)))
    assert (read.error_code, read.start_offset, read.state_epoch) == (ErrorCode.none, 5, 0)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in read.state_batches] == [(5, 6, 0, 2)]


async def test_older_epochs_are_fenced(node: GroupNode) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    assert only(await call(node, write_share_group_state, 1, _write(
        tid, leader_epoch=4, state_epoch=2))).error_code is ErrorCode.none
    r = only(await call(node, write_share_group_state, 1, _write(
        tid, leader_epoch=3, state_epoch=2)))
    assert r.error_code is ErrorCode.fenced_leader_epoch
    r = only(await call(node, write_share_group_state, 1, _write(
        tid, leader_epoch=4, state_epoch=1)))
    assert r.error_code is ErrorCode.fenced_state_epoch


async def test_refusals(node: GroupNode) -> None:
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await state_topic_loaded(node)
    r = only(await call(node, write_share_group_state, 1, _write(uuid.uuid4())))
    assert r.error_code is ErrorCode.unknown_topic_or_partition
    r = only(await call(node, write_share_group_state, 1, _write(tid, partition=5)))
    assert r.error_code is ErrorCode.unknown_topic_or_partition
    r = only(await call(node, write_share_group_state, 1, _write(tid, group="")))
    assert r.error_code is ErrorCode.invalid_request
    # __share_group_state led elsewhere: this broker is not the share coordinator
    node.add_topic(SHARE_GROUP_STATE_TOPIC, 3, leader=2, epoch=1)
    r = only(await call(node, write_share_group_state, 1, _write(tid)))
    assert r.error_code is ErrorCode.not_coordinator
