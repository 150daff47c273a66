"""Heartbeat: errors by group state, and session expiry driven by the shell's tick."""

from __future__ import annotations

import asyncio

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
    sync,
)
from kio.schema.errors import ErrorCode

from broker.handlers import heartbeat

pytestmark = pytest.mark.anyio


async def beat(node: GroupNode, member: str, generation: int, version: int = 4) -> ErrorCode:
    req = request("heartbeat", version, "HeartbeatRequest", group_id="g",
                  generation_id=generation, member_id=member, group_instance_id=None)
    resp = encodes(await heartbeat.handle(node, ctx(12, version), req))
    return resp.error_code


@pytest.mark.parametrize("version", [0, 4])
async def test_heartbeat_errors(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node)
    assert await beat(node, a.member_id, a.generation_id, version) is ErrorCode.none
    assert await beat(node, "x", a.generation_id, version) is ErrorCode.unknown_member_id
    assert await beat(node, a.member_id, 9, version) is ErrorCode.illegal_generation
    waiting = asyncio.ensure_future(join(node))  # MEMBER_ID_REQUIRED: no rebalance yet
    await waiting
    second = asyncio.ensure_future(join(node, member_id=waiting.result().member_id))
    await asyncio.sleep(0.02)
    assert await beat(node, a.member_id, a.generation_id, version) \
        is ErrorCode.rebalance_in_progress
    second.cancel()


async def test_session_expiry_by_tick_removes_silent_member(node: GroupNode) -> None:
    await ready(node)
    a = await join_fully(node, session_ms=200)
    await sync(node, "g", a.member_id, a.generation_id, assignments=())
    await asyncio.sleep(0.5)  # the shell ticks every 20 ms in this harness
    assert await beat(node, a.member_id, a.generation_id) is ErrorCode.unknown_member_id
    desc = node.group_coordinator.describe_group("g")[1]
    assert desc is not None and desc.state == "Empty"
