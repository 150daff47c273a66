"""A deleted topic's disk space comes back once its files are removed, while the broker
runs: no descriptor of the process still points at a removed segment file.

A partition's log and the Partition holding it referred to each other (the producer-state
hook), so only the cyclic garbage collector freed a deleted partition's segments, and
with them the descriptors of its removed files. A busy broker may not run a full
collection for hours: replayed produce into topics deleted round after round filled a
68 GB disk (docs/benchmarks.md). The collector is off for this test, so refcounting alone
must free them, as it now does."""

from __future__ import annotations

import asyncio
import gc
import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node import Node
from tests.support.node import formatted_inprocess_config

pytestmark = pytest.mark.timeout(120)

TOPIC = "deleted-space"


def removed_files_still_open(data_dir: Path) -> list[str]:
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(data_dir)) and target.endswith(" (deleted)"):
            held.append(target)
    return held


def produce_then_delete(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, num_partitions=3,
                                           replication_factor=1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(6000):
        producer.produce(TOPIC, partition=i % 3, value=b"v" * 200)
    assert producer.flush(30) == 0
    for f in admin.delete_topics([TOPIC]).values():
        f.result(30)


def test_a_deleted_topics_files_are_closed_without_the_cyclic_collector(
        tmp_path: Path) -> None:
    cfg, port = formatted_inprocess_config(
        tmp_path, **{"admin.listeners": "", "log.segment.delete.delay.ms": "200"})
    logs = tmp_path / "logs"

    async def go() -> None:
        node = Node(cfg)
        gc.collect()
        gc.disable()
        try:
            await asyncio.wait_for(node.start(), 60)
            await asyncio.to_thread(produce_then_delete, f"127.0.0.1:{port}")
            deadline = asyncio.get_running_loop().time() + 20
            while any(TOPIC in p.name for p in logs.iterdir()):
                assert asyncio.get_running_loop().time() < deadline, list(logs.iterdir())
                await asyncio.sleep(0.1)
            assert removed_files_still_open(tmp_path) == []
        finally:
            gc.enable()
            await node.stop()

    asyncio.run(go())
