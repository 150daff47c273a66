"""bench/replay.py's idempotent Produce (a producer id per connection, consecutive
sequences, a CRC per send) taken by Skiff and by Kafka 4.4 alike: every request answered
without error and every record counted once in the end offsets (the replayer behind the
`--replay-idempotent` figures of bench/vs_kafka.py); and its Fetch, whose answers it reads
in place, read back whole from both, every answer read as kio reads it."""

from __future__ import annotations

import uuid
from typing import Any

from bench import replay
from bench.vs_kafka import create_topic
from tests.conftest import Broker
from tests.support.kafka_ref import KafkaNode

PARTITIONS = 3
REQUESTS = 60  # over 3 connections: 20 each, 5 in flight, one partition per connection
RECORDS_PER_BATCH = 4


def test_skiff_takes_the_idempotent_replay_whole(skiff_node: Broker) -> None:
    replay_and_count(skiff_node.bootstrap)


def test_kafka_takes_the_idempotent_replay_whole(kafka_ref: KafkaNode) -> None:
    replay_and_count(kafka_ref.bootstrap)


def replayed_topic(bootstrap: str, prefix: str, **produce: Any
                   ) -> tuple[str, int, replay.ReplayResult]:
    """(a new topic, the records wait_writable probed it with, the replayed Produce)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    probe = replay.wait_writable(bootstrap, topic, range(PARTITIONS))
    r = replay.replay_produce(bootstrap, topic, range(PARTITIONS), connections=3,
                              inflight=5, records_per_batch=RECORDS_PER_BATCH, size=100,
                              requests=REQUESTS, **produce)
    return topic, probe, r


def replay_and_count(bootstrap: str) -> None:
    topic, probe, r = replayed_topic(bootstrap, "replay-idem", check_every=1, idempotent=True)
    assert r.errors == []
    assert r.requests == REQUESTS
    ends = replay.end_offsets(bootstrap, topic, range(PARTITIONS))
    assert sum(ends.values()) == probe + REQUESTS * RECORDS_PER_BATCH
    # each connection's 20 requests went to its one partition (after the probe's records)
    assert all(e > REQUESTS // 3 * RECORDS_PER_BATCH for e in ends.values()), ends


def test_skiff_answers_the_fetch_replay_as_kio_reads_it(skiff_node: Broker) -> None:
    fetch_and_count(skiff_node.bootstrap)


def test_kafka_answers_the_fetch_replay_as_kio_reads_it(kafka_ref: KafkaNode) -> None:
    fetch_and_count(kafka_ref.bootstrap)


def fetch_and_count(bootstrap: str) -> None:
    topic, probe, produced = replayed_topic(bootstrap, "replay-fetch")
    assert produced.errors == []
    ends = replay.end_offsets(bootstrap, topic, range(PARTITIONS))
    fetched = replay.replay_fetch(bootstrap, topic, ends, connections=2, timeout_s=60,
                                  check_every=1)
    assert fetched.errors == []
    assert fetched.records == sum(ends.values()) == probe + REQUESTS * RECORDS_PER_BATCH
