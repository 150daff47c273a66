"""Incremental fetch sessions (KIP-227) with a real client that uses them: kafka-python 3.x
(librdkafka and aiokafka send sessionless fetches). Each Fetch request the consumer sends
and each answer it reads are recorded where kafka-python builds and handles them: after the
first, full, fetch over 2,000 partitions the consumer sends incremental fetches and the
broker answers only partitions that changed; with max.incremental.fetch.session.cache.slots=1
a second consumer gets no session and reads everything with full fetches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(240)
WAIT_S = 60.0


class Wire:
    """The Fetch requests one consumer sent (session id, epoch, partitions named) and the
    partitions each answer carried."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.requests: list[tuple[int, int, int]] = []
        self.answers: list[int] = []
        fetcher: Any = consumer._fetcher
        create, handle = fetcher._create_fetch_requests, fetcher._handle_fetch_response

        def create_recorded(*args: Any, **kwargs: Any) -> Any:
            requests = create(*args, **kwargs)
            for request, _ in requests.values():
                self.requests.append((request.session_id, request.session_epoch,
                                      sum(len(t.partitions) for t in request.topics)))
            return requests

        def handle_recorded(node_id: Any, fetch_offsets: Any, send_time: Any,
                            response: Any) -> Any:
            self.answers.append(sum(len(t.partitions) for t in response.responses))
            return handle(node_id, fetch_offsets, send_time, response)

        fetcher._create_fetch_requests = create_recorded
        fetcher._handle_fetch_response = handle_recorded

    @property
    def full(self) -> int:
        return sum(1 for _, epoch, _ in self.requests if epoch <= 0)

    @property
    def incremental(self) -> int:
        return sum(1 for _, epoch, _ in self.requests if epoch > 0)


@pytest.fixture
def one_slot_node(tmp_path: Path) -> Iterator[SkiffNode]:
    node = SkiffNode(tmp_path / "node", config_env={
        "SKIFF_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS": "1"})
    node.start()
    try:
        node.wait_ready()
        yield node
    finally:
        node.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(WAIT_S * 1000))
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=int(WAIT_S * 1000))
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, partitions: list[int], tag: str) -> set[bytes]:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        values = {f"{tag}-{i}".encode() for i in partitions}
        futures = [p.send(topic, value=f"{tag}-{i}".encode(), partition=i) for i in partitions]
        p.flush(timeout=WAIT_S)
        for f in futures:
            f.get(timeout=WAIT_S)
        return values
    finally:
        p.close(timeout=5)


def consumer(bootstrap: str, topic: str, partitions: int) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=100, request_timeout_ms=int(WAIT_S * 1000) + 5000,
                      max_partition_fetch_bytes=64 * 1024)
    c.assign([TopicPartition(topic, i) for i in range(partitions)])
    c.seek_to_beginning()
    return c


def read(c: KafkaConsumer, want: set[bytes], got: set[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not want <= got and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            got.update(m.value for m in msgs)
    assert want <= got, f"missing {sorted(want - got)[:5]}"


def idle_polls(c: KafkaConsumer, n: int) -> None:
    for _ in range(n):
        assert not c.poll(timeout_ms=150)


def test_consumer_over_2000_partitions_fetches_incrementally(bootstrap: str,
                                                             topic_name: str) -> None:
    partitions = 2000
    create_topic(bootstrap, topic_name, partitions)
    want = produce(bootstrap, topic_name, [3, 700, 1999], "a")
    c = consumer(bootstrap, topic_name, partitions)
    # Every position known before the first fetch: kafka-python fetches the partitions it
    # has positions for, and under load (one CI run) its first request named 1,700 of them.
    for tp in c.assignment():
        c.position(tp, timeout_ms=int(WAIT_S * 1000))
    wire = Wire(c)
    try:
        got: set[bytes] = set()
        read(c, want, got)
        idle_polls(c, 5)
        want |= produce(bootstrap, topic_name, [0, 1500], "b")
        read(c, want, got)
        idle_polls(c, 5)
        # Under load kafka-python sends fewer fetches in those polls (8 in one CI run):
        # poll on, idle, until the session has carried ten (bounded).
        deadline = time.monotonic() + WAIT_S
        while wire.incremental < 10 and time.monotonic() < deadline:
            idle_polls(c, 1)
    finally:
        c.close()
    assert got == want
    # The first request is full and names every partition; the session holds from then on.
    first_sid, first_epoch, first_count = wire.requests[0]
    assert (first_sid, first_epoch, first_count) == (0, 0, partitions)
    assert wire.answers[0] == partitions
    assert wire.full == 1, wire.requests[:5]
    assert wire.incremental >= 10
    # Incremental requests name only partitions whose position moved; answers carry only
    # partitions with something new.
    later = wire.requests[1:]
    assert max(n for _, _, n in later) <= 3
    assert all(sid == later[0][0] != 0 for sid, _, _ in later)
    assert [epoch for _, epoch, _ in later] == list(range(1, len(later) + 1))
    assert max(wire.answers[1:]) <= 3
    assert wire.answers[1:].count(0) >= 8


def test_one_slot_cache_leaves_the_second_consumer_on_full_fetches(
        one_slot_node: SkiffNode) -> None:
    bootstrap, topic = one_slot_node.bootstrap, "sessions-one-slot"
    partitions = 50
    create_topic(bootstrap, topic, partitions)
    want = produce(bootstrap, topic, list(range(partitions)), "a")
    first = consumer(bootstrap, topic, partitions)
    first_wire = Wire(first)
    second: KafkaConsumer | None = None
    try:
        got1: set[bytes] = set()
        read(first, want, got1)
        second = consumer(bootstrap, topic, partitions)
        second_wire = Wire(second)
        got2: set[bytes] = set()
        read(second, want, got2)
        want |= produce(bootstrap, topic, list(range(partitions)), "b")
        read(first, want, got1)
        read(second, want, got2)
        idle_polls(first, 3)
        idle_polls(second, 3)
    finally:
        first.close()
        if second is not None:
            second.close()
    # No record missed by either.
    assert got1 == want and got2 == want
    # The first holds the only slot and fetches incrementally; a consumer's young session
    # cannot be evicted by another consumer, so the second is answered session_id 0 and
    # keeps sending full fetches naming every partition.
    assert first_wire.full == 1 and first_wire.incremental >= 3
    assert second_wire.incremental == 0 and second_wire.full >= 4
    assert all(n == partitions for _, _, n in second_wire.requests)
