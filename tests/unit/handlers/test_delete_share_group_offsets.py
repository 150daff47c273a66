"""DeleteShareGroupOffsets (API 92) in process: an empty share group's state for a topic is
deleted (the next member starts where share.auto.offset.reset says), a group with members
is refused NON_EMPTY_GROUP, an unknown group GROUP_ID_NOT_FOUND, an unknown topic per topic."""

from __future__ import annotations

from typing import Any

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    node_fixture,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode
from share_group_support import group_with_offsets
from test_share_fetch import acquired, fetch, heartbeat

from broker.handlers import delete_share_group_offsets
from broker.share.records import SharePartitionKey

pytestmark = pytest.mark.anyio


async def _delete(node: GroupNode, group: str, topics: tuple[str, ...]) -> Any:
    topic = request_class("delete_share_group_offsets", 0, "DeleteShareGroupOffsetsRequestTopic")
    req = request("delete_share_group_offsets", 0, "DeleteShareGroupOffsetsRequest",
                  group_id=group, topics=tuple(topic(topic_name=n) for n in topics))
    return encodes(await delete_share_group_offsets.handle(node, ctx(92, 0), req))


async def test_delete_an_empty_groups_offsets(node: GroupNode) -> None:
    tid = await group_with_offsets(node)
    resp = await _delete(node, "g", ("t", "gone"))
    assert resp.error_code is ErrorCode.none
    assert sorted((t.topic_name, t.error_code) for t in resp.responses) == [
        ("gone", ErrorCode.unknown_topic_or_partition), ("t", ErrorCode.none)]
    state = await node.share_groups.persister.read_summary(SharePartitionKey("g", tid, 0))
    assert state.start_offset == -1
    # the next member starts again from the earliest offset (the group's reset setting)
    await heartbeat(node, "m2", 0)
    assert acquired(await fetch(node, tid, 0, member="m2", wait_ms=2000)) == [(0, 4, 1)]


async def test_refusals(node: GroupNode) -> None:
    await group_with_offsets(node, stay=True)
    resp = await _delete(node, "g", ("t",))
    assert (resp.error_code, resp.responses) == (ErrorCode.non_empty_group, ())
    assert (await _delete(node, "none", ("t",))).error_code is ErrorCode.group_id_not_found
    assert (await _delete(node, "", ("t",))).error_code is ErrorCode.invalid_group_id
