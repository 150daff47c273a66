"""ClusterService and QuorumService."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from broker.admin.quorum import QuorumInfo, ReplicaInfo, describe_raft
from broker.errors import KafkaError
from broker.metadata import records as rec
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode


def test_describe_cluster_brokers_states_epochs_features(node: AdminTestNode) -> None:
    async def setup() -> None:
        await node.register(2, rack="r2")
        await node.register(3)
        await node.register(4, unfence=False)
        await node.shut_down(3)
        await node.controller.append_records([rec.feature_level_record("metadata.version", 21)])
        await node.create_topic("t", partitions=2, rf=1, assignments={0: [1], 1: [2]})

    import asyncio
    asyncio.run(setup())

    async def body(a: Admin) -> Any:
        return await a.cluster.DescribeCluster(pb.cluster.DescribeClusterRequest())

    resp = serve(node, body)
    image = node.metadata
    assert resp.cluster_id == node.cluster_id
    assert resp.node_id == 1
    assert resp.controller_id == 1
    assert resp.metadata_offset == image.offset
    assert [(f.name, f.feature_level) for f in resp.finalized_features] == [
        ("metadata.version", 21)]
    by_id = {b.registration.broker_id: b for b in resp.brokers}
    assert sorted(by_id) == [1, 2, 3, 4]
    st = pb.cluster
    assert by_id[1].state == st.BROKER_STATE_UNFENCED and by_id[1].is_controller
    assert by_id[2].state == st.BROKER_STATE_UNFENCED and by_id[2].registration.rack == "r2"
    assert by_id[3].state == st.BROKER_STATE_SHUTTING_DOWN
    assert by_id[4].state == st.BROKER_STATE_FENCED
    for bid, b in by_id.items():
        reg = image.brokers[bid]
        assert b.registration.broker_epoch == reg.epoch == node.broker_epochs[bid]
        assert b.registration.incarnation_id == reg.incarnation_id.bytes
        assert [(e.name, e.host, e.port) for e in b.registration.endpoints] == [
            (e.name, e.host, e.port) for e in reg.endpoints]
    assert (by_id[1].leader_count, by_id[2].leader_count) == (1, 1)
    assert by_id[4].replica_count == 0


def test_unregister_broker(node: AdminTestNode) -> None:
    import asyncio
    asyncio.run(node.register(2))
    assert 2 in node.metadata.brokers

    async def body(a: Admin) -> Any:
        await a.cluster.UnregisterBroker(pb.cluster.UnregisterBrokerRequest(broker_id=2))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await a.cluster.UnregisterBroker(pb.cluster.UnregisterBrokerRequest(broker_id=2))
        return e.value

    err = serve(node, body)
    assert 2 not in node.metadata.brokers
    assert err.code() == S.NOT_FOUND
    assert "Broker ID 2 is not currently registered" in (err.details() or "")


def test_admin_calls_are_unavailable_until_the_node_is_ready(node: AdminTestNode) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    node.ready.clear()

    async def body(a: Admin) -> None:
        health = health_pb2_grpc.HealthStub(a.channel)
        check = await health.Check(health_pb2.HealthCheckRequest())
        assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
        code, details = await status_of(
            a.cluster.DescribeCluster(pb.cluster.DescribeClusterRequest()))
        assert code is S.UNAVAILABLE and "not ready" in details
        # a streaming call is gated too
        stream = a.records.Consume(pb.records.ConsumeRequest(topic="t"))
        code, details = await status_of(stream.read())
        assert code is S.UNAVAILABLE
        node.ready.set()
        for _ in range(500):
            check = await health.Check(health_pb2.HealthCheckRequest(
                service="skiff.admin.v1.TopicService"))
            if check.status == health_pb2.HealthCheckResponse.SERVING:
                break
            await __import__("asyncio").sleep(0.01)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        await a.cluster.DescribeCluster(pb.cluster.DescribeClusterRequest())

    serve(node, body)


class FakeRaftCore:
    """The attributes describe_raft reads from a KRaft core."""

    def __init__(self, node_id: int, leader_id: int) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self.voters = frozenset({1, 2, 3, 5})
        self.epoch = 7
        self.hw = 120
        self.log = SimpleNamespace(end_offset=125)

    def replica_progress(self) -> tuple[dict[int, Any], dict[int, Any]]:
        p = SimpleNamespace
        # times in the core's own time base (the driver's monotonic milliseconds)
        return ({2: p(end_offset=120, last_fetch_ms=900, fetched=True),
                 3: p(end_offset=100, last_fetch_ms=800, fetched=True),
                 5: p(end_offset=-1, last_fetch_ms=950, fetched=False)},
                {4: p(end_offset=90, last_fetch_ms=700, fetched=True)})


def test_describe_quorum_from_the_raft_leader(node: AdminTestNode) -> None:
    node.clock = lambda: 10_000  # type: ignore[method-assign]
    describe = describe_raft(FakeRaftCore(1, 1), node.clock, lambda: 1_000)

    async def body(a: Admin) -> Any:
        return await a.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest())

    resp = serve(node, body, describe)
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (1, 7, 120)
    assert resp.cluster_id == node.cluster_id
    voters = {v.replica_id: v for v in resp.voters}
    assert sorted(voters) == [1, 2, 3, 5]
    assert (voters[1].log_end_offset, voters[1].lag) == (125, 0)
    # core time 900 when the core's clock says 1000 and the wall clock 10000: wall 9900
    assert (voters[2].lag, voters[2].last_fetch_timestamp_ms) == (0, 9_900)
    assert voters[2].last_caught_up_timestamp_ms == 9_900
    assert (voters[3].lag, voters[3].last_fetch_timestamp_ms) == (20, 9_800)
    assert voters[3].last_caught_up_timestamp_ms == -1
    # voter 5 has not fetched in this epoch: nothing known
    assert (voters[5].log_end_offset, voters[5].lag, voters[5].last_fetch_timestamp_ms) == (
        -1, -1, -1)
    assert [(o.replica_id, o.lag, o.last_fetch_timestamp_ms) for o in resp.observers] == [
        (4, 30, 9_700)]
    assert resp.max_follower_lag == 20
    assert resp.max_follower_lag_time_ms == -1  # voter 3 is not caught up


def test_describe_quorum_lag_time_when_every_follower_caught_up(node: AdminTestNode) -> None:
    info = QuorumInfo(1, 3, 50, (ReplicaInfo(1, 50, 1000, 1000),
                                 ReplicaInfo(2, 50, 990, 990), ReplicaInfo(3, 48, 995, 700)))

    async def describe() -> QuorumInfo:
        return info

    node.clock = lambda: 1000  # type: ignore[method-assign]

    async def body(a: Admin) -> Any:
        return await a.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest())

    resp = serve(node, body, describe)
    assert resp.max_follower_lag == 2
    assert resp.max_follower_lag_time_ms == 300


def test_describe_quorum_on_a_follower_names_the_leader(node: AdminTestNode) -> None:
    describe = describe_raft(FakeRaftCore(2, 1), node.clock)

    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest()))

    code, details = serve(node, body, describe)
    assert code is S.FAILED_PRECONDITION
    assert "node 1 is" in details


def test_describe_quorum_without_a_describer_is_unimplemented(node: AdminTestNode) -> None:
    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest()))

    code, details = serve(node, body)
    assert code is S.UNIMPLEMENTED and "quorum describer" in details


def test_describe_raft_over_the_real_raft_core() -> None:
    """Against raft/core.py itself (skips on a branch without it)."""
    import asyncio
    import random

    core_mod = pytest.importorskip("raft.core")
    store = pytest.importorskip("raft.store")
    core = core_mod.RaftCore(1, frozenset({1}), store.MemoryLogStore(),
                             store.MemoryQuorumStateStore(), random.Random(1), 0)
    now = 0
    for _ in range(200):
        now += 50
        core.tick(now)
        core.take_output()
        if core.leader_id == 1:
            break
    info = asyncio.run(describe_raft(core, lambda: 1_700_000_000_000, lambda: now)())
    assert (info.leader_id, info.leader_epoch) == (1, core.epoch)
    assert info.high_watermark == core.hw == core.log.end_offset
    assert [v.replica_id for v in info.voters] == [1] and info.observers == ()
    follower = core_mod.RaftCore(2, frozenset({1, 2, 3}), store.MemoryLogStore(),
                                 store.MemoryQuorumStateStore(), random.Random(1), 0)
    with pytest.raises(KafkaError, match="not the metadata quorum leader"):
        asyncio.run(describe_raft(follower, lambda: 0, lambda: 0)())
