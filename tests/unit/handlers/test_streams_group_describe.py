"""StreamsGroupDescribe (KIP-1071): a group's epochs, topology and members' tasks."""

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
)
from kio.schema.errors import ErrorCode
from streams_group_support import enable_streams, heartbeat, streams_node_fixture  # noqa: F401

from broker.group.streams_topology_description import NOT_REQUESTED, NOT_STORED
from broker.handlers import streams_group_describe

pytestmark = pytest.mark.anyio


async def describe(node: GroupNode, *ids: str) -> object:
    req = request("streams_group_describe", 0, "StreamsGroupDescribeRequest", group_ids=ids,
                  include_authorized_operations=True)
    return encodes(await streams_group_describe.handle(node, ctx(89, 0), req))


async def describe_v1(node: GroupNode, include: bool, *ids: str) -> Any:
    req = request("streams_group_describe", 1, "StreamsGroupDescribeRequest",
                  group_ids=ids or ("g",), include_authorized_operations=False,
                  include_topology_description=include)
    return encodes(await streams_group_describe.handle(node, ctx(89, 1), req))


async def test_describe_members_topology_and_unknown_group(streams_node: GroupNode) -> None:
    node = streams_node
    for name in ("input", "app-rep", "app-changelog"):
        node.add_topic(name, 2)
    await ready(node)
    await heartbeat(node, "a", 0)
    r = await describe(node, "g", "nope")
    g, nope = r.groups  # type: ignore[attr-defined]
    assert g.error_code is ErrorCode.none and g.group_state == "Stable"
    assert (g.group_epoch, g.assignment_epoch) == (1, 1)
    assert [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
    [m] = g.members
    assert (m.member_id, m.member_epoch, m.process_id, m.topology_epoch) == (
        "a", 1, "process-a", 1)
    assert [(t.subtopology_id, t.partitions) for t in m.assignment.active_tasks] == [
        ("0", (0, 1)), ("1", (0, 1))]
    assert m.target_assignment == m.assignment
    assert g.authorized_operations != -(2**31)
    assert nope.error_code is ErrorCode.group_id_not_found
    assert nope.error_message == "Group nope not found."


async def test_streams_version_0_refuses(node: GroupNode) -> None:
    enable_streams(node, 0)
    await ready(node)
    r = await describe(node, "g")
    [g] = r.groups  # type: ignore[attr-defined]
    assert g.error_code is ErrorCode.unsupported_version and "streams.version" in g.error_message


async def test_describe_v1_without_a_plugin(streams_node: GroupNode) -> None:
    """Kafka 4.4 without a plugin: NOT_STORED when asked, NOT_REQUESTED otherwise."""
    node = streams_node
    for name in ("input", "app-rep", "app-changelog"):
        node.add_topic(name, 2)
    await ready(node)
    await heartbeat(node, "a", 0, version=1)
    [g] = (await describe_v1(node, True)).groups
    assert (g.topology_description_status, g.topology_description) == (NOT_STORED, None)
    assert g.assignor_name == "sticky"
    [g] = (await describe_v1(node, False)).groups
    assert g.topology_description_status == NOT_REQUESTED
    [nope] = (await describe_v1(node, True, "nope")).groups
    assert nope.error_code is ErrorCode.group_id_not_found
    assert (nope.topology_description_status, nope.assignor_name) == (NOT_REQUESTED, None)
