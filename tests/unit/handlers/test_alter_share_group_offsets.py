"""AlterShareGroupOffsets (API 91) in process: an empty share group's partitions get new
start offsets (their state initialized again at a higher state epoch), the next member reads
from there, a group with members is refused NON_EMPTY_GROUP, an unknown partition is refused
per partition, and a group that does not exist yet is made."""

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

from broker.handlers import alter_share_group_offsets
from broker.share.records import SharePartitionKey

pytestmark = pytest.mark.anyio


async def _alter(node: GroupNode, group: str,
                 topics: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]) -> Any:
    part = request_class("alter_share_group_offsets", 0, "AlterShareGroupOffsetsRequestPartition")
    topic = request_class("alter_share_group_offsets", 0, "AlterShareGroupOffsetsRequestTopic")
    req = request("alter_share_group_offsets", 0, "AlterShareGroupOffsetsRequest",
                  group_id=group, topics=tuple(topic(topic_name=n, partitions=tuple(
                      part(partition_index=p, start_offset=o) for p, o in ps))
                      for n, ps in topics))
    return encodes(await alter_share_group_offsets.handle(node, ctx(91, 0), req))


def _results(resp: Any) -> list[tuple[str, int, ErrorCode]]:
    return sorted((t.topic_name, p.partition_index, p.error_code)
                  for t in resp.responses for p in t.partitions)


async def test_alter_an_empty_group(node: GroupNode) -> None:
    tid = await group_with_offsets(node)
    resp = await _alter(node, "g", (("t", ((0, 1), (7, 0))),))
    assert resp.error_code is ErrorCode.none
    assert _results(resp) == [("t", 0, ErrorCode.none),
                              ("t", 7, ErrorCode.unknown_topic_or_partition)]
    state = await node.share_groups.persister.read_summary(SharePartitionKey("g", tid, 0))
    assert (state.start_offset, state.state_epoch) == (1, 1)
    # a new member reads partition 0 from offset 1 again, the ACCEPTed 1-2 included: the
    # new state has no batches, so every delivery count starts again
    await heartbeat(node, "m2", 0)
    assert acquired(await fetch(node, tid, 0, member="m2", wait_ms=2000)) == [(1, 4, 1)]


async def test_a_group_with_members_is_refused(node: GroupNode) -> None:
    await group_with_offsets(node, stay=True)
    resp = await _alter(node, "g", (("t", ((0, 0),)),))
    assert (resp.error_code, resp.responses) == (ErrorCode.non_empty_group, ())


async def test_a_new_group_is_made(node: GroupNode) -> None:
    await group_with_offsets(node)
    resp = await _alter(node, "fresh", (("t", ((1, 4),)),))
    assert _results(resp) == [("t", 1, ErrorCode.none)]
    assert "fresh" in dict(node.share_groups.listed())
    assert (await _alter(node, "", ())).error_code is ErrorCode.invalid_group_id
