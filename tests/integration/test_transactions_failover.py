"""Transaction coordinator failover on three combined nodes: the broker coordinating a
librdkafka transactional producer is killed with -9 between transactions and again right
after a commit was requested; another broker loads the __transaction_state partition
(RF 3, min ISR 2), resumes what was in flight, and the producer goes on. A read_committed
consumer finds every committed record exactly once and none of the aborted ones."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection
from broker.testing.cluster import Cluster

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]
WAIT_S = 60.0
TOPIC = "txn-failover"


def coordinator_of(c: Cluster, tid: str) -> int:
    """FindCoordinator(TRANSACTION) through any running broker."""
    from kio.schema.find_coordinator.v4 import request as fc

    async def ask(port: int) -> Any:
        conn = KafkaConnection("127.0.0.1", port, "failover-test")
        try:
            return await conn.request(10, 4, fc.FindCoordinatorRequest(
                key_type=1, coordinator_keys=(tid,)), 5.0)
        finally:
            await conn.close()

    def found() -> int:
        for i in c.broker_ids:
            node = c.nodes[i]
            if node.running and node.client_port is not None:
                [co] = asyncio.run(ask(node.client_port)).coordinators
                if co.error_code is ErrorCode.none and c.nodes[int(co.node_id)].running:
                    return int(co.node_id)
        return 0

    return c.wait_for(found, WAIT_S, f"a live coordinator for {tid}")


def read_committed(bootstrap: str, partitions: int) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": True, "log_level": 3})
    out: list[bytes] = []
    try:
        cons.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in cons.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise AssertionError(m.error())
                eof.discard(m.partition())
                out.append(m.value())
    finally:
        cons.close()
    return out


def test_coordinator_killed_between_and_during_commits(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True) as c:
        c.admin(c.broker_ids[0]).create_topics(
            [NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})],
            operation_timeout=20)[TOPIC].result(30)
        tid = f"failover-{uuid.uuid4()}"
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": tid,
                      "transaction.timeout.ms": 60000, "linger.ms": 5, "log_level": 2})
        p.init_transactions(WAIT_S)
        committed: list[bytes] = []
        aborted: list[bytes] = []

        def txn(n: int, tag: str, commit: bool) -> None:
            p.begin_transaction()
            values = [f"{tag}-{i}".encode() for i in range(n)]
            for i, v in enumerate(values):
                p.produce(TOPIC, value=v, partition=i % 3)
            if commit:
                p.commit_transaction(WAIT_S)
                committed.extend(values)
            else:
                p.abort_transaction(WAIT_S)
                aborted.extend(values)

        txn(30, "a", True)
        txn(10, "b", False)
        first = coordinator_of(c, tid)
        c.kill(first)  # between transactions
        txn(30, "c", True)
        second = coordinator_of(c, tid)
        assert second != first
        c.restart(first, wait=True)
        # during a commit: the kill lands while markers may still be in flight
        p.begin_transaction()
        values = [f"d-{i}".encode() for i in range(30)]
        for i, v in enumerate(values):
            p.produce(TOPIC, value=v, partition=i % 3)
        p.flush(WAIT_S)
        victim = coordinator_of(c, tid)
        p.commit_transaction(WAIT_S)
        c.kill(victim)
        committed.extend(values)
        txn(30, "e", True)  # the next transaction waits for the resumed one to complete
        c.restart(victim, wait=True)

        got = read_committed(c.live_bootstrap(), 3)
        assert sorted(got) == sorted(committed), (len(got), len(committed))
        assert not set(got) & set(aborted)
