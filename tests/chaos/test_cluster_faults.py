"""Faults against a real 3-controller + 3-broker cluster, checked for lost, duplicated
and reordered acknowledged records (tests/chaos/checker.py).

One cluster serves the module. Two librdkafka producers write with acks=all to two RF=3,
min.insync.replicas=2 topics, one without idempotence and one with it, while the test
kills partition leaders with -9, pauses a follower past its session, restarts brokers
one by one (SIGTERM: controlled shutdown), kills the active controller during topic
creation, builds a divergent log tail on purpose, and reassigns a partition under load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic

from broker.testing.cluster import REPO_ROOT, Cluster
from tests.chaos.checker import check
from tests.chaos.workload import ProducerWorkload, read_all

PARTITIONS = 3
ACK_RESUME_S = 15.0  # a leader kill must not stall a partition's acknowledgements longer
ROLL_GAP_LIMIT_S = 5.0  # generous against ~0.1 s measured: CI machines are slow and shared
SESSION_S = 9.0  # broker.session.timeout.ms's default (Kafka's); the cluster runs at defaults

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # small snapshot interval: the metadata log is snapshotted and truncated during the run
    c = Cluster(tmp_path_factory.mktemp("chaos"), controllers=3, brokers=3,
                overrides={"metadata.log.max.record.bytes.between.snapshots": "16384"})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def any_broker(c: Cluster) -> int:
    return next(i for i in c.broker_ids if c.nodes[i].running)


def create_topic(c: Cluster, name: str, partitions: int = PARTITIONS, rf: int = 3,
                 configs: dict[str, str] | None = None) -> None:
    configs = {"min.insync.replicas": "2", **(configs or {})}
    fut = c.admin(any_broker(c)).create_topics(
        [NewTopic(name, partitions, rf, config=configs)], operation_timeout=20)[name]
    fut.result(30)
    c.wait_for(lambda: all(
        p.leader >= 0 for p in c.metadata(any_broker(c)).topics[name].partitions.values()
    ) and len(c.metadata(any_broker(c)).topics[name].partitions) == partitions,
        20, f"{name} has leaders")


def partition_state(c: Cluster, topic: str, partition: int, via: int | None = None) -> Any:
    return c.metadata(any_broker(c) if via is None else via).topics[topic].partitions[partition]


def registered_partition(c: Cluster, node_id: int, topic: str, partition: int) -> Any:
    """The partition as `node_id`'s metadata image holds it (admin gRPC DescribeTopics):
    unlike a Kafka client, this asks that node only, so paused brokers cannot stall it."""
    import grpc

    from broker.admin import pb

    with grpc.insecure_channel(c.admin_address(node_id)) as channel:
        resp = pb.topics_grpc.TopicServiceStub(channel).DescribeTopics(
            pb.topics.DescribeTopicsRequest(names=[topic]), timeout=3)
    return next(pd.partition for pd in resp.topics[0].partitions
                if pd.partition.partition_id == partition)


def wait_full_isr(c: Cluster, topic: str, partitions: int, size: int = 3,
                  timeout: float = 30.0) -> None:
    c.wait_for(lambda: all(
        len(partition_state(c, topic, p).isrs) == size for p in range(partitions)),
        timeout, f"every partition of {topic} back to an ISR of {size}")


def wait_acks_resume(workloads: list[ProducerWorkload], partition: int, since: float) -> float:
    """Seconds until every workload has an acknowledgement for `partition` of a record
    produced after `since` (time.monotonic())."""
    deadline = since + ACK_RESUME_S
    while time.monotonic() < deadline:
        if all(w.last_ack_produced_at(partition) > since for w in workloads):
            return time.monotonic() - since
        time.sleep(0.01)
    raise AssertionError(f"partition {partition}: no acknowledgement within {ACK_RESUME_S}s "
                         f"of a leader kill")


def test_leader_kills_pauses_and_rolling_restart_lose_nothing(cluster: Cluster) -> None:
    c = cluster
    create_topic(c, "plain")
    create_topic(c, "idem")
    plain = ProducerWorkload(c.bootstrap_servers, "plain", PARTITIONS, name="plain",
                             idempotence=False, rate_per_s=300)
    idem = ProducerWorkload(c.bootstrap_servers, "idem", PARTITIONS, name="idem",
                            idempotence=True, rate_per_s=300)
    workloads = [plain, idem]
    for w in workloads:
        w.start()
    stalls: list[float] = []
    try:
        time.sleep(2)
        # kill -9 the leader of each partition in turn (both topics' leaders are spread
        # the same way, so each kill hits leaders of both)
        for partition in range(PARTITIONS):
            leader = partition_state(c, "idem", partition).leader
            since = time.monotonic()
            c.kill(leader)
            stalls.append(wait_acks_resume(workloads, partition, since))
            c.restart(leader)
            wait_full_isr(c, "idem", PARTITIONS)
            wait_full_isr(c, "plain", PARTITIONS)
        # pause a follower past its session (fenced, out of the ISR), then let it rejoin
        state = partition_state(c, "idem", 0)
        follower = next(r for r in state.replicas if r != state.leader)
        c.pause(follower)
        # held until its session expires: the controller fences it and takes it out of
        # the ISR, as seen by the leader (which the paused broker cannot stall)
        c.wait_for(lambda: follower not in registered_partition(c, state.leader, "idem", 0).isr,
                   SESSION_S + 20, f"paused broker {follower} out of the ISR")
        c.resume(follower)
        wait_full_isr(c, "idem", PARTITIONS)
        # rolling restart, each broker shut down in a controlled way
        roll_started = time.monotonic()
        for broker in c.broker_ids:
            assert c.terminate(broker) == 0, c.nodes[broker].log_tail()
            c.restart(broker)
            wait_full_isr(c, "idem", PARTITIONS)
            wait_full_isr(c, "plain", PARTITIONS)
        roll_gaps = [w.longest_ack_gap(roll_started, time.monotonic()) for w in workloads]
        time.sleep(1)
    finally:
        remaining = [w.stop() for w in workloads]
    assert remaining == [0, 0]
    for w in workloads:
        assert w.misrouted == 0
    plain_report = check(plain.acknowledged, read_all(c.bootstrap_servers, "plain", PARTITIONS))
    idem_report = check(idem.acknowledged, read_all(c.bootstrap_servers, "idem", PARTITIONS))
    print(f"\nstalls after leader kills: {[round(s, 2) for s in stalls]} s; longest gap "
          f"between acknowledgements during the rolling restart: "
          f"{[round(g, 2) for g in roll_gaps]} s")
    # a controlled shutdown moves leaders before the broker stops: at most one election's
    # worth of unavailability per partition
    assert max(roll_gaps) < ROLL_GAP_LIMIT_S
    print(f"without idempotence: {plain_report.summary()}")
    print(f"with idempotence:    {idem_report.summary()}")
    assert plain_report.acknowledged > 1000 and idem_report.acknowledged > 1000
    assert plain_report.lost == [] and plain_report.reordered == []
    assert idem_report.lost == [] and idem_report.reordered == []
    assert idem_report.duplicated == []


def test_controller_killed_during_topic_creation(cluster: Cluster) -> None:
    """Each round kills the active controller while a CreateTopics is under way: the topic
    then exists exactly once (one id, the asked partition count) and the client's retry
    is answered (created, or TOPIC_ALREADY_EXISTS)."""
    c = cluster
    for round_ in range(2):
        name = f"created-during-failover-{round_}"
        admin = c.admin(any_broker(c))
        outcome: dict[str, Any] = {}

        def create(name: str = name, admin: Any = admin, outcome: dict[str, Any] = outcome
                   ) -> None:
            try:
                admin.create_topics([NewTopic(name, 4, 3)], operation_timeout=20)[name].result(40)
                outcome["first"] = "created"
            except KafkaException as exc:
                outcome["first"] = exc.args[0].name()

        controller = c.active_controller()
        assert controller > 0
        t = threading.Thread(target=create)
        t.start()
        time.sleep(0.02 * round_)
        c.kill(controller)
        t.join(60)
        assert not t.is_alive()
        try:
            admin.create_topics([NewTopic(name, 4, 3)], operation_timeout=20)[name].result(40)
            retry = "created"
        except KafkaException as exc:
            retry = exc.args[0].name()
        assert retry in ("created", "TOPIC_ALREADY_EXISTS"), (outcome, retry)
        md = c.wait_for(lambda name=name: c.metadata(any_broker(c)).topics.get(name), 20,
                        f"{name} in metadata")
        assert len(md.partitions) == 4
        described = c.admin(any_broker(c)).describe_topics(
            TopicCollection([name]))[name].result(20)
        assert len(described.partitions) == 4
        c.restart(controller)


def test_divergent_tail_is_truncated_and_the_broker_rejoins(cluster: Cluster) -> None:
    """The followers of a partition are paused past their session (out of the ISR, which
    stays at the leader alone); acks=1 records then reach only the leader, which is killed.
    A follower takes over (KIP-966: replicas that left an ISR below min.insync.replicas
    stay eligible), and the old leader comes back with a tail the new leader never had: it
    must truncate it, catch up and rejoin the ISR, and then serve exactly the new
    leader's log when it leads again."""
    c = cluster
    create_topic(c, "diverge", partitions=1)
    acked = ProducerWorkload(c.bootstrap_servers, "diverge", 1, name="safe", rate_per_s=200)
    acked.start()
    time.sleep(1.5)
    assert acked.stop() == 0
    state = partition_state(c, "diverge", 0)
    old_leader = state.leader
    followers = [r for r in state.replicas if r != old_leader]
    for f in followers:
        c.pause(f)
    try:
        c.wait_for(
            lambda: list(registered_partition(c, old_leader, "diverge", 0).isr) == [old_leader],
            15, "ISR shrunk to the leader")
        tail = Producer({"bootstrap.servers": c.nodes[old_leader].bootstrap, "acks": 1,
                         "log_level": 0})
        delivered: list[int] = []
        for i in range(50):
            tail.produce("diverge", f"tail:{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(msg.offset())
                         if err is None else None)
        assert tail.flush(15) == 0
        assert len(delivered) == 50, "acks=1 records to the lone leader are acknowledged"
        c.kill(old_leader)
    finally:
        for f in followers:
            c.resume(f)
    c.wait_for(lambda: registered_partition(c, followers[0], "diverge", 0).leader in followers,
               20, "a former follower leads")
    before = read_all(c.bootstrap_servers, "diverge", 1)[0]
    report = check(acked.acknowledged, {0: [v for v in before if v.startswith(b"safe:")]})
    assert report.lost == [] and report.duplicated == []
    c.restart(old_leader)
    wait_full_isr(c, "diverge", 1)
    truncations = (c.nodes[old_leader].log_path.read_text(errors="replace")
                   .count("replica_truncate"))
    assert truncations >= 1, "the old leader truncated its divergent tail"
    # ElectLeaders from a Kafka client, through a broker to the controller
    elected = c.admin(any_broker(c)).elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("diverge", 0)]).result(30)
    assert elected == {TopicPartition("diverge", 0): None}, elected
    c.wait_for(lambda: partition_state(c, "diverge", 0).leader == old_leader, 20,
               "the old leader leads again")
    # a new leader's high watermark catches up once its followers fetch from it (as in
    # Kafka, it may briefly be below the old one): read once it is back
    def read_back() -> list[bytes] | None:
        log = read_all(c.bootstrap_servers, "diverge", 1)[0]
        return log if len(log) >= len(before) else None

    after = c.wait_for(read_back, 30, "the new leader's high watermark back")
    assert after == before


def test_reassignment_under_load_completes_without_loss(cluster: Cluster) -> None:
    c = cluster
    brokers = c.broker_ids
    name = "moving"
    fut = c.admin(any_broker(c)).create_topics(
        [NewTopic(name, 1, replica_assignment=[[brokers[0], brokers[1]]],
                  config={"min.insync.replicas": "1"})], operation_timeout=20)[name]
    fut.result(30)
    w = ProducerWorkload(c.bootstrap_servers, name, 1, name="move", idempotence=True,
                         rate_per_s=300)
    w.start()
    try:
        time.sleep(2)
        target = [brokers[2], brokers[1]]
        res = run_cli(c, "partitions", "reassign", "--topic", name, "--partition", "0",
                      "--replicas", ",".join(map(str, target)), "--wait",
                      "--wait-timeout", "60", "--output", "json")
        assert res.returncode == 0, res.stderr
        c.wait_for(lambda: sorted(partition_state(c, name, 0).replicas) == sorted(target),
                   30, "replicas moved")
        time.sleep(1)
    finally:
        assert w.stop() == 0
    report = check(w.acknowledged, read_all(c.bootstrap_servers, name, 1))
    print(f"\nreassignment under load: {report.summary()}")
    assert report.acknowledged > 500
    assert report.lost == [] and report.duplicated == [] and report.reordered == []


def run_cli(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args, "--bootstrap",
         c.admin_address(any_broker(c))],
        capture_output=True, text=True, timeout=90, env=env, cwd=Path(REPO_ROOT),
    )



def consume_and_commit(consumer: Any, seen: list[bytes]) -> None:
    """One poll; commits only when it returned records. librdkafka refuses a commit with
    nothing new to commit (_NO_OFFSET), which a round after a rebalance often is."""
    got = [m.value() for m in consumer.consume(50, timeout=0.5) if m.error() is None]
    if got:
        seen.extend(got)
        consumer.commit(asynchronous=False)


def test_group_coordinator_killed_keeps_committed_offsets(cluster: Cluster) -> None:
    """Issue 6 on a cluster: the broker coordinating a consumer group is killed (-9); the
    group moves to the new leader of its __consumer_offsets partition (RF=3), every offset
    committed before the kill is still there, and the consumer goes on to the end with
    nothing skipped."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions

    c = cluster
    topic, group, total = "grouped", "chaos-group", 600
    create_topic(c, topic, partitions=6)
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                         "log_level": 0})
    for i in range(total):
        producer.produce(topic, f"r:{i}".encode(), partition=i % 6)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "log_level": 0})
    seen: list[bytes] = []
    coordinator: int | None = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < total // 2 and time.monotonic() < deadline:
            consume_and_commit(consumer, seen)
        assert len(seen) >= total // 2
        admin = c.admin(any_broker(c))
        [described] = admin.describe_consumer_groups([group])[group].result(20),
        coordinator = described.coordinator.id

        def committed() -> dict[int, int]:
            res = c.admin(next(b for b in c.broker_ids if b != coordinator
                               and c.nodes[b].running)).list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)])[group].result(20)
            return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}

        before = committed()
        assert sum(before.values()) == len(seen)
        c.kill(coordinator)
        after = c.wait_for(lambda: committed() or None, 30,
                           "offsets readable from the new coordinator")
        assert after == before, "no committed offset lost with the coordinator"
        moved = c.admin(next(b for b in c.broker_ids if b != coordinator)
                        ).describe_consumer_groups([group])[group].result(20)
        assert moved.coordinator.id != coordinator
        deadline = time.monotonic() + 60
        while len(seen) < total and time.monotonic() < deadline:
            consume_and_commit(consumer, seen)
    finally:
        consumer.close()
        if coordinator is not None and not c.nodes[coordinator].running:
            c.restart(coordinator)
    assert sorted(seen, key=lambda v: int(v.split(b":")[1])) == [
        f"r:{i}".encode() for i in range(total)], "every record once, none skipped"


def test_wiped_broker_bootstraps_from_a_metadata_snapshot(cluster: Cluster) -> None:
    """A broker whose metadata log is gone (a new disk) catches up from the controllers'
    snapshot (KIP-630: its fetch offset is below their log start) and serves every topic."""
    import shutil

    c = cluster
    for i in range(4):
        create_topic(c, f"snap-{i}", partitions=20, rf=1)
    broker = c.broker_ids[-1]
    assert c.terminate(broker) == 0
    shutil.rmtree(c.nodes[broker].metadata_dir / "__cluster_metadata-0")
    starts_before = c.nodes[broker].log_path.read_text(errors="replace").count("=== start")
    c.restart(broker)
    log = c.nodes[broker].log_path.read_text(errors="replace")
    this_run = log.split("=== start")[starts_before:]
    assert any("metadata_snapshot_loaded" in part for part in this_run), \
        "the wiped broker loaded a snapshot"
    # its own image (asked through its admin API, not a client that may ask another broker)
    for i in range(4):
        assert registered_partition(c, broker, f"snap-{i}", 19).leader >= 0
