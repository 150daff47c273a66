"""kafka-python 3 transactional producers: commit, abort, send_offsets_to_transaction and
zombie fencing, checked with librdkafka read_committed / read_uncommitted consumers."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaProducer
from kafka.errors import KafkaError as KpError
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

from broker.testing import admin as adm
from tests.compat.test_transactions_confluent import WAIT_S, read

pytestmark = pytest.mark.timeout(180)


def producer(bootstrap: str, tid: str) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid,
                         enable_idempotence=True, linger_ms=5)


def test_commit_abort_and_offsets(bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    group = f"kp-eos-{uuid.uuid4()}"
    p = producer(bootstrap, f"kp-{uuid.uuid4()}")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic_name, value=b"ok-%d" % i, partition=0)
        p.send_offsets_to_transaction(
            {KpTopicPartition(topic_name, 0): OffsetAndMetadata(5, "", -1)}, group)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic_name, value=b"bad", partition=0)
        p.send_offsets_to_transaction(
            {KpTopicPartition(topic_name, 0): OffsetAndMetadata(6, "", -1)}, group)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    assert read(bootstrap, topic_name, 1, "read_committed") == [b"ok-%d" % i for i in range(5)]
    assert read(bootstrap, topic_name, 1, "read_uncommitted") == [
        *(b"ok-%d" % i for i in range(5)), b"bad"]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        [tp] = c.committed([TopicPartition(topic_name, 0)], WAIT_S)
        assert tp.offset == 5
    finally:
        c.close()


def test_zombie_is_fenced(bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    tid = f"kp-zombie-{uuid.uuid4()}"
    first = producer(bootstrap, tid)
    second = producer(bootstrap, tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic_name, value=b"from-the-zombie", partition=0)
        first.flush()
        second.init_transactions()
        second.begin_transaction()
        second.send(topic_name, value=b"from-the-new-one", partition=0)
        second.commit_transaction()
        with pytest.raises(KpError):
            first.commit_transaction()
    finally:
        first.close(timeout=5)
        second.close(timeout=5)
    assert read(bootstrap, topic_name, 1, "read_committed") == [b"from-the-new-one"]
