"""OffsetCommit: answered only once replicated to the ISR; survives a restart (reload)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    commit,
    commit_errors,
    fetch,
    fetched,
    join_fully,
    node_fixture,
    offsets_log_records,
    ready,
    topic_id_of,
)
from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.group.records import OFFSETS_TOPIC

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
async def test_manual_commit_every_version(node: GroupNode, version: int) -> None:
    node.add_topic("t", 2)
    await ready(node)
    resp = await commit(node, "g", {("t", 0): 5, ("t", 1): 6}, version=version)
    if version >= 10:
        assert resp.topics[0].topic_id == node.metadata.topic("t").topic_id
    assert commit_errors(resp, node) == {("t", 0): 0, ("t", 1): 0}
    got = await fetch(node, "g", [("t", 0), ("t", 1)])
    assert fetched(got.topics) == {("t", 0): 5, ("t", 1): 6}


async def test_v10_unknown_topic_id(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    resp = await commit(node, "g", {("t", 0): 5, ("gone", 0): 1}, version=10)
    assert commit_errors(resp, node) == {
        ("t", 0): 0, (str(topic_id_of(node, "gone")), 0): ErrorCode.unknown_topic_id.value}


async def test_retention_time_v2_writes_expire_timestamp(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    await commit(node, "g", {("t", 0): 1}, version=2, retention_ms=60_000)
    value = rec.decode_offset_commit_value(offsets_log_records(node)[-1].value)
    assert value.expire_timestamp == value.commit_timestamp + 60_000


async def test_unknown_topic_and_member_checks(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    resp = await commit(node, "g", {("t", 0): 1, ("nope", 0): 1})
    assert commit_errors(resp) == {("t", 0): 0, ("nope", 0): ErrorCode.unknown_topic_or_partition}
    a = await join_fully(node, "active")
    resp = await commit(node, "active", {("t", 0): 1}, generation=a.generation_id,
                        member_id="someone-else")
    assert commit_errors(resp)[("t", 0)] == ErrorCode.unknown_member_id
    resp = await commit(node, "active", {("t", 0): 1}, generation=a.generation_id + 5,
                        member_id=a.member_id)
    assert commit_errors(resp)[("t", 0)] == ErrorCode.illegal_generation


async def test_commit_waits_for_isr_replication(node: GroupNode) -> None:
    node.add_topic("t", 1)
    await ready(node)
    # grow the ISR of the group's offsets partition to include broker 2, which never fetches
    svc = node.group_coordinator
    p = svc.partition_of("g")
    part = node.replicas.get(OFFSETS_TOPIC, p)
    assert part is not None
    part.become_leader(leader_epoch=part.leader_epoch, partition_epoch=1, replicas=(1, 2),
                       isr=(1, 2), min_insync_replicas=1)
    task = asyncio.ensure_future(commit(node, "g", {("t", 0): 42}))
    await asyncio.sleep(0.1)
    assert not task.done()
    assert fetched((await fetch(node, "g", [("t", 0)])).topics) == {("t", 0): -1}
    part.update_follower(2, part.log.log_end_offset)  # the follower catches up
    resp = await asyncio.wait_for(task, 2)
    assert commit_errors(resp) == {("t", 0): 0}
    assert fetched((await fetch(node, "g", [("t", 0)])).topics) == {("t", 0): 42}


async def test_commit_not_replicated_in_time_is_not_applied(tmp_path: Path) -> None:
    n = GroupNode(tmp_path, **{"offsets.commit.timeout.ms": 100})
    await n.start()
    try:
        n.add_topic("t", 1)
        await ready(n)
        part = n.replicas.get(OFFSETS_TOPIC, n.group_coordinator.partition_of("g"))
        assert part is not None
        part.become_leader(leader_epoch=part.leader_epoch, partition_epoch=1,
                           replicas=(1, 2), isr=(1, 2), min_insync_replicas=1)
        resp = await commit(n, "g", {("t", 0): 42})
        assert commit_errors(resp) == {("t", 0): ErrorCode.coordinator_not_available}
        assert fetched((await fetch(n, "g", [("t", 0)])).topics) == {("t", 0): -1}
    finally:
        await n.stop()


async def test_offsets_and_groups_survive_restart(tmp_path: Path) -> None:
    n = GroupNode(tmp_path)
    await n.start()
    n.add_topic("t", 3)
    await ready(n)
    for i in range(3):
        await commit(n, "g", {("t", i): 100 + i})
    await commit(n, "g", {("t", 0): 200})
    a = await join_fully(n, "live")
    image = n.metadata
    await n.stop()

    again = GroupNode(tmp_path)
    again.publisher.load_snapshot(dataclasses.replace(image, offset=image.offset + 1))
    await again.start()
    try:
        await again.wait_loaded()
        got = await fetch(again, "g", None)
        assert fetched(got.topics) == {("t", 0): 200, ("t", 1): 101, ("t", 2): 102}
    finally:
        await again.stop()
    assert a.error_code is ErrorCode.none


async def test_v1_commit_timestamp_is_stored(node: GroupNode) -> None:
    """OffsetCommit v1's per-partition commit_timestamp is the commit time (-1: now)."""
    from group_node import ctx, request, request_class

    from broker.handlers import offset_commit
    from broker.protocol.kio_build import build

    node.add_topic("t", 2)
    await ready(node)
    part = request_class("offset_commit", 1, "OffsetCommitRequestPartition")
    topic = request_class("offset_commit", 1, "OffsetCommitRequestTopic")
    req = request("offset_commit", 1, "OffsetCommitRequest", group_id="g",
                  generation_id_or_member_epoch=-1, member_id="", topics=(build(
                      topic, name="t", partitions=(
                          build(part, partition_index=0, committed_offset=4,
                                commit_timestamp=1_600_000_000_000, committed_metadata="m"),
                          build(part, partition_index=1, committed_offset=7,
                                commit_timestamp=-1, committed_metadata=None))),))
    resp = await offset_commit.handle(node, ctx(8, 1), req)
    assert commit_errors(resp) == {("t", 0): 0, ("t", 1): 0}
    values = [rec.decode_offset_commit_value(r.value) for r in offsets_log_records(node)[-2:]]
    assert values[0].commit_timestamp == 1_600_000_000_000
    assert values[1].commit_timestamp > 1_700_000_000_000
    for version in (0, 1):
        got = await fetch(node, "g", [("t", 0), ("t", 1)], version=version)
        assert fetched(got.topics) == {("t", 0): 4, ("t", 1): 7}


async def test_v0_commit_is_stored_by_the_coordinator(node: GroupNode) -> None:
    """Kafka kept v0 commits in ZooKeeper; Skiff's coordinator stores them, outside any
    generation, and every OffsetFetch version reads them."""
    node.add_topic("t", 1)
    await ready(node)
    resp = await commit(node, "legacy", {("t", 0): 9}, version=0)
    assert commit_errors(resp) == {("t", 0): 0}
    for version in (0, 1, 7):
        got = await fetch(node, "legacy", [("t", 0)], version=version)
        assert fetched(got.topics) == {("t", 0): 9}
