"""OffsetForLeaderEpoch v2-4 answered from the leader's epoch cache, with Kafka's errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import offset_for_leader_epoch
from broker.protocol.kio_build import build
from broker.testing.inprocess_cluster import FAST, Cluster, batch, run
from tests.unit.handlers.conftest import make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module


def request(version: int, *parts: tuple[str, int, int, int]) -> Any:
    """parts: (topic, partition, current_leader_epoch, leader_epoch)."""
    m = schema_module("offset_for_leader_epoch", version)
    topics: dict[str, list[Any]] = {}
    for topic, index, current, epoch in parts:
        topics.setdefault(topic, []).append(build(
            m.OffsetForLeaderPartition, partition=index, current_leader_epoch=current,
            leader_epoch=epoch))
    return build(m.OffsetForLeaderEpochRequest, replica_id=-1, topics=tuple(
        build(m.OffsetForLeaderTopic, topic=t, partitions=tuple(ps)) for t, ps in topics.items()))


@pytest.mark.parametrize("version", [2, 3, 4])
def test_end_offsets_by_epoch_and_errors(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        # The follower must still be in the ISR when the leader is fenced: a lag time far
        # above any stall (at FAST's 400 ms, one CI run under load shrank the ISR first,
        # and the fence left the partition without a leader).
        c = Cluster(tmp_path, ids=(1, 2),
                    settings=dataclasses.replace(FAST, lag_time_max_ms=30_000))
        await c.start()
        try:
            await c.create_topic("t", [1, 2])
            first = c.metadata.partition("t", 0)
            assert first is not None
            e0 = first.leader_epoch
            await c.brokers[1].replicas.append({("t", 0): batch(b"a", b"b", b"c")},
                                               required_acks=-1, timeout_ms=5000)
            await c.heartbeat(1, want_fence=True)
            second = c.metadata.partition("t", 0)
            assert second is not None and second.leader == 2
            e1 = second.leader_epoch
            leader = c.brokers[2]
            await leader.replicas.append({("t", 0): batch(b"d", b"e")}, required_acks=1,
                                         timeout_ms=5000)

            async def ask(node: Any, *parts: tuple[str, int, int, int]) -> list[Any]:
                resp = await offset_for_leader_epoch.handle(
                    node, make_ctx(23, version), request(version, *parts))
                roundtrip(resp)
                return [p for t in resp.topics for p in t.partitions]

            got = await ask(leader, ("t", 0, e1, e0), ("t", 0, e1, e1), ("t", 0, -1, e1 + 5))
            assert [(p.error_code, p.leader_epoch, p.end_offset) for p in got] == [
                (ErrorCode.none, e0, 3),       # epoch e0 ends where e1 starts
                (ErrorCode.none, e1, 5),       # the latest epoch ends at the log end
                (ErrorCode.none, -1, -1),      # an epoch the leader never had
            ]
            got = await ask(leader, ("t", 0, e0, e0), ("t", 0, e1 + 1, e0), ("t", 3, -1, e0),
                            ("nope", 0, -1, 0))
            assert [p.error_code for p in got] == [
                ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition,
            ]
            assert all((p.leader_epoch, p.end_offset) == (-1, -1) for p in got)
            [p] = await ask(c.brokers[1], ("t", 0, -1, e0))
            assert p.error_code is ErrorCode.not_leader_or_follower
        finally:
            await c.stop()

    run(main)


@pytest.mark.parametrize("version", [0, 1])
def test_legacy_versions_without_fencing(tmp_path: Path, version: int) -> None:
    """v0-v1 carry no current leader epoch (nothing to fence); v0 answers the end offset only."""
    async def main() -> None:
        c = Cluster(tmp_path, ids=(1,))
        await c.start()
        try:
            await c.create_topic("t", [1])
            part = c.metadata.partition("t", 0)
            assert part is not None
            epoch = part.leader_epoch
            leader = c.brokers[1]
            await leader.replicas.append({("t", 0): batch(b"a", b"b")}, required_acks=1,
                                         timeout_ms=5000)
            resp = await offset_for_leader_epoch.handle(
                leader, make_ctx(23, version),
                request(version, ("t", 0, -1, epoch), ("t", 0, -1, epoch + 3), ("u", 0, -1, 0)))
            roundtrip(resp)
            got = [p for t in resp.topics for p in t.partitions]
            assert [(p.error_code, p.end_offset) for p in got] == [
                (ErrorCode.none, 2), (ErrorCode.none, -1),
                (ErrorCode.unknown_topic_or_partition, -1)]
            assert all(hasattr(p, "leader_epoch") == (version == 1) for p in got)
            if version == 1:
                assert got[0].leader_epoch == epoch
        finally:
            await c.stop()
    run(main)
