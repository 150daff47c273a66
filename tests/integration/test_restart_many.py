"""Issue 17: kill -9 and restart every node of a 3-combined-node cluster several times in
quick succession, under Kafka's default layout (`metadata.log.dir` unset: the metadata log
lives in the first `log.dirs` entry, next to the partitions) and with a separate metadata
directory. Every node must come back (registered, unfenced, serving), `DescribeQuorum`
must show one leader and every voter's log end, and no acknowledged record nor committed
metadata (topics created between rounds) may be lost.

Before the fix the default layout lost the metadata log on the third start of a node: the
partition log manager opened `__cluster_metadata-0` as a partition and its retention
deleted Raft's segments (timestamp 0 looked seven days old)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from broker.testing.cluster import SEPARATE_METADATA_DIR, Cluster
from tests.support.records import end_offset

pytestmark = pytest.mark.timeout(240)
ROUNDS = 4
RECORDS_PER_ROUND = 200
TOPIC = "acked"
READY_S = 45.0  # per round: a killed node's old session must expire before it registers


@pytest.fixture(params=["default-layout", "separate-metadata-dir"])
def cluster(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Cluster]:
    overrides = ({} if request.param == "default-layout"
                 else {"metadata.log.dir": SEPARATE_METADATA_DIR})
    c = Cluster(tmp_path, controllers=3, combined=True, overrides=overrides)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def produce(c: Cluster, first: int, n: int) -> set[bytes]:
    """`n` records with acks=all and idempotence; returns the acknowledged values."""
    acked: set[bytes] = set()
    p = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5, "log_level": 0,
                  "message.timeout.ms": 20000})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(msg.value())

    for i in range(first, first + n):
        p.produce(TOPIC, value=b"v%06d" % i, on_delivery=done)
        p.poll(0)
    p.flush(30)
    return acked


def consume_all(c: Cluster, partitions: int) -> set[bytes]:
    cons = Consumer({"bootstrap.servers": c.live_bootstrap(), "group.id": "restart-many",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "log_level": 0})
    try:
        ends = {}
        for p in range(partitions):
            ends[p] = end_offset(cons, TOPIC, p)
        cons.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        seen: set[bytes] = set()
        at = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(at[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = cons.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            seen.add(msg.value())
            at[msg.partition()] = msg.offset() + 1
        return seen
    finally:
        cons.close()


async def _describe_quorum(port: int) -> Any:
    from kio.schema.describe_quorum.v1 import request as dq

    from broker.protocol.transport import KafkaConnection

    q: Any = dq
    conn = KafkaConnection("127.0.0.1", port, "restart-many")
    try:
        resp = await conn.request(55, 1, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name="__cluster_metadata",
                        partitions=(q.PartitionData(partition_index=0),)),)), 5.0)
    finally:
        await conn.close()
    return resp.topics[0].partitions[0]


def quorum_is_sane(c: Cluster) -> bool:
    """The leader's DescribeQuorum: a leader, every voter fetched and is near the HW."""
    leader = c.active_controller()
    if leader < 0:
        return False
    port = c.nodes[leader].controller_port
    assert port is not None
    part = asyncio.run(_describe_quorum(port))
    if int(part.error_code) != 0 or int(part.leader_id) != leader:
        return False
    hw = int(part.high_watermark)
    ends = {int(v.replica_id): int(v.log_end_offset) for v in part.current_voters}
    return set(ends) == set(c.controller_ids) and hw > 0 and all(
        e >= 0 and abs(e - hw) < 1000 for e in ends.values())


def test_kill_and_restart_every_node_many_times(cluster: Cluster) -> None:
    c = cluster
    c.admin(1).create_topics([NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"})],
                             operation_timeout=20)[TOPIC].result(30)
    acked: set[bytes] = set()
    topics: list[str] = []
    started = time.monotonic()
    for rnd in range(ROUNDS):
        acked |= produce(c, rnd * RECORDS_PER_ROUND, RECORDS_PER_ROUND)
        name = f"meta-{rnd}"
        c.admin(c.broker_ids[rnd % 3]).create_topics(
            [NewTopic(name, 3, 3)], operation_timeout=20)[name].result(30)
        topics.append(name)
        if rnd % 2 == 0:
            # all three at once: a whole-cluster power cut
            for i in c.controller_ids:
                c.kill(i)
            for i in c.controller_ids:
                c.start_node(i)
        else:
            # one after the other, each back before the next dies
            for i in c.controller_ids:
                c.kill(i)
                c.start_node(i)
                time.sleep(0.5)
        c.wait_ready(READY_S)
    took = time.monotonic() - started
    assert len(acked) >= RECORDS_PER_ROUND * ROUNDS * 0.9, "the producer was starved"

    # every node unfenced and serving; the quorum sane; no record or topic lost
    c.wait_for(lambda: quorum_is_sane(c), 20, "DescribeQuorum: a leader, every voter's "
               "log end near the high watermark")
    states = {b.registration.broker_id: b.state for b in c.describe_cluster().brokers}
    assert states == dict.fromkeys(c.broker_ids, 2), f"not all unfenced: {states}"
    for b in c.broker_ids:
        md = c.metadata(b)
        assert {TOPIC, *topics} <= set(md.topics), f"broker {b} lost topics: {md.topics}"
    seen = consume_all(c, 6)
    lost = acked - seen
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    for node in c.nodes.values():
        log = node.log_path.read_text(errors="replace")
        assert "log_lost_committed_state" not in log, node.log_tail()
        mdir = node.metadata_dir / "__cluster_metadata-0"
        segments = sorted(int(p.stem) for p in mdir.glob("*.log"))
        snaps = [int(p.name.split("-")[0]) for p in mdir.glob("*.checkpoint")]
        assert segments and (segments[0] == 0 or segments[0] <= max(snaps, default=-1)), \
            f"node {node.node_id}: metadata log starts at {segments[:1]}, snapshots {snaps}"
        assert node.starts == ROUNDS + 1
        assert len(re.findall(r"broker_unfenced", log)) >= ROUNDS + 1
    print(f"{ROUNDS} rounds of kill -9 and restart in {took:.1f}s")
