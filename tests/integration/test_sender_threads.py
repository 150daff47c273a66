"""num.network.threads on a real node: a librdkafka consumer fetching megabyte answers gets
them from the native sender threads (broker/protocol/_sendpool.c), every record once and in
order, while a second consumer of small answers is served by the loop beside them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node import Node
from broker.protocol.frames import native_senders_missing
from tests.support.node import formatted_inprocess_config

pytestmark = pytest.mark.timeout(120)
missing = native_senders_missing()
if missing is not None and os.environ.get("EXPECT_COMPILED_MODULES") != "1":
    pytest.skip(f"no native sender threads: {missing}", allow_module_level=True)

TOPIC = "senders-it"
RECORDS = 12_000  # 1 KB each, in 2 partitions: each fetch answer up to 1 MB per partition


def produce(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, num_partitions=2,
                                           replication_factor=1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, partition=i % 2, key=str(i).encode(),
                         value=i.to_bytes(4, "big") * 256)
    assert producer.flush(60) == 0


def consume(bootstrap: str, max_partition_fetch_bytes: int) -> dict[int, list[int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False,
                         "max.partition.fetch.bytes": max_partition_fetch_bytes,
                         "fetch.wait.max.ms": 10})
    seen: dict[int, list[int]] = {0: [], 1: []}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        for _ in range(3000):
            if sum(map(len, seen.values())) == RECORDS:
                break
            for msg in consumer.consume(1000, 0.1):
                assert msg.error() is None, msg.error()
                value = msg.value()
                n = int.from_bytes(value[:4], "big")
                assert value == n.to_bytes(4, "big") * 256 and msg.key() == str(n).encode()
                seen[msg.partition()].append(n)
    finally:
        consumer.close()
    return seen


def test_large_fetch_answers_go_through_the_sender_threads(tmp_path: Path) -> None:
    cfg, port = formatted_inprocess_config(
        tmp_path, **{"admin.listeners": "", "num.network.threads": "2"})
    bootstrap = f"127.0.0.1:{port}"

    async def go() -> None:
        node = Node(cfg)
        try:
            await asyncio.wait_for(node.start(), 60)
            server = node.broker_server
            assert server is not None and server.senders is not None
            assert server.senders.threads == 2
            await asyncio.to_thread(produce, bootstrap)
            before = server.senders.jobs
            large, small = await asyncio.gather(
                asyncio.to_thread(consume, bootstrap, 1 << 20),
                asyncio.to_thread(consume, bootstrap, 16 * 1024))
            assert server.senders.jobs - before >= 4, "no answer went to the threads"
            for seen in (large, small):
                assert seen == {0: list(range(0, RECORDS, 2)), 1: list(range(1, RECORDS, 2))}
        finally:
            await node.stop()

    asyncio.run(go())
