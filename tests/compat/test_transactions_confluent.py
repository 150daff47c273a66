"""Transactions with librdkafka (confluent-kafka) against a real node: commit and abort seen
through read_committed and read_uncommitted consumers, send_offsets_to_transaction in a
consume-transform-produce loop (the group's offsets move only with a committed
transaction), and zombie fencing (a second producer with the same transactional.id fences
the first, which gets a fatal error)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.testing import admin as adm

pytestmark = pytest.mark.timeout(180)
WAIT_S = 30.0


def producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "transaction.timeout.ms": 60000, "linger.ms": 5, "log_level": 3,
                     **extra})


def read(bootstrap: str, topic: str, partitions: int, isolation: str,
         grace_s: float = 1.5) -> list[bytes]:
    """Every value in the topic, read until nothing more comes for `grace_s`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": 1, "log_level": 3})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        quiet = time.monotonic() + grace_s + 2.0
        while time.monotonic() < min(deadline, quiet):
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(m.error())
                out.append(m.value())
                quiet = time.monotonic() + grace_s
    finally:
        c.close()
    return out


def test_commit_and_abort(bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=2)
    p = producer(bootstrap, f"tx-{uuid.uuid4()}")
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic_name, value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, value=b"aborted-%d" % i, partition=i % 2)
    p.flush(WAIT_S)  # the aborted records are in the log
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic_name, value=b"committed-last", partition=0)
    p.commit_transaction(WAIT_S)

    committed = read(bootstrap, topic_name, 2, "read_committed")
    assert sorted(committed) == sorted([b"committed-%d" % i for i in range(20)]
                                       + [b"committed-last"])
    everything = read(bootstrap, topic_name, 2, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [b"aborted-%d" % i for i in range(10)])


def _eos_round(bootstrap: str, p: Producer, src: str, dst: str, group: str, n: int,
               commit: bool) -> int:
    """Consume up to `n` records of `src` in group `group`, write them transformed to `dst`
    with the offsets in the same transaction; commit or abort. Returns how many."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "session.timeout.ms": 6000,
                  "fetch.queue.backoff.ms": 1, "log_level": 3})
    try:
        c.subscribe([src])
        got: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(num_messages=n - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
        p.begin_transaction()
        for m in got:
            p.produce(dst, value=m.value().upper(), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), WAIT_S)
        if commit:
            p.commit_transaction(WAIT_S)
        else:
            p.abort_transaction(WAIT_S)
        return len(got)
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, i) for i in range(partitions)], WAIT_S)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def test_send_offsets_to_transaction(bootstrap: str, topic_name: str) -> None:
    src, dst, group = topic_name + "-in", topic_name + "-out", f"eos-{uuid.uuid4()}"
    adm.create_topic(bootstrap, src, partitions=1)
    adm.create_topic(bootstrap, dst, partitions=1)
    plain = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(30):
        plain.produce(src, value=b"rec-%d" % i)
    assert plain.flush(WAIT_S) == 0
    p = producer(bootstrap, f"eos-{uuid.uuid4()}")
    p.init_transactions(WAIT_S)

    assert _eos_round(bootstrap, p, src, dst, group, 10, commit=False) == 10
    assert committed_offsets(bootstrap, group, src, 1) == [-1001]  # OFFSET_INVALID: none
    assert _eos_round(bootstrap, p, src, dst, group, 30, commit=True) == 30
    assert committed_offsets(bootstrap, group, src, 1) == [30]
    out = read(bootstrap, dst, 1, "read_committed")
    assert sorted(out) == sorted(b"REC-%d" % i for i in range(30))


def test_zombie_is_fenced(bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    tid = f"zombie-{uuid.uuid4()}"
    first = producer(bootstrap, tid)
    first.init_transactions(WAIT_S)
    first.begin_transaction()
    first.produce(topic_name, value=b"from-the-zombie")
    first.flush(WAIT_S)

    second = producer(bootstrap, tid)
    second.init_transactions(WAIT_S)  # fences the first and aborts its transaction
    second.begin_transaction()
    second.produce(topic_name, value=b"from-the-new-one")
    second.commit_transaction(WAIT_S)

    with pytest.raises(KafkaException) as info:
        first.produce(topic_name, value=b"late")
        first.commit_transaction(WAIT_S)
    err = info.value.args[0]
    assert err.fatal(), err
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                          KafkaError.INVALID_PRODUCER_EPOCH), err

    assert read(bootstrap, topic_name, 1, "read_committed") == [b"from-the-new-one"]
