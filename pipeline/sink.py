"""The `skiff` sink: Spark's Kafka sink rules on Arrow writers.

Columns (Spark's KafkaWriter): `value` (string or binary) is required; `key` (string or
binary), `topic` (string), `headers` (array<struct<key:string,value:binary>>) and
`partition` (int) are optional; other columns are ignored. The `topic` option, when set,
overrides the `topic` column; without either the query is refused when planned.

Delivery (`skiff.deliveryGuarantee`): `at-least-once` (the default, as Spark's Kafka sink):
each task produces its rows and waits for every acknowledgement before it reports success;
a retried task or a replayed micro-batch may write its rows again. `exactly-once` (streaming
writes only): one Kafka transaction per micro-batch and task, committed by the driver in
`commit(messages, batchId)`; see pipeline/eos.py and docs/pipeline.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from pipeline.options import SkiffOptionError, WriteOptions, lower, write_options

_FLUSH_TIMEOUT_S = 120.0
# Java's default partitioner (murmur2 of the key), so keyed rows land where a Java client
# would put them; librdkafka's own default hashes differently.
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": "5"}
_WRITE_KEYS = {"topic", "checkpointlocation", "path", "skiff.deliveryguarantee",
               "skiff.transactionalidprefix"}


@dataclass
class ProducedMessage(WriterCommitMessage):
    rows: int


def validate_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's KafkaWriter.validateQuery, with its messages."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if topic_option is None and "topic" not in fields:
        raise SkiffOptionError(
            "topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic.")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SkiffOptionError("topic attribute type must be a string")
    if "key" in fields and not isinstance(fields["key"], StringType | BinaryType):
        raise SkiffOptionError("key attribute type must be a string or binary")
    if "value" not in fields:
        raise SkiffOptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], StringType | BinaryType):
        raise SkiffOptionError("value attribute type must be a string or binary")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in h.elementType.fields]
              == [("key", StringType), ("value", BinaryType)])
        if not ok:
            raise SkiffOptionError(
                "headers attribute type must be an array<struct<key:string,value:binary>>")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SkiffOptionError("partition attribute type must be an int")


def _checked(options: dict[str, str], schema: StructType) -> WriteOptions:
    for key in options:
        low = key.lower()
        if not (low in _WRITE_KEYS or low.startswith("kafka.")):
            raise SkiffOptionError(f"Unknown option '{key}' for the skiff sink "
                                   "(see docs/pipeline.md for the options it takes)")
    opts = write_options(options)
    validate_write_schema(schema, opts.topic)
    from pipeline.kafka import check_client_config

    check_client_config(producer_config(opts), "producer")
    if opts.exactly_once:
        from pipeline.eos import check_transactional_config

        check_transactional_config(opts)
    elif "transactional.id" in opts.client:
        raise SkiffOptionError(
            "Kafka option 'transactional.id' is not supported: set the sink option "
            "'skiff.deliveryGuarantee' to 'exactly-once' for transactional writes")
    return opts


def producer_config(opts: WriteOptions) -> dict[str, str]:
    conf = dict(_PRODUCER_DEFAULTS)
    conf.update(opts.client)
    return conf


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            col = batch.column(i)
            if name in ("key", "value") and (
                    pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = col.cast(pa.binary())
            values: list[Any] = col.to_pylist()
            return values
    return None


def produce(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row; returns the count once all are acknowledged, raises otherwise."""
    from confluent_kafka import Producer

    return produce_with(Producer(producer_config(opts)), opts, batches)


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
        values = _column(batch, "value") or [None] * n
        keys = _column(batch, "key") or [None] * n
        topics = ([opts.topic] * n if opts.topic is not None
                  else _column(batch, "topic") or [None] * n)
        parts = _column(batch, "partition") or [None] * n
        headers = _column(batch, "headers") or [None] * n
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


class SkiffBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SkiffOptionError(
                "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                "ErrorIfExists (default).")
        self.opts = _checked(options, schema)
        if self.opts.exactly_once:
            raise SkiffOptionError(
                "skiff.deliveryGuarantee 'exactly-once' is supported by streaming writes "
                "(writeStream) only; batch writes are at-least-once")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return ProducedMessage(produce(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class SkiffStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = _checked(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            from pipeline.eos import write_in_transaction

            return write_in_transaction(self.opts, iterator)
        return ProducedMessage(produce(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            from pipeline.eos import commit_batch

            commit_batch(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            from pipeline.eos import abort_batch

            abort_batch(self.opts, messages, batchId)


__all__ = ["SkiffBatchWriter", "SkiffStreamWriter", "lower", "validate_write_schema"]
