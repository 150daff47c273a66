"""OffsetDelete: only offsets the group does not consume; tombstones in the log."""

from __future__ import annotations

import struct

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
    request_class,
)
from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.handlers import offset_delete

pytestmark = pytest.mark.anyio


async def delete(node: GroupNode, group: str, parts: dict[str, list[int]]) -> object:
    pcls = request_class("offset_delete", 0, "OffsetDeleteRequestPartition")
    tcls = request_class("offset_delete", 0, "OffsetDeleteRequestTopic")
    req = request("offset_delete", 0, "OffsetDeleteRequest", group_id=group, topics=tuple(
        tcls(name=t, partitions=tuple(pcls(partition_index=i) for i in ps))
        for t, ps in parts.items()))
    return encodes(await offset_delete.handle(node, ctx(47, 0), req))


async def test_delete_from_empty_group(node: GroupNode) -> None:
    node.add_topic("t", 2)
    await ready(node)
    await commit(node, "g", {("t", 0): 1, ("t", 1): 2})
    resp = await delete(node, "g", {"t": [0], "gone": [0]})
    assert resp.error_code is ErrorCode.none
    assert {(t.name, p.partition_index): p.error_code for t in resp.topics
            for p in t.partitions} == {("t", 0): ErrorCode.none,
                                       ("gone", 0): ErrorCode.unknown_topic_or_partition}
    assert fetched((await fetch(node, "g", None)).topics) == {("t", 1): 2}
    last = offsets_log_records(node)[-1]
    assert rec.decode_key(last.key) == rec.OffsetCommitKey("g", "t", 0) and last.value is None


async def test_unknown_group_and_subscribed_topic(node: GroupNode) -> None:
    node.add_topic("t", 1)
    node.add_topic("u", 1)
    await ready(node)
    resp = await delete(node, "nope", {"t": [0]})
    assert resp.error_code is ErrorCode.group_id_not_found
    sub = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)
    a = await join_fully(node, "active", protocols=(("range", sub),))
    from group_node import sync
    await sync(node, "active", a.member_id, a.generation_id, assignments=())
    await commit(node, "active", {("t", 0): 1, ("u", 0): 1}, generation=a.generation_id,
                 member_id=a.member_id)
    resp = await delete(node, "active", {"t": [0], "u": [0]})
    assert {(t.name, p.error_code) for t in resp.topics for p in t.partitions} == {
        ("t", ErrorCode.group_subscribed_to_topic), ("u", ErrorCode.none)}
