"""StreamsGroupHeartbeat (KIP-1071) through the handler and the shell: the feature gate,
internal topic creation, the assignment and its reconciliation between two members."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    node_fixture,
    ready,
)
from kio.schema.errors import ErrorCode
from streams_group_support import (  # noqa: F401
    active,
    enable_streams,
    heartbeat,
    plugin_node_fixture,
    streams_node_fixture,
)

from broker.group.records import OFFSETS_TOPIC
from broker.group.streams import ASSIGNMENT_DELAYED, MISSING_INTERNAL_TOPICS

pytestmark = pytest.mark.anyio


async def test_streams_version_0_refuses(node: GroupNode) -> None:
    enable_streams(node, 0)
    node.add_topic("input", 3)
    await ready(node)
    r = await heartbeat(node, "a", 0)
    assert r.error_code is ErrorCode.unsupported_version
    assert "streams.version" in r.error_message


async def test_internal_topics_created_then_tasks_assigned(tmp_path: Path) -> None:
    node = GroupNode(tmp_path, **{"group.streams.initial.rebalance.delay.ms": 300,
                                  "group.streams.task.offset.interval.ms": 20000})
    enable_streams(node)
    await node.start()
    try:
        await _internal_topics_then_tasks(node)
    finally:
        await node.stop()


async def _internal_topics_then_tasks(node: GroupNode) -> None:
    node.add_topic("input", 3)
    await ready(node)
    r = await heartbeat(node, "a", 0)
    # the first assignment waits group.streams.initial.rebalance.delay.ms: an epoch, no tasks
    assert r.error_code is ErrorCode.none and r.member_epoch == 1
    assert r.heartbeat_interval == datetime.timedelta(seconds=5)
    # v0's AcceptableRecoveryLagLegacy: Kafka 4.4 leaves it 0 (it sets only v1's int64)
    assert r.acceptable_recovery_lag == 0
    assert r.task_offset_interval == datetime.timedelta(seconds=20)
    assert [s.status_code for s in r.status] == [ASSIGNMENT_DELAYED, MISSING_INTERNAL_TOPICS]
    assert r.active_tasks == ()
    for _ in range(100):
        if {"app-rep", "app-changelog"} <= set(node.metadata.topics_by_name):
            break
        await asyncio.sleep(0.01)
    made = {t.name: (t.num_partitions, dict(t.configs)) for t in node.controller.calls
            if t.name.startswith("app-")}
    assert made == {"app-rep": (3, {}), "app-changelog": (3, {"cleanup.policy": "compact"})}
    r = await heartbeat(node, "a", 1, owned=())
    assert [s.status_code for s in r.status] == [ASSIGNMENT_DELAYED]
    await asyncio.sleep(0.35)
    r = await heartbeat(node, "a", r.member_epoch, owned=())
    assert r.error_code is ErrorCode.none and r.status == () and r.member_epoch > 1
    assert active(r) == (("0", (0, 1, 2)), ("1", (0, 1, 2)))


async def test_second_member_waits_for_revocation(streams_node: GroupNode) -> None:
    node = streams_node
    for name in ("input", "app-rep", "app-changelog"):
        node.add_topic(name, 2)
    await ready(node)
    a = await heartbeat(node, "a", 0)
    assert a.member_epoch == 1 and len(sum((ps for _, ps in active(a)), ())) == 4
    b = await heartbeat(node, "b", 0)
    assert b.member_epoch == 2 and b.active_tasks == ()
    a = await heartbeat(node, "a", a.member_epoch, owned=active(a))
    kept = active(a)
    assert a.member_epoch == 1 and len(sum((ps for _, ps in kept), ())) == 2
    a = await heartbeat(node, "a", 1, owned=kept)
    assert a.member_epoch == 2
    b = await heartbeat(node, "b", 2, owned=())
    got = {(s, p) for s, ps in active(b) for p in ps}
    assert len(got) == 2 and not got & {(s, p) for s, ps in kept for p in ps}


async def test_errors(node: GroupNode) -> None:
    enable_streams(node)
    node.add_topic("input", 1)
    await ready(node)
    r = await heartbeat(node, "x", 3)
    assert r.error_code is ErrorCode.unknown_member_id
    r = await heartbeat(node, "", 0)
    assert r.error_code is ErrorCode.invalid_request and r.error_message
    node.add_topic(OFFSETS_TOPIC, 4, leader=5, epoch=3)
    r = await heartbeat(node, "a", 0)
    assert r.error_code is ErrorCode.not_coordinator


async def test_internal_topics_need_create_on_the_cluster_or_topic(
        streams_node: GroupNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """A principal without CREATE gets no internal topics created, and is told which."""
    from broker.handlers import _authz, streams_group_heartbeat

    def allowed(node: object, ctx: object, op: object, res: object, name: str = "") -> bool:
        if op is _authz.Op.CREATE:
            return res is _authz.Res.TOPIC and name == "app-rep"
        return True

    monkeypatch.setattr(streams_group_heartbeat, "allowed", allowed)
    node = streams_node
    node.add_topic("input", 2)
    await ready(node)
    r = await heartbeat(node, "a", 0)
    [(code, detail)] = [(s.status_code, s.status_detail) for s in r.status]
    assert code == MISSING_INTERNAL_TOPICS
    assert detail.endswith("Unauthorized to CREATE on topics app-changelog.")
    await asyncio.sleep(0.05)
    assert [t.name for t in node.controller.calls if t.name.startswith("app-")] == ["app-rep"]


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("epoch", [0, 1, -1, -2])
async def test_null_fields_are_answered(streams_node: GroupNode, epoch: int,
                                        version: int) -> None:
    """Every nullable field null (tests/support/probe.py): an answer, never a failure."""
    from dataclasses import replace

    from group_node import ctx, encodes, request_class

    from broker.handlers import streams_group_heartbeat
    from tests.support.probe import null_probe

    await ready(streams_node)
    req = replace(null_probe(request_class("streams_group_heartbeat", version,
                                           "StreamsGroupHeartbeatRequest")),
                  group_id="g", member_id="m", member_epoch=epoch)
    r = encodes(await streams_group_heartbeat.handle(streams_node, ctx(88, version), req))
    assert r.error_code in (ErrorCode.invalid_request, ErrorCode.unknown_member_id,
                            ErrorCode.streams_invalid_topology, ErrorCode.none)


# ---- v1 (KIP-1331) --------------------------------------------------------------------------


async def test_v1_without_a_plugin_never_asks_for_the_description(
        streams_node: GroupNode) -> None:
    """Kafka 4.4's default (no group.streams.topology.description.plugin.class): v1 answers
    as v0 does, with the int64 AcceptableRecoveryLag and TopologyDescriptionRequired false."""
    node = streams_node
    for name in ("input", "app-rep", "app-changelog"):
        node.add_topic(name, 2)
    await ready(node)
    r = await heartbeat(node, "a", 0, version=1)
    assert r.error_code is ErrorCode.none and r.member_epoch == 1
    assert type(r).__version__ == 1
    assert r.acceptable_recovery_lag == 10000 and r.topology_description_required is False
    r = await heartbeat(node, "a", 1, owned=active(r), version=1)
    assert r.topology_description_required is False


async def test_v1_carries_the_groups_acceptable_recovery_lag(tmp_path: Path) -> None:
    """v1's int64 AcceptableRecoveryLag is group.streams.acceptable.recovery.lag (v0's
    legacy field stays 0, as Kafka 4.4 leaves it)."""
    node = GroupNode(tmp_path, **{"group.streams.initial.rebalance.delay.ms": 0,
                                  "group.streams.acceptable.recovery.lag": 12345})
    enable_streams(node)
    await node.start()
    try:
        for name in ("input", "app-rep", "app-changelog"):
            node.add_topic(name, 2)
        await ready(node)
        r = await heartbeat(node, "a", 0, version=1)
        assert r.error_code is ErrorCode.none and r.acceptable_recovery_lag == 12345
        r0 = await heartbeat(node, "b", 0)
        assert r0.error_code is ErrorCode.none and r0.acceptable_recovery_lag == 0
    finally:
        await node.stop()


async def test_v1_asks_one_member_per_back_off_window(plugin_node: GroupNode) -> None:
    """With the plugin: the first v1 heartbeat of a group whose description the plugin does
    not hold is asked for it; the next ones are not while the back-off window (30 s) runs,
    nor a v0 member, nor a leaving one."""
    node = plugin_node
    await ready(node)
    r0 = await heartbeat(node, "v0", 0)  # v0: cannot be asked, opens no window
    assert not hasattr(r0, "topology_description_required")
    a = await heartbeat(node, "a", 0, version=1)
    assert a.error_code is ErrorCode.none and a.topology_description_required is True
    b = await heartbeat(node, "b", 0, version=1)
    assert b.error_code is ErrorCode.none and b.topology_description_required is False
    a = await heartbeat(node, "a", a.member_epoch, owned=active(a), version=1)
    assert a.topology_description_required is False
    left = await heartbeat(node, "b", -1, version=1)
    assert left.topology_description_required is False
