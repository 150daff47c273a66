"""AlterReplicaLogDirs v0-2: a replica moves to another log dir of the broker (a future
replica is filled, then takes its place) with nothing lost while records keep arriving; the
errors Kafka answers per partition; ALTER on the cluster."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import alter_replica_log_dirs, describe_log_dirs
from broker.protocol.kio_build import build
from broker.protocol.records import decode_records
from broker.replication.replica_manager import FetchPartitionRequest
from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import ResourceType as R
from broker.server.dispatch import BoundEntry
from tests.unit.handlers.acl_support import AUTHORIZER, DISPATCHER, allow, ctx_of, dispatch, grant
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import create, produce_ok, records, schema_module


def jbod(node_factory: Any, tmp_path: Path, extra: dict[str, str] | None = None) -> TestNode:
    node: TestNode = node_factory({"log.dirs": f"{tmp_path}/a,{tmp_path}/b", **(extra or {})})
    node.logs.load()  # as a node starts: every log dir exists
    return node


def request(v: int, moves: dict[str, list[tuple[str, int]]]) -> Any:
    m = schema_module("alter_replica_log_dirs", v)
    return build(m.AlterReplicaLogDirsRequest, dirs=tuple(
        build(m.AlterReplicaLogDir, path=path, topics=tuple(
            build(m.AlterReplicaLogDirTopic, name=t, partitions=(p,)) for t, p in tps))
        for path, tps in moves.items()))


async def call(node: TestNode, v: int, req: Any) -> dict[tuple[str, int], ErrorCode]:
    resp = await alter_replica_log_dirs.handle(node, make_ctx(34, v), req)
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return {(t.topic_name, p.partition_index): p.error_code
            for t in resp.results for p in t.partitions}


async def moved(node: TestNode, topic: str, index: int, dest: Path) -> None:
    for _ in range(500):
        if node.logs.log_dir_of(topic, index) == dest and \
                node.logs.future_of(topic, index) is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{topic}-{index} not moved to {dest}")


async def read_all(node: TestNode, topic: str, index: int) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        [res] = await node.replicas.fetch([FetchPartitionRequest(topic, index, offset, 1 << 20)],
                                          replica_id=-1, max_wait_ms=0, min_bytes=0,
                                          max_bytes=1 << 20)
        assert res.error_code is ErrorCode.none
        if res.records is None or not res.records.length:
            return out
        for r in decode_records(res.records.read_bytes()):
            out.append(r.value or b"")
            offset = r.offset + 1


@pytest.mark.parametrize("v", [0, 1, 2])
def test_move_keeps_every_record_while_producing(node_factory: Any, tmp_path: Path,
                                                 v: int) -> None:
    node = jbod(node_factory, tmp_path)
    a, b = node.config.log_dirs

    async def go() -> None:
        await create(node, "t", partitions=2)
        assert node.logs.log_dir_of("t", 0) == a
        sent = []
        for i in range(200):
            sent.append(b"before-%d" % i)
            await produce_ok(node, "t", records(sent[-1]))
        stop = asyncio.Event()

        async def keep_producing() -> None:
            i = 0
            while not stop.is_set():
                sent.append(b"during-%d" % i)
                await produce_ok(node, "t", records(sent[-1]))
                i += 1
                await asyncio.sleep(0)

        writer = asyncio.create_task(keep_producing())
        assert await call(node, v, request(v, {str(b): [("t", 0)]})) == {("t", 0): ErrorCode.none}
        # asked again while under way: still fine
        assert await call(node, v, request(v, {str(b): [("t", 0)]})) == {("t", 0): ErrorCode.none}
        await moved(node, "t", 0, b)
        stop.set()
        await writer
        assert any(s.startswith(b"during-") for s in sent)  # the move overlapped appends
        for i in range(20):
            sent.append(b"after-%d" % i)
            await produce_ok(node, "t", records(sent[-1]))
        assert await read_all(node, "t", 0) == sent
        part = node.replicas.get("t", 0)
        assert part is not None and part.log.dir.parent == b
        assert not (a / "t-0").exists()
        # the controller is to learn the replica's new directory
        assert node.replicas.pending_assignments[("t", 0)][1] == node.logs.dir_id(b)
        resp = await describe_log_dirs.handle(node, make_ctx(35, 4), build(
            schema_module("describe_log_dirs", 4).DescribeLogDirsRequest, topics=None))
        per_dir = {r.log_dir: sorted((t.name, p.partition_index) for t in r.topics
                                     for p in t.partitions) for r in resp.results}
        assert per_dir == {str(a): [], str(b): [("t", 0), ("t", 1)]}
    asyncio.run(go())


def test_errors_per_partition(node_factory: Any, tmp_path: Path) -> None:
    node = jbod(node_factory, tmp_path)
    a, b = node.config.log_dirs

    async def go() -> None:
        await create(node, "t", partitions=2)
        answers = await call(node, 2, request(2, {
            str(tmp_path / "elsewhere"): [("t", 0)],
            str(a): [("t", 0), ("nope", 0)],  # already there / no such replica here
            f"{b}/../b": [("t", 1)],            # the same dir, spelled otherwise
        }))
        assert answers == {("t", 0): ErrorCode.none, ("nope", 0): ErrorCode.replica_not_available,
                           ("t", 1): ErrorCode.none}
        assert node.logs.future_logs() == []  # nothing to move: both were there already
        assert node.logs.preferred_dirs == {("nope", 0): a}
        answers = await call(node, 2, request(2, {str(tmp_path / "elsewhere"): [("t", 0)]}))
        assert answers == {("t", 0): ErrorCode.log_dir_not_found}
        # a failed dir: moving into it, or anything while it is offline
        node.logs.fail_dir(b, OSError(5, "Input/output error"))
        answers = await call(node, 2, request(2, {str(b): [("t", 0)]}))
        assert answers == {("t", 0): ErrorCode.kafka_storage_error}
        answers = await call(node, 2, request(2, {str(a): [("t", 1)]}))
        assert answers == {("t", 1): ErrorCode.kafka_storage_error}  # t-1 was in b
    asyncio.run(go())


def test_a_move_back_cancels_it(node_factory: Any, tmp_path: Path) -> None:
    node = jbod(node_factory, tmp_path)
    a, b = node.config.log_dirs

    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"x"))
        fut = node.logs.create_future("t", 0, b)  # as a move in progress leaves it
        assert fut.path.parent == b and fut.path.name.startswith("t-0.")
        assert fut.path.name.endswith("-future")
        assert await call(node, 1, request(1, {str(a): [("t", 0)]})) == {("t", 0): ErrorCode.none}
        assert node.logs.future_of("t", 0) is None and not fut.path.exists()
        assert node.logs.log_dir_of("t", 0) == a
    asyncio.run(go())


@pytest.mark.parametrize("v", [0, 1, 2])
def test_needs_alter_on_the_cluster(node_factory: Any, tmp_path: Path, v: int) -> None:
    node = jbod(node_factory, tmp_path, AUTHORIZER)
    _a, b = node.config.log_dirs
    asyncio.run(create(node, "t"))
    refused = dispatch(node, 34, v, request(v, {str(b): [("t", 0)]}), principal="User:alice")
    assert [(t.topic_name, p.partition_index, p.error_code) for t in refused.results
            for p in t.partitions] == [("t", 0, ErrorCode.cluster_authorization_failed)]
    assert node.logs.future_logs() == []
    grant(node, allow("User:alice", O.ALTER, R.CLUSTER, "kafka-cluster"))
    ok = dispatch(node, 34, v, request(v, {str(b): [("t", 0)]}), principal="User:alice")
    assert ok.results[0].partitions[0].error_code is ErrorCode.none


@pytest.mark.parametrize("granted", [True, False])
def test_a_worker_being_restarted_holds_its_replicas_offline(
        node_factory: Any, tmp_path: Path, granted: bool) -> None:
    """With several workers (broker/node/shard_routing.py), the partitions of a worker that is
    not connected (being restarted) are answered KAFKA_STORAGE_ERROR, or
    CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, and this worker neither moves
    nor remembers anything for them."""
    from broker.node.shard_routing import split_log_dir_moves
    from broker.node.shards import ShardLayout

    node = jbod(node_factory, tmp_path, AUTHORIZER)
    a, b = node.config.log_dirs
    layout = ShardLayout(2, 0)  # this node process is worker 0 of two
    mine = next(p for p in range(8) if layout.owner("t", p) == 0)
    theirs = next(p for p in range(8) if layout.owner("t", p) == 1)
    asyncio.run(create(node, "t", partitions=8))
    if granted:
        grant(node, allow("User:alice", O.ALTER, R.CLUSTER, "kafka-cluster"))
    entry = DISPATCHER.get(34)
    assert entry is not None
    local = BoundEntry(34, functools.partial(entry.handle, node), entry.error_response)
    routed = split_log_dir_moves(layout, lambda _index: None, local)
    to = {mine: node.logs.log_dir_of("t", mine), theirs: node.logs.log_dir_of("t", theirs)}
    dest = b if to[theirs] == a else a  # a move, were the partition asked of this worker
    moves: dict[str, list[tuple[str, int]]] = {str(dest): [("t", theirs)]}
    moves.setdefault(str(to[mine]), []).append(("t", mine))  # already there: nothing moves
    resp = asyncio.run(routed.handle(ctx_of(34, 2, "User:alice"), request(2, moves)))
    answers = {(t.topic_name, p.partition_index): p.error_code
               for t in resp.results for p in t.partitions}
    if granted:
        assert answers == {("t", mine): ErrorCode.none,
                           ("t", theirs): ErrorCode.kafka_storage_error}
    else:
        assert answers == dict.fromkeys([("t", mine), ("t", theirs)],
                                        ErrorCode.cluster_authorization_failed)
    assert ("t", theirs) not in node.logs.preferred_dirs
    assert [f for f in node.logs.future_logs() if f.tp.partition == theirs] == []
    assert node.logs.log_dir_of("t", theirs) == to[theirs]
