"""ListGroups: every loaded group, with state (v4+) and type (v5+) filters."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    commit,
    ctx,
    encodes,
    join_fully,
    node_fixture,
    ready,
    request,
)
from kio.schema.errors import ErrorCode

from broker.handlers import list_groups

pytestmark = pytest.mark.anyio


async def listing(node: GroupNode, version: int, states: tuple[str, ...] = (),
                  types: tuple[str, ...] = ()) -> object:
    req = request("list_groups", version, "ListGroupsRequest", states_filter=states,
                  types_filter=types)
    return encodes(await list_groups.handle(node, ctx(16, version), req))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
async def test_list(node: GroupNode, version: int) -> None:
    node.add_topic("t", 1)
    await ready(node)
    await join_fully(node, "joining")
    await commit(node, "idle", {("t", 0): 1})
    resp = await listing(node, version)
    assert resp.error_code is ErrorCode.none
    got = {g.group_id: g for g in resp.groups}
    assert set(got) == {"joining", "idle"}
    assert got["joining"].protocol_type == "consumer" and got["idle"].protocol_type == ""
    if version >= 4:
        assert got["joining"].group_state == "CompletingRebalance"
        assert got["idle"].group_state == "Empty"
        only = await listing(node, version, states=("empty",))
        assert [g.group_id for g in only.groups] == ["idle"]
    if version >= 5:
        assert got["idle"].group_type == "classic"
        assert (await listing(node, version, types=("consumer",))).groups == ()


async def test_share_groups_and_the_types_filter(node: GroupNode) -> None:
    """Share groups are listed with type "share" and protocol type "share" (Kafka 4.4), in
    their state, and only they when the types filter asks for share."""
    from share_group_support import group_with_offsets

    await group_with_offsets(node, stay=True)
    await commit(node, "idle", {("t", 0): 1})
    got = {g.group_id: (g.group_type, g.protocol_type, g.group_state)
           for g in (await listing(node, 5)).groups}
    assert got == {"g": ("share", "share", "Stable"), "idle": ("classic", "", "Empty")}
    shares = await listing(node, 5, types=("share",))
    assert [(g.group_id, g.group_type) for g in shares.groups] == [("g", "share")]
    assert [g.group_id for g in (await listing(node, 5, types=("classic",))).groups] == [
        "idle"]
    assert (await listing(node, 5, states=("empty",), types=("share",))).groups == ()
