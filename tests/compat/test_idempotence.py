"""Idempotent producers against a real node: kafka-python 3 with its defaults (idempotence
on since KIP-679), librdkafka with enable.idempotence=true, and a hand-built retried batch
sent over a raw socket, also after the node restarted (producer state rebuilt from the log).
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import Records, i16, i32, i32Timedelta

from broker.protocol.records import Record, build_batch
from broker.testing.wire import RawConnection
from tests.conftest import Broker
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(90)
WAIT_S = 20.0
NOT_YET = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
           ErrorCode.leader_not_available, ErrorCode.request_timed_out)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=WAIT_S)[topic]
    fut.result(timeout=WAIT_S)


def read_all(bootstrap: str, topic: str, n: int, partition: int = 0) -> list[Any]:
    """Everything in the partition from offset 0 until `n` records came and then nothing
    more within a short grace period."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "idem-reader",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                  "fetch.queue.backoff.ms": 1})
    out: list[Any] = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + WAIT_S
        quiet_until = None
        while time.monotonic() < deadline:
            batch = c.consume(num_messages=1000, timeout=0.2)
            for m in batch:
                assert m.error() is None, m.error()
                out.append(m)
            if len(out) >= n:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        c.close()
    return out


def test_kafka_python_default_producer_is_idempotent(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10000)
    try:
        assert p.config["enable_idempotence"] is True
        futures = [p.send(topic_name, key=b"k%d" % i, value=b"kp-%04d" % i, partition=0)
                   for i in range(200)]
        p.flush(timeout=WAIT_S)
        offsets = [f.get(timeout=WAIT_S).offset for f in futures]
        pid = p._transaction_manager.producer_id_and_epoch  # the id InitProducerId gave it
        assert pid.producer_id >= 0 and pid.epoch == 0
    finally:
        p.close(timeout=5)
    assert offsets == list(range(200))
    got = read_all(bootstrap, topic_name, 200)
    assert [m.value() for m in got] == [b"kp-%04d" % i for i in range(200)]
    assert [m.offset() for m in got] == list(range(200))


def test_librdkafka_idempotent_producer_writes_each_record_once(
    bootstrap: str, topic_name: str,
) -> None:
    create_topic(bootstrap, topic_name, partitions=2)
    n = 3000
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 5, "batch.num.messages": 100, "message.timeout.ms": 30000})
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce(topic_name, value=b"rd-%05d" % i, partition=i % 2, on_delivery=on_delivery)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(WAIT_S) == 0
    assert not errors, errors[:3]
    for part in (0, 1):
        got = read_all(bootstrap, topic_name, n // 2, partition=part)
        assert [m.value() for m in got] == [b"rd-%05d" % i for i in range(part, n, 2)]
        assert [m.offset() for m in got] == list(range(n // 2))


# ---- a retried batch, by hand ---------------------------------------------------------------


class RawClient(RawConnection):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, WAIT_S)

    def init_producer_id(self) -> tuple[int, int]:
        resp = self.call(InitProducerIdRequest(
            transactional_id=None, transaction_timeout=i32Timedelta.parse(
                datetime.timedelta(seconds=60))))
        assert resp.error_code is ErrorCode.none
        return int(resp.producer_id), int(resp.producer_epoch)

    def produce(self, topic: str, batch: bytes) -> tuple[ErrorCode, int]:
        resp = self.call(ProduceRequest(
            transactional_id=None, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=i32(0), records=Records(batch)),)),)))
        part = resp.responses[0].partition_responses[0]
        return part.error_code, int(part.base_offset)


def idem_batch(pid: int, epoch: int, seq: int, n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(timestamp=now, value=b"raw-%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_retried_batch_is_acknowledged_with_its_original_offset(
    own_skiff_node: Broker, topic_name: str,
) -> None:
    bootstrap = own_skiff_node.bootstrap
    create_topic(bootstrap, topic_name)
    raw = RawClient(bootstrap)
    try:
        pid, epoch = raw.init_producer_id()
        first = idem_batch(pid, epoch, 0, 3)
        assert raw.produce(topic_name, first) == (ErrorCode.none, 0)
        assert raw.produce(topic_name, idem_batch(pid, epoch, 3, 2)) == (ErrorCode.none, 3)
        assert raw.produce(topic_name, first) == (ErrorCode.none, 0)  # the same bytes again
        code, _ = raw.produce(topic_name, idem_batch(pid, epoch, 9, 1))
        assert code is ErrorCode.out_of_order_sequence_number
    finally:
        raw.close()
    expected = 5
    if isinstance(own_skiff_node, SkiffNode):
        # After a clean stop the state comes back from the snapshot written at close; after
        # kill -9 from the batch headers at the end of the log.
        # (how, retried batch: first seq, count, original offset, next new seq = its offset)
        for how, (retry_seq, retry_n, retry_offset), new_seq in (
            ("stop", (3, 2, 3), 5), ("kill", (5, 1, 5), 6),
        ):
            own_skiff_node.stop() if how == "stop" else own_skiff_node.kill()
            own_skiff_node.start()
            own_skiff_node.wait_ready()
            raw = RawClient(bootstrap)
            try:
                deadline = time.monotonic() + WAIT_S
                while True:  # until this node leads the partition again
                    result = raw.produce(topic_name, idem_batch(pid, epoch, retry_seq, retry_n))
                    if result[0] not in NOT_YET or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                assert result == (ErrorCode.none, retry_offset), how
                assert raw.produce(topic_name, idem_batch(pid, epoch, new_seq, 1)) == \
                    (ErrorCode.none, new_seq), how
            finally:
                raw.close()
        expected = 7
    got = read_all(bootstrap, topic_name, expected)
    assert [m.value() for m in got] == [b"raw-%d" % i for i in range(expected)]


def test_a_new_producer_starts_at_sequence_zero_on_a_never_written_partition(
    bootstrap: str, topic_name: str,
) -> None:
    """KAFKA-15591 (Kafka 4.5; Kafka 4.4 takes any first sequence): of two requests of a new
    producer in flight to a just-created partition, the second must not be written while the
    first is still to be retried, or every retry of the first is out of order and its
    records expire. A partition that has held records still takes a producer at any
    sequence (its state may have expired)."""
    create_topic(bootstrap, topic_name)
    raw = RawClient(bootstrap)
    try:
        pid, epoch = raw.init_producer_id()
        deadline = time.monotonic() + WAIT_S
        while (code := raw.produce(topic_name, idem_batch(pid, epoch, 17, 5))[0]) in NOT_YET:
            assert time.monotonic() < deadline, code
            time.sleep(0.1)
        assert code is ErrorCode.out_of_order_sequence_number
        assert raw.produce(topic_name, idem_batch(pid, epoch, 0, 17)) == (ErrorCode.none, 0)
        assert raw.produce(topic_name, idem_batch(pid, epoch, 17, 5)) == (ErrorCode.none, 17)
        other, other_epoch = raw.init_producer_id()
        assert raw.produce(topic_name, idem_batch(other, other_epoch, 40, 1)) == (
            ErrorCode.none, 22)
    finally:
        raw.close()
    assert [m.value() for m in read_all(bootstrap, topic_name, 23)] == (
        [b"raw-%d" % i for i in range(22)] + [b"raw-40"])
