"""JoinGroup through the handler and the IO shell: versions, loading, leadership loss."""

from __future__ import annotations

import asyncio

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    join,
    join_fully,
    node_fixture,
    ready,
)
from kio.schema.errors import ErrorCode

from broker.group.records import OFFSETS_TOPIC

pytestmark = pytest.mark.anyio


async def test_v9_member_id_required_then_joined(node: GroupNode) -> None:
    await ready(node)
    first = await join(node, version=9)
    assert first.error_code is ErrorCode.member_id_required and first.member_id
    second = await join(node, member_id=first.member_id, version=9)
    assert second.error_code is ErrorCode.none
    assert second.generation_id == 1 and second.leader == first.member_id
    assert second.protocol_type == "consumer" and second.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in second.members] == [(first.member_id, b"meta")]
    desc = node.group_coordinator.describe_group("g")[1]
    assert desc is not None and desc.members[0].client_host == "/127.0.0.1"
    assert desc.members[0].client_id == "client"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_old_versions_join_directly(node: GroupNode, version: int) -> None:
    await ready(node)
    resp = await join(node, f"g{version}", version=version)
    assert resp.error_code is ErrorCode.none and resp.generation_id == 1
    assert resp.protocol_name == "range"


async def test_v0_uses_session_timeout_as_rebalance_timeout(node: GroupNode) -> None:
    await ready(node)
    await join(node, "g0", version=0, session_ms=7000)
    _, coord = node.group_coordinator.coordinator_for("g0")
    [m] = coord.groups["g0"].members.values()
    assert m.rebalance_timeout_ms == 7000 and m.session_timeout_ms == 7000


async def test_not_coordinator_and_load_in_progress(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4, leader=7)
    assert (await join(node)).error_code is ErrorCode.not_coordinator
    node.add_topic(OFFSETS_TOPIC, 4, leader=1, epoch=1)  # leadership gained: load starts
    assert (await join(node)).error_code is ErrorCode.coordinator_load_in_progress
    await node.wait_loaded()
    assert (await join(node)).error_code is ErrorCode.member_id_required


async def test_losing_leadership_answers_waiting_join_not_coordinator(node: GroupNode) -> None:
    await ready(node)
    a = await join_fully(node, session_ms=60_000, rebalance_ms=60_000)
    b_first = await join(node, session_ms=60_000, rebalance_ms=60_000)
    waiting = asyncio.ensure_future(join(node, member_id=b_first.member_id,
                                         session_ms=60_000, rebalance_ms=60_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # a has not rejoined
    node.add_topic(OFFSETS_TOPIC, 4, leader=7, epoch=2)
    resp = await asyncio.wait_for(waiting, 2)
    assert resp.error_code is ErrorCode.not_coordinator
    assert node.group_coordinator.coordinators == {}
    assert a.error_code is ErrorCode.none


async def test_rebalance_completes_when_everyone_rejoins(node: GroupNode) -> None:
    await ready(node)
    a = await join_fully(node)
    b_first = await join(node)
    waiting = asyncio.ensure_future(join(node, member_id=b_first.member_id))
    await asyncio.sleep(0.02)
    rejoin = await join(node, member_id=a.member_id)
    b = await asyncio.wait_for(waiting, 2)
    assert rejoin.generation_id == b.generation_id == 2
    assert rejoin.leader == a.member_id and len(rejoin.members) == 2 and b.members == ()
