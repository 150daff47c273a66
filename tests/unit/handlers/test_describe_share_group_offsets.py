"""DescribeShareGroupOffsets (API 90; v1 adds the lag) in process: the start offset each
share-partition's state holds, the lag (end offset - start offset - completed deliveries
past it), every initialized partition when topics are null, start offset -1 for a
partition without state or a topic not in the metadata, and the group errors."""

from __future__ import annotations

from typing import Any

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    node_fixture,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode
from share_group_support import group_with_offsets

from broker.handlers import describe_share_group_offsets

pytestmark = pytest.mark.anyio


async def _describe(node: GroupNode, version: int, group: str,
                    topics: tuple[tuple[str, tuple[int, ...]], ...] | None) -> Any:
    topic = request_class("describe_share_group_offsets", version,
                          "DescribeShareGroupOffsetsRequestTopic")
    g = request("describe_share_group_offsets", version, "DescribeShareGroupOffsetsRequestGroup",
                group_id=group, topics=None if topics is None else tuple(
                    topic(topic_name=n, partitions=ps) for n, ps in topics))
    req = request("describe_share_group_offsets", version, "DescribeShareGroupOffsetsRequest",
                  groups=(g,))
    resp = encodes(await describe_share_group_offsets.handle(node, ctx(90, version), req))
    [group_answer] = resp.groups
    return group_answer


def _rows(g: Any) -> list[tuple[Any, ...]]:
    return sorted((t.topic_name, p.partition_index, p.start_offset, getattr(p, "lag", None),
                   p.error_code) for t in g.topics for p in t.partitions)


@pytest.mark.parametrize("version", [0, 1])
async def test_offsets_and_lag(node: GroupNode, version: int) -> None:
    tid = await group_with_offsets(node)
    lag = (lambda n: n) if version >= 1 else (lambda n: None)
    everything = await _describe(node, version, "g", None)
    assert everything.error_code is ErrorCode.none
    # partition 0: 0-2 ACCEPTed, 3-4 released: SPSO 3, two records to go; partition 1 was
    # assigned but never fetched: no state yet
    assert _rows(everything) == [("t", 0, 3, lag(2), ErrorCode.none),
                                 ("t", 1, -1, lag(-1), ErrorCode.none)]
    assert {t.topic_id for t in everything.topics} == {tid}
    asked = await _describe(node, version, "g", (("t", (0,)), ("gone", (0, 1))))
    assert _rows(asked) == [("gone", 0, -1, lag(-1), ErrorCode.none),
                            ("gone", 1, -1, lag(-1), ErrorCode.none),
                            ("t", 0, 3, lag(2), ErrorCode.none)]


async def test_group_errors(node: GroupNode) -> None:
    await group_with_offsets(node)
    empty = await _describe(node, 1, "", None)
    assert empty.error_code is ErrorCode.invalid_group_id
    # an unknown group has no initialized partitions (Kafka: an empty map, no error)
    unknown = await _describe(node, 1, "never-seen", None)
    assert (unknown.error_code, unknown.topics) == (ErrorCode.none, ())
