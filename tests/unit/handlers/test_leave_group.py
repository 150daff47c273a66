"""LeaveGroup: single member (v0-v2) and batched by member or instance id (v3+)."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    join,
    join_fully,
    node_fixture,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode

from broker.handlers import leave_group

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_single_member(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node)
    req = request("leave_group", version, "LeaveGroupRequest", group_id="g", member_id="nope")
    resp = encodes(await leave_group.handle(node, ctx(13, version), req))
    assert resp.error_code is ErrorCode.unknown_member_id
    req = request("leave_group", version, "LeaveGroupRequest", group_id="g",
                  member_id=a.member_id)
    resp = encodes(await leave_group.handle(node, ctx(13, version), req))
    assert resp.error_code is ErrorCode.none
    desc = node.group_coordinator.describe_group("g")[1]
    assert desc is not None and desc.state == "Empty"


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_batch(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node, version=5, instance="inst-a")
    ident = request_class("leave_group", version, "MemberIdentity")
    from broker.protocol.kio_build import build
    members = (build(ident, member_id="", group_instance_id="inst-a", reason=None),
               build(ident, member_id="ghost", group_instance_id=None, reason=None))
    req = request("leave_group", version, "LeaveGroupRequest", group_id="g", members=members)
    resp = encodes(await leave_group.handle(node, ctx(13, version), req))
    assert resp.error_code is ErrorCode.none
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in resp.members] == [
        ("", "inst-a", ErrorCode.none), ("ghost", None, ErrorCode.unknown_member_id)]
    assert a.error_code is ErrorCode.none
    req = request("leave_group", version, "LeaveGroupRequest", group_id="unknown",
                  members=members[:1])
    resp = encodes(await leave_group.handle(node, ctx(13, version), req))
    assert resp.error_code is ErrorCode.unknown_member_id
