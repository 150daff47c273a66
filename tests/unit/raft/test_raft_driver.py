"""The asyncio driver, three of them in one event loop, talking through
Kafka-framed kio bytes over an in-process transport."""

from __future__ import annotations

import asyncio
from random import Random
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader

from broker.protocol import headers
from raft.config import RaftConfig, parse_voters
from raft.core import NotLeaderError
from raft.driver import RaftDriver
from raft.messages import Batch, SnapshotId
from raft.store import MemoryLogStore, MemoryQuorumStateStore

pytestmark = pytest.mark.timeout(30)


class Loopback:
    def __init__(self, nodes: dict[int, RaftDriver], down: set[int]) -> None:
        self.nodes = nodes
        self.down = down

    async def request(self, dst: int, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any:
        if dst in self.down:
            raise ConnectionRefusedError("down")
        frame = headers.encode_request(api_key, version, 1, "t", request)
        k, v, _cid, req = headers.decode_request(frame[4:])
        resp = await asyncio.wait_for(self.nodes[dst].handle_request(k, v, req), timeout_s)
        out = headers.encode_response(resp, 1, api=(k, v))[4:]
        _h, hs = entity_reader(ResponseHeader)(out, 0)
        return entity_reader(load_response_schema(api_key, version))(out, hs)[0]

    async def close(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []
        self.leaders: list[tuple[int, int, int]] = []

    def on_commit(self, batches: list[Batch]) -> None:
        for b in batches:
            if not b.control:
                self.records += [(b.base_offset + i, r) for i, r in enumerate(b.records)]

    def on_snapshot_load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.records = []

    def on_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch, len(self.records)))


def cluster() -> tuple[dict[int, RaftDriver], dict[int, Recorder], set[int]]:
    voters = parse_voters("1@h:1,2@h:2,3@h:3")
    nodes: dict[int, RaftDriver] = {}
    recs: dict[int, Recorder] = {}
    down: set[int] = set()
    for i in (1, 2, 3, 4):  # 4 is an observer, as a broker is
        # Timeouts leave room for a loaded 2-core CI machine: at 100/150 ms a
        # stalled event loop once cost the first leader its term mid-test.
        cfg = RaftConfig(node_id=i, voters=voters, election_timeout_ms=400,
                         fetch_timeout_ms=600, election_backoff_max_ms=100,
                         fetch_max_wait_ms=50, append_linger_ms=2, request_timeout_ms=500)
        nodes[i] = RaftDriver(cfg, MemoryLogStore(), MemoryQuorumStateStore(),
                              Loopback(nodes, down), Random(i))
        recs[i] = Recorder()
        nodes[i].register(recs[i])
    return nodes, recs, down


async def leader_of(nodes: dict[int, RaftDriver], down: set[int]) -> int:
    for _ in range(600):
        leaders = [i for i, n in nodes.items() if n.is_leader and i not in down]
        if leaders:
            return leaders[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no leader")


async def _scenario() -> None:
    nodes, recs, down = cluster()
    for n in nodes.values():
        await n.start()
    lid = await leader_of(nodes, down)
    follower = next(i for i in nodes if i != lid)
    with pytest.raises(NotLeaderError) as e:
        await nodes[follower].append([b"no"])
    assert e.value.error_code == ErrorCode.not_leader_or_follower

    offs = await asyncio.gather(*(nodes[lid].append([f"r{i}".encode()]) for i in range(20)))
    assert sorted(offs) == list(offs) and len(set(offs)) == 20
    assert nodes[lid].high_watermark > offs[-1]
    for _ in range(100):
        if all(len(r.records) == 20 for r in recs.values()):
            break
        await asyncio.sleep(0.01)
    assert all(r.records == recs[lid].records for r in recs.values())
    assert nodes[4].leader_and_epoch == (lid, nodes[lid].core.epoch)  # the observer follows
    with pytest.raises(NotLeaderError):
        await nodes[4].append([b"observers never lead"])
    obs = nodes[lid].describe_quorum().topics[0].partitions[0].observers
    assert [o.replica_id for o in obs] == [4]
    assert nodes[follower].leader_and_epoch == (lid, nodes[lid].core.epoch)

    # metrics measured by the driver (the core has no clock): the leader's election was
    # timed, followers and the observer counted the records they fetched
    assert nodes[lid].stats.election_latency_count >= 1
    assert 0 < nodes[lid].stats.election_latency_max <= nodes[lid].stats.election_latency_sum
    assert nodes[follower].stats.fetched_records >= 20
    assert nodes[4].stats.fetched_records >= 20
    assert nodes[4].stats.election_latency_count == 0  # an observer never stands
    elections_before = {i: n.stats.election_latency_count for i, n in nodes.items()}

    dq = nodes[lid].describe_quorum()
    p = dq.topics[0].partitions[0]
    assert p.leader_id == lid and [v.replica_id for v in p.current_voters] == [1, 2, 3]

    # the leader goes away: the others elect a new one and keep every record
    down.add(lid)
    await nodes[lid].stop()
    new = await leader_of(nodes, down)
    assert new != lid
    await nodes[new].append([b"after"])
    for _ in range(600):  # the observer finds the new leader through any voter
        if recs[4].records and recs[4].records[-1][1] == b"after":
            break
        await asyncio.sleep(0.01)
    assert recs[4].records[-1][1] == b"after"
    assert recs[new].records[:20] == recs[lid].records
    # ready: everything of earlier epochs is delivered to the new leader's state machine
    assert nodes[new].leader_ready and len(recs[new].records) >= 21
    assert nodes[new].stats.election_latency_count > elections_before[new]
    for i, n in nodes.items():
        if i not in down:
            await n.stop()


def test_three_drivers_elect_replicate_and_fail_over() -> None:
    asyncio.run(_scenario())


def test_requests_from_another_cluster_are_refused() -> None:
    from raft import kafka_messages
    from raft.messages import VoteRequest

    async def run() -> None:
        cfg = RaftConfig(node_id=1, voters=parse_voters("1@h:1,2@h:2,3@h:3"), cluster_id="A")
        d = RaftDriver(cfg, MemoryLogStore(), MemoryQuorumStateStore(),
                       Loopback({}, set()), Random(1))
        await d.start()
        k, v, req = kafka_messages.encode_request(VoteRequest(1, 2, 0, 0, True), "B")
        resp = await d.handle_request(k, v, req)
        assert resp.error_code == ErrorCode.inconsistent_cluster_id  # type: ignore[attr-defined]
        k, v, req = kafka_messages.encode_request(VoteRequest(1, 2, 0, 0, True), "A")
        resp = await d.handle_request(k, v, req)
        assert resp.topics[0].partitions[0].vote_granted  # type: ignore[attr-defined]
        await d.stop()

    asyncio.run(run())
