"""Structured concurrency (issue 32, point 9): a combined controller+broker run in-process,
with a topic, produced records, a consumer group and a committed transaction (so the replica
fetchers, the group and transaction coordinators, their tick loops and the transaction
verifier have all run), leaves no asyncio task alive once `Node.stop` returns: every
long-lived task belongs to a task group its component cancels when it stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node import Node
from tests.support.node import formatted_inprocess_config

pytestmark = pytest.mark.timeout(120)
TOPIC = "tasks-it"


def exercise(bootstrap: str) -> None:
    """Blocking client work (librdkafka's own threads), run off the node's loop."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, num_partitions=2,
                                           replication_factor=1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(TOPIC, key=str(i).encode(), value=b"plain")
    assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tasks-it-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(4):
        txn.produce(TOPIC, key=str(i).encode(), value=b"txn")
    txn.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tasks-it-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.subscribe([TOPIC])
        seen = 0
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                seen += 1
                if seen == 14:
                    break
        assert seen == 14, f"consumed {seen} of 14 records"
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                       timeout=30)
        assert sum(tp.offset for tp in committed) >= 14
    finally:
        consumer.close()


def test_no_task_outlives_a_stopped_node(tmp_path: Path) -> None:
    cfg, port = formatted_inprocess_config(
        tmp_path, **{"admin.listeners": "", "group.initial.rebalance.delay.ms": "0"})

    async def go() -> list[asyncio.Task[object]]:
        own = asyncio.current_task()
        node = Node(cfg)
        try:
            await asyncio.wait_for(node.start(), 60)
            await asyncio.to_thread(exercise, f"127.0.0.1:{port}")
            assert node.fetchers is not None and node.txn_coordinator is not None
        finally:
            await node.stop()
        await asyncio.sleep(0)  # done callbacks of the last cancellations
        return [t for t in asyncio.all_tasks() if t is not own]

    left = asyncio.run(go())
    assert left == [], "\n".join(f"{t.get_name()}: {t.get_coro()!r}" for t in left)


def test_no_task_outlives_stopped_replicas_and_fetchers(tmp_path: Path) -> None:
    """A single node follows nobody, so its replica fetchers never run: three brokers in one
    event loop (broker/testing/inprocess_cluster.py: replica managers, fetchers, servers)
    replicate a partition, and once stopped leave no task either."""
    from broker.replication import Role
    from broker.testing.inprocess_cluster import Cluster, batch, eventually

    async def go() -> list[asyncio.Task[object]]:
        own = asyncio.current_task()
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            leader = c.leader("t")
            await leader.replicas.append({("t", 0): batch(b"a", b"b")}, required_acks=-1,
                                         timeout_ms=5000)
            followers = [b for b in c.brokers.values() if b is not leader]
            assert all(b.replicas.get("t", 0).role is Role.FOLLOWER for b in followers)
            await eventually(lambda: all(
                b.replicas.get("t", 0).high_watermark == 2 for b in followers),
                what="follower high watermarks")
        finally:
            await c.stop()
        await asyncio.sleep(0)
        return [t for t in asyncio.all_tasks() if t is not own]

    left = asyncio.run(go())
    assert left == [], "\n".join(f"{t.get_name()}: {t.get_coro()!r}" for t in left)
