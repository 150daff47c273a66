"""DeleteGroups: Empty groups go with their offsets (tombstones); active ones are refused."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    commit,
    ctx,
    encodes,
    fetch,
    fetched,
    join_fully,
    node_fixture,
    offsets_log_records,
    ready,
    request,
)
from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.handlers import delete_groups

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_delete(node: GroupNode, version: int) -> None:
    node.add_topic("t", 1)
    await ready(node)
    await commit(node, "idle", {("t", 0): 3})
    await join_fully(node, "busy")
    req = request("delete_groups", version, "DeleteGroupsRequest",
                  groups_names=("idle", "busy", "none"))
    resp = encodes(await delete_groups.handle(node, ctx(42, version), req))
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("idle", ErrorCode.none), ("busy", ErrorCode.non_empty_group),
        ("none", ErrorCode.group_id_not_found)]
    if version >= 3:  # v3: Kafka's message for each error, null on success
        assert [r.error_message for r in resp.results] == [
            None, "The group is not empty.", "The group id does not exist."]
    assert fetched((await fetch(node, "idle", None)).topics) == {}
    tail = offsets_log_records(node)[-2:]
    assert [rec.decode_key(r.key) for r in tail] == [
        rec.OffsetCommitKey("idle", "t", 0), rec.GroupMetadataKey("idle")]
    assert all(r.value is None for r in tail)


async def test_delete_share_groups(node: GroupNode) -> None:
    """A share group goes with its share-partitions' state once it has no members (a new
    member starts where share.auto.offset.reset says); one with members is refused."""
    from share_group_support import group_with_offsets
    from test_share_fetch import acquired, heartbeat
    from test_share_fetch import fetch as share_fetch

    from broker.share.records import SharePartitionKey

    tid = await group_with_offsets(node, stay=True)
    req = request("delete_groups", 3, "DeleteGroupsRequest", groups_names=("g",))
    resp = encodes(await delete_groups.handle(node, ctx(42, 3), req))
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("g", ErrorCode.non_empty_group)]
    left = request("share_group_heartbeat", 1, "ShareGroupHeartbeatRequest", group_id="g",
                   member_id="m1", member_epoch=-1, rack_id=None, subscribed_topic_names=None)
    from broker.handlers import share_group_heartbeat

    assert (await share_group_heartbeat.handle(node, ctx(76, 1), left)).error_code \
        is ErrorCode.none
    resp = encodes(await delete_groups.handle(node, ctx(42, 3), req))
    assert [(r.group_id, r.error_code, r.error_message) for r in resp.results] == [
        ("g", ErrorCode.none, None)]
    assert "g" not in dict(node.share_groups.listed())
    state = await node.share_groups.persister.read_summary(SharePartitionKey("g", tid, 0))
    assert state.start_offset == -1
    await heartbeat(node, "m2", 0)
    assert acquired(await share_fetch(node, tid, 0, member="m2", wait_ms=2000)) == [(0, 4, 1)]
