"""SyncGroup: the leader's assignment is written to __consumer_offsets before anyone gets it."""

from __future__ import annotations

import asyncio

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    join,
    join_fully,
    node_fixture,
    offsets_log_records,
    ready,
    sync,
)
from kio.schema.errors import ErrorCode

from broker.group import records as rec

pytestmark = pytest.mark.anyio


async def test_leader_assignment_reaches_every_member_and_the_log(node: GroupNode) -> None:
    await ready(node)
    a = await join_fully(node)
    b_first = await join(node)
    b_task = asyncio.ensure_future(join(node, member_id=b_first.member_id))
    await asyncio.sleep(0.02)
    a2 = await join(node, member_id=a.member_id)
    b = await b_task
    gen = a2.generation_id
    follower = asyncio.ensure_future(sync(node, "g", b.member_id, gen))
    await asyncio.sleep(0.02)
    assert not follower.done()
    lead = await sync(node, "g", a.member_id, gen,
                      assignments=((a.member_id, b"for-a"), (b.member_id, b"for-b")))
    assert lead.error_code is ErrorCode.none and lead.assignment == b"for-a"
    assert lead.protocol_name == "range"
    f = await asyncio.wait_for(follower, 2)
    assert f.error_code is ErrorCode.none and f.assignment == b"for-b"
    groups = [r for r in offsets_log_records(node)
              if rec.decode_key(r.key) == rec.GroupMetadataKey("g")]
    value = rec.decode_group_metadata_value(groups[-1].value)
    assert value.generation == gen and value.leader == a.member_id
    assert {m.member_id: m.assignment for m in value.members} == {
        a.member_id: b"for-a", b.member_id: b"for-b"}


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_versions_and_errors(node: GroupNode, version: int) -> None:
    await ready(node)
    a = await join_fully(node)
    bad = await sync(node, "g", a.member_id, a.generation_id + 1, version=version)
    assert bad.error_code is ErrorCode.illegal_generation
    ok = await sync(node, "g", a.member_id, a.generation_id, version=version,
                    assignments=((a.member_id, b"x"),))
    assert ok.error_code is ErrorCode.none and ok.assignment == b"x"
    unknown = await sync(node, "g", "nobody", a.generation_id, version=version)
    assert unknown.error_code is ErrorCode.unknown_member_id
