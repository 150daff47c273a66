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

from collections.abc import Iterator
from dataclasses import dataclass

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
from pipeline.produce import produce_with, producer_config

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


def produce(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row; returns the count once all are acknowledged, raises otherwise."""
    from confluent_kafka import Producer

    return produce_with(Producer(producer_config(opts)), opts, batches)


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
