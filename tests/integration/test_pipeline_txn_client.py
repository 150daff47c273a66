"""pipeline/txn.py against a real node: the exactly-once sink's driver ends transactions that
librdkafka producers began and left open (no Spark here; tests/spark shows the whole sink).

A producer flushes rows in a transaction and is dropped without committing (librdkafka does
not abort on close); DescribeTransactions gives its producer id and epoch; EndTxn(commit)
from another connection commits it, and again (a retry after a lost answer) answers NONE.
A second producer of the same transactional id fences the first and aborts its transaction:
EndTxn(commit) with the first one's epoch answers PRODUCER_FENCED and its rows stay
invisible to read_committed readers."""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from pipeline import txn
from tests.spark.kafka_util import consume_all, create_topic

pytestmark = pytest.mark.timeout(180)


def _open_transaction(bootstrap: str, tid: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(60)
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(60) == 0
    del p
    gc.collect()


def test_end_transactions_of_dropped_producers(skiff_node: Any) -> None:
    b = skiff_node.bootstrap
    topic = f"pipeline-txn-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, 2)
    tid = f"pipeline-txn-client-{uuid.uuid4().hex[:8]}"

    _open_transaction(b, tid, topic, [b"a0", b"a1"])
    first = txn.describe(b, tid)
    assert first.state == "Ongoing"  # dropping the producer did not end it
    assert first.partitions == {(topic, 0), (topic, 1)}
    ends = txn.end_transactions(b, [(tid, first.producer_id, first.producer_epoch)], True)
    assert [e.error for e in ends if isinstance(e, txn.EndResult)] == [ErrorCode.none]
    again = txn.end_transactions(b, [(tid, first.producer_id, first.producer_epoch)], True)
    assert [e.error for e in again if isinstance(e, txn.EndResult)] == [ErrorCode.none]

    _open_transaction(b, tid, topic, [b"b0", b"b1"])
    second = txn.describe(b, tid)
    assert second.producer_epoch > first.producer_epoch
    _open_transaction(b, tid, topic, [b"c0"])  # fences the second, aborts its transaction
    third = txn.describe(b, tid)
    fenced = txn.end_transactions(b, [(tid, second.producer_id, second.producer_epoch)], True)
    assert [e.error for e in fenced if isinstance(e, txn.EndResult)] == [
        ErrorCode.producer_fenced]
    done = txn.end_transactions(b, [(tid, third.producer_id, third.producer_epoch)], True)
    assert [e.error for e in done if isinstance(e, txn.EndResult)] == [ErrorCode.none]

    committed = sorted(r.value or b"" for r in consume_all(b, topic, 2))
    assert committed == [b"a0", b"a1", b"c0"]
    everything = sorted(r.value or b"" for r in consume_all(b, topic, 2,
                                                            isolation="read_uncommitted"))
    assert everything == [b"a0", b"a1", b"b0", b"b1", b"c0"]
