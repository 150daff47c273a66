"""`format("skiff")`: Spark's Kafka source and sink on the Python Data Source API.

    DataSource `skiff`
      schema()          the Kafka source schema (headers with includeHeaders=true)
      reader()          batch: SkiffBatchReader  -> one task per offset range
      streamReader()    SkiffStreamReader: offsets {"topic":{"0":n}} in Spark's checkpoint
      writer()          batch sink (pipeline.sink)
      streamWriter()    streaming sink (pipeline.sink), at-least-once like Spark's, or
                        exactly-once (skiff.deliveryGuarantee, pipeline.eos)

Options are checked when the query is planned (pipeline.options); offsets are resolved on
the driver (pipeline.kafka.OffsetReader); executors read with their own consumer and hand
Spark Arrow record batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pipeline import kafka
from pipeline.options import (
    STRATEGY_KEYS,
    ReadOptions,
    SkiffOptionError,
    known_read_option,
    lower,
    read_options,
)
from pipeline.plan import (
    Offsets,
    RangePartition,
    group_ranges,
    offsets_from_json,
    offsets_to_json,
    ranges_between,
    rate_limit,
    split_ranges,
)
from pipeline.schema import spark_schema


def check_fixed_schema(schema: StructType | None, include_headers: bool, name: str) -> None:
    if schema is None:
        return
    expected = spark_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in expected.fields]:
        raise SkiffOptionError(
            f"{name} source has a fixed schema and cannot be set with a custom one")


def _refuse_unknown(options: dict[str, str]) -> None:
    for key in options:
        if not known_read_option(key):
            raise SkiffOptionError(f"Unknown option '{key}' for the skiff source "
                                   "(see docs/pipeline.md for the options it takes)")


class SkiffDataSource(DataSource):
    """A drop-in for Spark's `format("kafka")` that needs no JVM jar."""

    @classmethod
    def name(cls) -> str:
        return "skiff"

    def schema(self) -> StructType:
        """Called by load(): the checks common to batch and streaming reads fail here."""
        opts = lower(self.options)
        # A write (topic option, no subscription) may call schema() too: its checks are
        # the sink's own.
        if "topic" not in opts or any(k in opts for k in STRATEGY_KEYS):
            _refuse_unknown(dict(self.options))
            read_options(dict(self.options), streaming=None)
        include = opts.get("includeheaders", "false").strip().lower() == "true"
        return spark_schema(include)

    def _read_options(self, schema: StructType | None, *, streaming: bool) -> ReadOptions:
        _refuse_unknown(dict(self.options))
        opts = read_options(dict(self.options), streaming=streaming)
        check_fixed_schema(schema, opts.include_headers, "Kafka")
        kafka.check_client_config(kafka.consumer_config(opts), "consumer")
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        return SkiffBatchReader(self._read_options(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SkiffStreamReader(self._read_options(schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pipeline.sink import SkiffBatchWriter

        return SkiffBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pipeline.sink import SkiffStreamWriter

        return SkiffStreamWriter(dict(self.options), schema)


def _batch_ranges(opts: ReadOptions) -> list[RangePartition]:
    reader = kafka.OffsetReader(opts)
    tps = reader.topic_partitions()
    start = reader.resolve(opts.starting, tps, "starting")
    end = reader.resolve(opts.ending, tps, "ending")
    for tp in tps:
        if end[tp] < start[tp]:
            t, p = tp
            raise SkiffOptionError(
                f"The ending offset {end[tp]} of {t}-{p} is before its starting offset "
                f"{start[tp]}")
    ranges = split_ranges(ranges_between(start, end), opts.min_partitions)
    return [RangePartition(g) for g in group_ranges(ranges, opts.partitions_per_task)]


class SkiffBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return _batch_ranges(self.opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return  # Spark runs one empty task when partitions() planned none
        yield from kafka.read_ranges(self.opts, partition.ranges)


class SkiffStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of offset ranges; Spark keeps the offsets in its checkpoint."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._offsets: kafka.OffsetReader | None = None
        self._target: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offsets"] = None
        return state

    @property
    def offsets(self) -> kafka.OffsetReader:
        if self._offsets is None:
            self._offsets = kafka.OffsetReader(self.opts)
        return self._offsets

    def initialOffset(self) -> dict[str, Any]:
        tps = self.offsets.topic_partitions()
        return offsets_to_json(self.offsets.resolve(self.opts.starting, tps, "starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.offsets.topic_partitions()
        self._target = self.offsets.latest(tps)

    def _available(self, start: Offsets) -> Offsets:
        if self._target is not None:
            latest = dict(self._target)
        else:
            tps = self.offsets.topic_partitions()
            latest = self.offsets.latest(tps)
        gone = sorted(set(start) - set(latest))
        if gone and self.opts.fail_on_data_loss and self._target is None:
            raise kafka.DataLossError(kafka.data_loss_message(
                "Partitions deleted: " + ", ".join(f"{t}-{p}" for t, p in gone)))
        shrunk = sorted(tp for tp, off in latest.items() if tp in start and off < start[tp])
        if shrunk:
            detail = ", ".join(f"{t}-{p} from {start[(t, p)]} to {latest[(t, p)]}"
                               for t, p in shrunk)
            if self.opts.fail_on_data_loss:
                raise kafka.DataLossError(kafka.data_loss_message(
                    f"Partition offsets went back: {detail}"))
            for tp in shrunk:
                latest[tp] = start[tp]
        return latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._available(begin)
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            full = dict(begin)
            full.update(self.offsets.earliest(new))
            end = rate_limit(full, latest, limit.max_rows)
        else:
            end = latest
        for tp, off in begin.items():  # keep partitions that are gone when failOnDataLoss=false
            end.setdefault(tp, off)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.offsets.earliest(new))
        ranges = split_ranges(ranges_between(begin, until), self.opts.min_partitions)
        return [RangePartition(g) for g in group_ranges(ranges, self.opts.partitions_per_task)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return  # Spark runs one empty task when partitions() planned none
        yield from kafka.read_ranges(self.opts, partition.ranges)

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None
