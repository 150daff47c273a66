"""Rows of Arrow record batches produced with a confluent-kafka producer, as Spark's Kafka sink
writes them (key, value, topic, partition, headers); shared by the at-least-once sink
(sink.py) and the transactional one (eos.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pipeline.options import SkiffOptionError, WriteOptions

_FLUSH_TIMEOUT_S = 120.0
# Java's default partitioner (murmur2 of the key), so keyed rows land where a Java client
# would put them; librdkafka's own default hashes differently.
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": "5"}


def _idempotence_conflicts(client: dict[str, str]) -> bool:
    """Settings with which the Java producer (2.8+) turns its default idempotence off instead
    of failing: acks other than all, retries 0, more than 5 requests in flight."""
    acks = client.get("acks", client.get("request.required.acks", "all")).strip().lower()
    retries = client.get("retries", client.get("message.send.max.retries", "1")).strip()
    in_flight = client.get("max.in.flight.requests.per.connection",
                           client.get("max.in.flight", "5")).strip()
    try:
        return acks not in ("all", "-1") or int(retries) == 0 or int(in_flight) > 5
    except ValueError:
        return False  # librdkafka names the bad value when the producer is created


def producer_config(opts: WriteOptions) -> dict[str, str]:
    """The producer's librdkafka settings: the Java producer's defaults that Spark's Kafka
    sink writes with (murmur2 partitioning; idempotence unless a setting conflicts, so a
    retried send neither duplicates nor reorders rows), then the `kafka.*` options."""
    conf = dict(_PRODUCER_DEFAULTS)
    if "enable.idempotence" not in opts.client and not _idempotence_conflicts(opts.client):
        conf["enable.idempotence"] = "true"
    conf.update(opts.client)
    return conf


def column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            col = batch.column(i)
            if name in ("key", "value") and (
                    pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = col.cast(pa.binary())
            values: list[Any] = col.to_pylist()
            return values
    return None


def produce_with(producer: Any, opts: WriteOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row with `producer`; returns the count once all are acknowledged (the
    producer is flushed), raises otherwise."""
    from confluent_kafka import KafkaException

    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(failures) < 10:
            failures.append(str(err))

    rows = 0
    for batch in batches:
        n = batch.num_rows
        values = column(batch, "value") or [None] * n
        keys = column(batch, "key") or [None] * n
        topics = ([opts.topic] * n if opts.topic is not None
                  else column(batch, "topic") or [None] * n)
        parts = column(batch, "partition") or [None] * n
        headers = column(batch, "headers") or [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise SkiffOptionError(
                    "null topic present in the data. Use the topic option for setting a topic.")
            kwargs: dict[str, Any] = {}
            if parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, values[i], keys[i], on_delivery=on_delivery,
                                     **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            if failures:
                raise KafkaException(f"Kafka producer failed: {failures[0]}")
        rows += n
        producer.poll(0)
    left = producer.flush(_FLUSH_TIMEOUT_S)
    if failures:
        raise KafkaException(f"Kafka producer failed: {'; '.join(failures)}")
    if left:
        raise KafkaException(f"{left} records not acknowledged within {_FLUSH_TIMEOUT_S:.0f} s")
    return rows
