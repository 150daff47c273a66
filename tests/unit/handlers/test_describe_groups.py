"""DescribeGroups: members with metadata and assignment once Stable; Dead for unknown groups."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    join_fully,
    node_fixture,
    ready,
    request,
    sync,
)
from kio.schema.errors import ErrorCode

from broker.group.hashing import OFFSETS_TOPIC
from broker.handlers import describe_groups

pytestmark = pytest.mark.anyio


async def describe(node: GroupNode, version: int, *groups: str, ops: bool = False) -> object:
    req = request("describe_groups", version, "DescribeGroupsRequest", groups=groups,
                  include_authorized_operations=ops)
    return encodes(await describe_groups.handle(node, ctx(15, version), req))


@pytest.mark.parametrize("version", [0, 3, 4, 5, 6])
async def test_describe(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node, "g", instance="inst" if version >= 4 else None)
    await sync(node, "g", a.member_id, a.generation_id, assignments=((a.member_id, b"asg"),),
               instance="inst" if version >= 4 else None)
    resp = await describe(node, version, "g", "missing", ops=True)
    g, missing = resp.groups
    assert g.error_code is ErrorCode.none and g.group_state == "Stable"
    assert (g.protocol_type, g.protocol_data) == ("consumer", "range")
    [m] = g.members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) \
        == (a.member_id, "client", "/127.0.0.1", b"meta", b"asg")
    if version >= 4:
        assert m.group_instance_id == "inst"
    if version >= 3:
        assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert missing.group_state == "Dead"
    assert missing.error_code is (ErrorCode.group_id_not_found if version >= 6
                                  else ErrorCode.none)


async def test_not_coordinator(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4, leader=9)
    resp = await describe(node, 5, "g")
    assert resp.groups[0].error_code is ErrorCode.not_coordinator
    assert resp.groups[0].authorized_operations == -(2**31)
