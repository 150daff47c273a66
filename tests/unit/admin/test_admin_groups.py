"""GroupService over a real GroupCoordinatorService on the admin test node.

Groups are made through the Kafka handlers (OffsetCommit with generation -1 for a group with
offsets and no members; JoinGroup + SyncGroup for a group with an active member), and their
state is checked afterwards through the coordinator, not only through the admin API.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.admin.groups import decode_assignment
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import GroupCoordinatorService
from broker.protocol.records import Record, build_batch
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of
from tests.unit.handlers.conftest import NODE_ID
from tests.unit.handlers.group_node import commit, commit_errors, join_fully, sync

S = grpc.StatusCode
G = pb.groups
T0 = 1_700_000_000_000  # record timestamps: T0 + 1000 * offset


@pytest.fixture
def gnode(tmp_path: Path) -> Iterator[AdminTestNode]:
    n = AdminTestNode(tmp_path, {"group.initial.rebalance.delay.ms": "0",
                                 "offsets.topic.num.partitions": "2"})
    asyncio.run(n.register(NODE_ID))
    n.ready.set()
    yield n
    n.close()


def run(node: AdminTestNode, body: Callable[[Admin], Awaitable[Any]],
        offsets_topic: bool = True) -> Any:
    """serve() with a GroupCoordinatorService started on the node for the body's lifetime."""

    async def wrapped(a: Admin) -> Any:
        svc = GroupCoordinatorService(node, tick_interval_s=0.02)
        node.group_coordinator = svc  # type: ignore[attr-defined]
        svc.start()
        try:
            if not offsets_topic:
                return await body(a)
            assert (await svc.ensure_offsets_topic()).name == "none"
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while len(svc.coordinators) < svc.partition_count():
                assert loop.time() < deadline, "offsets partitions never loaded"
                await asyncio.sleep(0.01)
            return await body(a)
        finally:
            await svc.stop()

    return serve(node, wrapped)


async def produce(node: AdminTestNode, topic: str, partition: int, n: int) -> None:
    part = node.replicas.get(topic, partition)
    assert part is not None
    base = part.log.log_end_offset
    batch = build_batch([Record(timestamp=T0 + 1000 * (base + i), key=None, value=b"v")
                         for i in range(n)])
    results = await node.replicas.append({(topic, partition): batch}, required_acks=-1,
                                         timeout_ms=5000)
    assert not isinstance(results[(topic, partition)], Exception)


def assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def subscription(topics: list[str]) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def committed(node: AdminTestNode, group: str) -> dict[tuple[str, int], int]:
    res = node.group_coordinator.fetch_offsets(group, None)  # type: ignore[attr-defined]
    return {(f.topic, f.partition): f.offset for f in res.partitions}


async def setup_topic(node: AdminTestNode) -> None:
    await node.create_topic("t", partitions=2)
    await produce(node, "t", 0, 10)
    await produce(node, "t", 1, 4)


def test_decode_assignment_reads_the_consumer_protocol_and_rejects_garbage() -> None:
    assert decode_assignment(assignment({"t": [0, 1], "u": [3]})) == [
        ("t", 0), ("t", 1), ("u", 3)]
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00\x00\x7f\xff\xff\xff") == []
    assert decode_assignment(assignment({"t": [0]})[:-8]) == []


def test_list_and_describe_show_offsets_and_lag(gnode: AdminTestNode) -> None:
    async def body(a: Admin) -> tuple[Any, Any, Any, Any]:
        await setup_topic(gnode)
        errs = commit_errors(await commit(gnode, "g", {("t", 0): 3, ("t", 1): 4}))  # type: ignore[arg-type]
        assert set(errs.values()) == {0}
        listed = await a.groups.ListGroups(G.ListGroupsRequest())
        stable_only = await a.groups.ListGroups(G.ListGroupsRequest(states=["Stable"]))
        desc = await a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="g"))
        missing = await status_of(a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="x")))
        return listed, stable_only, desc, missing

    listed, stable_only, desc, missing = run(gnode, body)
    assert [(g.group_id, g.state, g.type) for g in listed.groups] == [("g", "Empty", "classic")]
    assert list(stable_only.groups) == []
    assert desc.state == "Empty" and desc.coordinator_id == NODE_ID and not desc.members
    assert [(o.topic, o.partition, o.committed_offset, o.log_end_offset, o.lag)
            for o in desc.offsets] == [("t", 0, 3, 10, 7), ("t", 1, 4, 4, 0)]
    assert missing[0] == S.NOT_FOUND and "x" in missing[1]


def test_describe_active_group_shows_members_and_reset_is_refused(gnode: AdminTestNode) -> None:
    async def body(a: Admin) -> tuple[Any, ...]:
        await setup_topic(gnode)
        j = await join_fully(gnode, "live", protocols=(("range", subscription(["t"])),))  # type: ignore[arg-type]
        assert j.error_code.value == 0, j
        s = await sync(gnode, "live", j.member_id, j.generation_id,  # type: ignore[arg-type]
                       assignments=((j.member_id, assignment({"t": [0, 1]})),))
        assert s.error_code.value == 0, s
        await commit(gnode, "live", {("t", 0): 2}, generation=j.generation_id,  # type: ignore[arg-type]
                     member_id=j.member_id)
        desc = await a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="live"))
        reset = await status_of(a.groups.ResetOffsets(G.ResetOffsetsRequest(
            group_id="live", topics=["t"], strategy=G.RESET_STRATEGY_EARLIEST)))
        delete = await status_of(a.groups.DeleteGroup(G.DeleteGroupRequest(group_id="live")))
        del_off = await status_of(a.groups.DeleteOffsets(G.DeleteOffsetsRequest(
            group_id="live", partitions=[pb.partitions.TopicPartition(topic="t", partition=0)])))
        return desc, reset, delete, del_off, committed(gnode, "live")

    desc, reset, delete, del_off, after = run(gnode, body)
    assert desc.state == "Stable" and desc.protocol == "range" and desc.type == "classic"
    [m] = desc.members
    assert [(tp.topic, tp.partition) for tp in m.assignment] == [("t", 0), ("t", 1)]
    assert [(o.partition, o.committed_offset, o.lag, o.member_id) for o in desc.offsets] == [
        (0, 2, 8, m.member_id), (1, -1, -1, m.member_id)]
    assert reset[0] == S.FAILED_PRECONDITION and "Empty" in reset[1]
    assert delete[0] == S.FAILED_PRECONDITION
    assert del_off[0] == S.FAILED_PRECONDITION  # subscribed to t
    assert after == {("t", 0): 2}


def test_reset_strategies_dry_run_and_execute(gnode: AdminTestNode) -> None:
    async def body(a: Admin) -> dict[str, Any]:
        await setup_topic(gnode)
        await commit(gnode, "g", {("t", 0): 5, ("t", 1): 2})  # type: ignore[arg-type]

        async def reset(strategy: int, value: int = 0, dry: bool = True,
                        **where: Any) -> list[tuple[str, int, int]]:
            resp = await a.groups.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", strategy=strategy, value=value, dry_run=dry,
                **(where or {"topics": ["t"]})))
            assert resp.applied is (not dry)
            return [(o.topic, o.partition, o.committed_offset) for o in resp.offsets]

        out = {
            "earliest": await reset(G.RESET_STRATEGY_EARLIEST),
            "latest": await reset(G.RESET_STRATEGY_LATEST),
            "ts": await reset(G.RESET_STRATEGY_TIMESTAMP, T0 + 3500),
            "ts_future": await reset(G.RESET_STRATEGY_TIMESTAMP, T0 + 10**9),
            "offset": await reset(G.RESET_STRATEGY_OFFSET, 6),
            "shift_up": await reset(G.RESET_STRATEGY_SHIFT, 3),
            "shift_down": await reset(G.RESET_STRATEGY_SHIFT, -4),
            "after_dry_runs": committed(gnode, "g"),
            "one": await reset(G.RESET_STRATEGY_EARLIEST, dry=False,
                               partitions=[pb.partitions.TopicPartition(topic="t", partition=1)]),
            "after_one": committed(gnode, "g"),
        }
        out["new_group"] = await reset(G.RESET_STRATEGY_LATEST, dry=False)
        out["after_all"] = committed(gnode, "g")
        return out

    r = run(gnode, body)
    assert r["earliest"] == [("t", 0, 0), ("t", 1, 0)]
    assert r["latest"] == [("t", 0, 10), ("t", 1, 4)]
    assert r["ts"] == [("t", 0, 4), ("t", 1, 4)]  # p1's last record is at T0 + 3000
    assert r["ts_future"] == [("t", 0, 10), ("t", 1, 4)]
    assert r["offset"] == [("t", 0, 6), ("t", 1, 4)]  # clamped to p1's high watermark
    assert r["shift_up"] == [("t", 0, 8), ("t", 1, 4)]
    assert r["shift_down"] == [("t", 0, 1), ("t", 1, 0)]
    assert r["after_dry_runs"] == {("t", 0): 5, ("t", 1): 2}
    assert r["one"] == [("t", 1, 0)]
    assert r["after_one"] == {("t", 0): 5, ("t", 1): 0}
    assert r["after_all"] == {("t", 0): 10, ("t", 1): 4}


def test_delete_offsets_and_group(gnode: AdminTestNode) -> None:
    async def body(a: Admin) -> tuple[Any, ...]:
        await setup_topic(gnode)
        await commit(gnode, "g", {("t", 0): 5, ("t", 1): 2})  # type: ignore[arg-type]
        tp0 = pb.partitions.TopicPartition(topic="t", partition=0)
        await a.groups.DeleteOffsets(G.DeleteOffsetsRequest(group_id="g", partitions=[tp0]))
        after_offsets = committed(gnode, "g")
        await a.groups.DeleteGroup(G.DeleteGroupRequest(group_id="g"))
        listed = await a.groups.ListGroups(G.ListGroupsRequest())
        again = await status_of(a.groups.DeleteGroup(G.DeleteGroupRequest(group_id="g")))
        gone = await status_of(a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="g")))
        no_off = await status_of(a.groups.DeleteOffsets(G.DeleteOffsetsRequest(
            group_id="nope", partitions=[tp0])))
        return after_offsets, committed(gnode, "g"), listed, again, gone, no_off

    after_offsets, after_group, listed, again, gone, no_off = run(gnode, body)
    assert after_offsets == {("t", 1): 2}
    assert after_group == {}
    assert list(listed.groups) == []
    assert again[0] == S.NOT_FOUND and gone[0] == S.NOT_FOUND and no_off[0] == S.NOT_FOUND


def test_bad_arguments_are_invalid_argument(gnode: AdminTestNode) -> None:
    tp = pb.partitions.TopicPartition(topic="t", partition=0)

    async def body(a: Admin) -> list[tuple[Any, str]]:
        await setup_topic(gnode)
        g = a.groups
        return [
            await status_of(g.DescribeGroup(G.DescribeGroupRequest())),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(group_id="g", topics=["t"]))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", strategy=G.RESET_STRATEGY_LATEST))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", topics=["t"], strategy=G.RESET_STRATEGY_OFFSET, value=-1))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", topics=["t"], strategy=G.RESET_STRATEGY_TIMESTAMP, value=-5))),
            await status_of(g.DeleteOffsets(G.DeleteOffsetsRequest(group_id="g"))),
            await status_of(g.DeleteGroup(G.DeleteGroupRequest())),
            # not argument errors, but refused: unknown topic/partition, nothing to shift
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", topics=["nope"], strategy=G.RESET_STRATEGY_LATEST))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", partitions=[pb.partitions.TopicPartition(topic="t", partition=9)],
                strategy=G.RESET_STRATEGY_LATEST))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="fresh", partitions=[tp], strategy=G.RESET_STRATEGY_SHIFT, value=1))),
        ]

    r = run(gnode, body)
    assert [c for c, _ in r] == [S.INVALID_ARGUMENT] * 7 + [S.NOT_FOUND] * 2 + [
        S.FAILED_PRECONDITION]


def test_first_reset_creates_the_offsets_topic(gnode: AdminTestNode) -> None:
    async def body(a: Admin) -> tuple[Any, ...]:
        await setup_topic(gnode)
        before = await status_of(a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="g")))
        listed = await a.groups.ListGroups(G.ListGroupsRequest())
        resp = await a.groups.ResetOffsets(G.ResetOffsetsRequest(
            group_id="g", topics=["t"], strategy=G.RESET_STRATEGY_LATEST))
        return before, listed, resp, gnode.metadata.topic(OFFSETS_TOPIC), committed(gnode, "g")

    before, listed, resp, topic, after = run(gnode, body, offsets_topic=False)
    assert before[0] == S.NOT_FOUND and list(listed.groups) == []
    assert [(o.partition, o.committed_offset) for o in resp.offsets] == [(0, 10), (1, 4)]
    assert topic is not None and after == {("t", 0): 10, ("t", 1): 4}


class _LedElsewhere:
    """The image, except that broker 2 leads every __consumer_offsets partition."""

    def __init__(self, image: Any) -> None:
        self._image = image

    def __getattr__(self, name: str) -> Any:
        return getattr(self._image, name)

    def leader_of(self, topic: str, index: int) -> int:
        return 2 if topic == OFFSETS_TOPIC else int(self._image.leader_of(topic, index))


def test_group_coordinated_elsewhere_is_failed_precondition_naming_it(
        gnode: AdminTestNode, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(a: Admin) -> list[tuple[Any, str]]:
        svc = gnode.group_coordinator  # type: ignore[attr-defined]
        p = svc.partition_of("g")
        loading = await status_of(a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="x")))
        # as if broker 2 had taken the partition over: this node unloads it
        monkeypatch.setattr(svc.runtime, "reconcile", lambda: None)
        svc.runtime.unload(p)
        same_leader = await status_of(a.groups.DescribeGroup(
            G.DescribeGroupRequest(group_id="g")))
        real = AdminTestNode.metadata.fget  # type: ignore[attr-defined]
        monkeypatch.setattr(AdminTestNode, "metadata",
                            property(lambda self: _LedElsewhere(real(self))))
        return [loading, same_leader, await status_of(a.groups.DeleteGroup(
            G.DeleteGroupRequest(group_id="g")))]

    loading, same_leader, elsewhere = run(gnode, body)
    assert loading[0] == S.NOT_FOUND
    assert same_leader[0] == S.UNAVAILABLE  # the image still says this node: loading, retry
    assert elsewhere[0] == S.FAILED_PRECONDITION
    assert "broker 2" in elsewhere[1] and OFFSETS_TOPIC in elsewhere[1]


def test_without_a_coordinator_the_rpcs_are_unavailable(node: AdminTestNode) -> None:
    async def body(a: Admin) -> list[tuple[Any, str]]:
        g = a.groups
        return [await status_of(g.ListGroups(G.ListGroupsRequest())),
                await status_of(g.DescribeGroup(G.DescribeGroupRequest(group_id="g")))]

    assert [c for c, _ in serve(node, body)] == [S.UNAVAILABLE] * 2


def test_describe_streams_group(tmp_path: Path) -> None:
    """A streams group (KIP-1071) describes as type streams, its members with the partitions
    of their active tasks."""
    from broker.group.streams import StreamsHeartbeatRequest, Subtopology, Topology

    node = AdminTestNode(tmp_path, {"offsets.topic.num.partitions": "2",
                                    "group.streams.initial.rebalance.delay.ms": "0"})
    asyncio.run(node.register(NODE_ID))
    node.ready.set()

    async def body(a: Admin) -> Any:
        await setup_topic(node)
        svc = node.group_coordinator  # type: ignore[attr-defined]
        r = svc.streams_group_heartbeat(StreamsHeartbeatRequest(
            group_id="app", member_id="m1", member_epoch=0, rebalance_timeout_ms=1000,
            topology=Topology(1, (Subtopology("0", source_topics=("t",)),)),
            process_id="p1"))
        assert r.error.name == "none" and r.assignment is not None, r
        listed = await a.groups.ListGroups(G.ListGroupsRequest())
        return await a.groups.DescribeGroup(G.DescribeGroupRequest(group_id="app")), listed

    try:
        desc, listed = run(node, body)
    finally:
        node.close()
    assert (desc.type, desc.protocol_type, desc.state) == ("streams", "streams", "Stable")
    [m] = desc.members
    assert m.member_id == "m1"
    assert [(tp.topic, tp.partition) for tp in m.assignment] == [("t", 0), ("t", 1)]
    assert [(g.group_id, g.type) for g in listed.groups] == [("app", "streams")]
