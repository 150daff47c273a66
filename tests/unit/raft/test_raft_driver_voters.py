"""KIP-853 through the asyncio driver: a quorum bootstrapped --standalone on node 1, nodes 2
and 3 formatted without a voter set find it through controller.quorum.bootstrap.servers,
then AddRaftVoter (80) / RemoveRaftVoter (81) as kio requests over Kafka framing."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from random import Random
from typing import Any

import pytest
from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest, Listener
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32, i32Timedelta, u16

from raft.config import RaftConfig, VoterAddress
from raft.control import Endpoint, Voter
from raft.driver import RaftDriver
from raft.store import MemoryLogStore, MemoryQuorumStateStore
from tests.unit.raft.test_raft_driver import Loopback, Recorder

pytestmark = pytest.mark.timeout(30)

DIRS = {i: uuid.UUID(int=1000 + i) for i in (1, 2, 3)}


class BootstrapLoopback(Loopback):
    async def request(self, dst: int, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any:
        return await super().request(1 if dst == -1 else dst, api_key, version, request,
                                     timeout_s)


def _add(i: int, timeout_s: float = 5.0) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(
        cluster_id=None, timeout=i32Timedelta.parse(datetime.timedelta(seconds=timeout_s)),
        voter_id=i32(i), voter_directory_id=DIRS.get(i, uuid.UUID(int=i)),
        listeners=(Listener(name="CONTROLLER", host="h", port=u16(i)),),
        ack_when_committed=True)


async def _until(pred: Any) -> None:
    for _ in range(500):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def _scenario() -> None:
    nodes: dict[int, RaftDriver] = {}
    down: set[int] = set()
    transport = BootstrapLoopback(nodes, down)
    standalone = (Voter(1, DIRS[1], (Endpoint("CONTROLLER", "h", 1),)),)
    for i in (1, 2, 3):
        cfg = RaftConfig(node_id=i, bootstrap_servers=(VoterAddress(-1, "h", 1),),
                         election_timeout_ms=400, fetch_timeout_ms=600,
                         election_backoff_max_ms=100, fetch_max_wait_ms=50,
                         append_linger_ms=2, request_timeout_ms=500)
        nodes[i] = RaftDriver(cfg, MemoryLogStore(), MemoryQuorumStateStore(), transport,
                              Random(i), directory_id=DIRS[i],
                              bootstrap_voters=standalone if i == 1 else None)
        nodes[i].register(Recorder())
        await nodes[i].start()
    await _until(lambda: nodes[1].is_leader and nodes[1].leader_ready)
    await nodes[1].append([b"a"])
    # observers find the leader through the bootstrap server and learn the voter set
    await _until(lambda: all(nodes[i].core.voters == {1} for i in (2, 3))
                 and all(nodes[i].high_watermark == nodes[1].high_watermark for i in (2, 3)))
    # observers are described with the directory id their Fetch named, as Kafka does
    obs = nodes[1].describe_quorum().topics[0].partitions[0].observers
    assert [(o.replica_id, o.replica_directory_id) for o in obs] == [(2, DIRS[2]), (3, DIRS[3])]
    resp = await nodes[1].handle_request(80, 1, _add(2))
    assert resp.error_code == ErrorCode.none, resp
    assert nodes[1].core.voters == {1, 2}
    resp = await nodes[1].handle_request(80, 1, _add(2))
    assert resp.error_code == ErrorCode.duplicate_voter
    # no such observer: the leader waits for it to catch up until the request's timeout
    t0 = asyncio.get_running_loop().time()
    resp = await nodes[1].handle_request(80, 1, _add(5, timeout_s=0.3))
    assert resp.error_code == ErrorCode.request_timed_out
    assert asyncio.get_running_loop().time() - t0 >= 0.25
    # node 3 is added as soon as it has caught up (the leader waits for it)
    resp = await nodes[1].handle_request(80, 1, _add(3))
    assert resp.error_code == ErrorCode.none, resp
    await _until(lambda: all(nodes[i].core.is_voter for i in (1, 2, 3)))
    dq = nodes[1].describe_quorum().topics[0].partitions[0]
    assert [(v.replica_id, v.replica_directory_id) for v in dq.current_voters] == \
        [(i, DIRS[i]) for i in (1, 2, 3)]
    # the leader removes itself: it resigns once that is committed; 2 or 3 take over
    resp = await nodes[1].handle_request(81, 0, RemoveRaftVoterRequest(
        cluster_id=None, voter_id=i32(1), voter_directory_id=DIRS[1]))
    assert resp.error_code == ErrorCode.none, resp
    await _until(lambda: any(nodes[i].is_leader for i in (2, 3)))
    new = next(i for i in (2, 3) if nodes[i].is_leader)
    assert nodes[new].core.voters == {2, 3} and not nodes[1].core.is_voter
    await nodes[new].append([b"after"])
    for n in nodes.values():
        await n.stop()


def test_standalone_quorum_grows_and_its_leader_leaves() -> None:
    asyncio.run(_scenario())
