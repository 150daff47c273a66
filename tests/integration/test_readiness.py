"""Issue 31 point 7: a broker's readiness (the `skiff.readiness` gRPC health service a
Kubernetes readiness probe asks, broker/admin/readiness.py) holds while the broker is fenced
and while its replicas are not back in the ISR after a restart, so that a StatefulSet's
rolling restart waits for the ISR before it restarts the next broker. Liveness (the
overall "" status) is unchanged: SERVING from registration to shutdown.

A real cluster (one controller, three brokers): partition ready-0 lives on brokers 2
(leader) and 3. Broker 3 is stopped, more records are written, and its leader is paused
(SIGSTOP) before broker 3 starts again: broker 3 registers and is unfenced but has no
leader to catch up from, so it must stay not ready, however long it waits. Once the leader
resumes, broker 3 fetches, rejoins the ISR, and turns ready. The session is longer than
the default (60 s) so that the paused leader keeps its own registration meanwhile: the test
is about the follower, not about fencing the leader."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from broker.admin import pb
from broker.admin.readiness import READINESS_SERVICE
from broker.cli.health import check
from broker.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(300)
LEADER, FOLLOWER, OTHER, CONTROLLER = 2, 3, 4, 1
TOPIC = "ready"
HOLD_S = 3.0  # how long the follower is watched staying not ready without a leader
START_S = 180.0  # four processes starting on a loaded 2-core machine


def isr(cluster: Cluster) -> list[int]:
    """ready-0's ISR in the controller's metadata (its admin DescribeTopics)."""
    with grpc.insecure_channel(cluster.admin_address(CONTROLLER)) as channel:
        stub = pb.topics_grpc.TopicServiceStub(channel)
        reply = stub.DescribeTopics(pb.topics.DescribeTopicsRequest(names=[TOPIC]), timeout=5)
    return sorted(reply.topics[0].partitions[0].partition.isr)


def produce(bootstrap: str, n: int, tag: str) -> None:
    acked: list[bool] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0,
                  "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(err is None))
    p.flush(40)
    assert acked == [True] * n


def status(cluster: Cluster, node_id: int, service: str) -> str:
    return check(cluster.admin_address(node_id), service, timeout=2.0)[1]


def test_a_restarted_broker_is_ready_only_once_its_replicas_are_in_sync(
        tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, controllers=1, brokers=3,
                      overrides={"broker.session.timeout.ms": "60000"})
    try:
        cluster.start(timeout=START_S)
        cluster.admin(OTHER).create_topics(
            [NewTopic(TOPIC, 1, replica_assignment=[[LEADER, FOLLOWER]])])[TOPIC].result(30)
        cluster.wait_for(lambda: status(cluster, FOLLOWER, READINESS_SERVICE) == "SERVING",
                         60, "broker 3 ready with ready-0 in sync")
        assert isr(cluster) == [LEADER, FOLLOWER]
        produce(cluster.nodes[LEADER].bootstrap, 50, "before")

        cluster.terminate(FOLLOWER)  # a controlled shutdown takes it out of the ISR
        cluster.wait_for(lambda: isr(cluster) == [LEADER], 30, "ISR without broker 3")
        produce(cluster.nodes[LEADER].bootstrap, 50, "while-down")

        cluster.pause(LEADER)
        try:
            cluster.start_node(FOLLOWER)
            seen: list[tuple[str, str]] = []

            def unfenced() -> bool:
                live = status(cluster, FOLLOWER, "")
                seen.append((live, status(cluster, FOLLOWER, READINESS_SERVICE)))
                return live == "SERVING"

            cluster.wait_for(unfenced, START_S, "broker 3 registered and unfenced again")
            # while it was not yet unfenced, it was not ready either
            assert all(ready == "NOT_SERVING" for live, ready in seen
                       if live == "NOT_SERVING"), seen
            brokers = {b.registration.broker_id: b
                       for b in cluster.describe_cluster(CONTROLLER).brokers}
            assert brokers[FOLLOWER].state == 2  # UNFENCED (skiff.admin.v1.BrokerState)
            # unfenced and alive, but nothing to catch up from: not ready, for as long as
            # the leader is away (an absence: watched for HOLD_S)
            deadline = time.monotonic() + HOLD_S
            while time.monotonic() < deadline:
                assert status(cluster, FOLLOWER, READINESS_SERVICE) == "NOT_SERVING"
                assert status(cluster, FOLLOWER, "") == "SERVING"  # liveness as before
                time.sleep(0.2)
            # (the ISR is read once the leader is back: DescribeTopics asks the leader for
            # its offsets; the follower's log names why it was not ready, checked below)
        finally:
            cluster.resume(LEADER)

        cluster.wait_for(lambda: status(cluster, FOLLOWER, READINESS_SERVICE) == "SERVING",
                         90, "broker 3 ready once back in the ISR")
        cluster.wait_for(lambda: isr(cluster) == [LEADER, FOLLOWER], 30,
                         "the controller's ISR with broker 3")
        log = cluster.nodes[FOLLOWER].log_path.read_text()
        assert f"1 replica(s) of broker {FOLLOWER} not yet in the ISR: {TOPIC}-0" in log
    finally:
        cluster.stop()
