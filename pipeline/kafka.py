"""The Kafka-client shell of the `skiff` source and sink (librdkafka through confluent-kafka).

Driver side: `OffsetReader` lists the partitions a subscription covers and resolves
earliest / latest / timestamps to offsets with one ListOffsets round per question.
Executor side: `read_ranges` reads a task's offset ranges with its own consumer and yields
`pyarrow.RecordBatch`es in the source schema; `Writer` produces rows. Clients are
created inside these calls (Spark pickles everything else).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import admin as _admin
from confluent_kafka.admin import AdminClient

from pipeline.options import (
    EARLIEST,
    LATEST,
    ByTimestamp,
    Earliest,
    GlobalTimestamp,
    Latest,
    ReadOptions,
    SkiffOptionError,
    Specific,
    Subscription,
)
from pipeline.options import OffsetSpec as Spec
from pipeline.plan import OffsetRange, Offsets
from pipeline.schema import arrow_schema

TopicPart = tuple[str, int]
# confluent-kafka's stubs do not export OffsetSpec from the package they define it in.
_OffsetSpec: Any = getattr(_admin, "OffsetSpec")  # noqa: B009
_REQUEST_TIMEOUT_S = 30.0
_CONSUME_BATCH = 10_000
# Short enough that gaps at a range's end (compaction, transaction markers) cost little.
_CONSUME_WAIT_S = 0.1
# librdkafka's own prefetch default (1 s back-off when its queue is full) caps throughput.
# isolation.level: Spark's Kafka source reads uncommitted unless told (the Java client's
# default); librdkafka's default is read_committed. The offsets a micro-batch plans
# (OffsetReader, ListOffsets) and what its tasks' consumers see must use the same level: a
# read_committed consumer stops at the last stable offset, short of a range planned to the
# high watermark, and the rest of that range (an open transaction's records, committed
# later) would never be read.
_CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": "1", "enable.auto.commit": "false",
                      "max.partition.fetch.bytes": str(16 << 20),
                      "enable.partition.eof": "true", "isolation.level": "read_uncommitted"}
# Consumer-only settings that an admin client would warn about.
_CONSUMER_ONLY = ("isolation.level", "group.id", "fetch.", "queued.", "enable.", "auto.",
                  "session.", "heartbeat.", "max.poll", "partition.assignment", "check.crcs",
                  "group.")


class DataLossError(RuntimeError):
    """Offsets a query still needs are gone (retention, DeleteRecords, a deleted topic)."""


def data_loss_message(detail: str) -> str:
    return (
        f"{detail}. Some data may have been lost because they are not available in Kafka any "
        "more; either the data was aged out by Kafka or the topic may have been deleted "
        "before all the data in the topic was processed. If you want your streaming query "
        "to continue on such cases, set the source option 'failOnDataLoss' to 'false'.")


def consumer_config(opts: ReadOptions) -> dict[str, Any]:
    conf: dict[str, Any] = dict(_CONSUMER_DEFAULTS)
    conf.update(opts.client)
    conf.setdefault("group.id", f"{opts.group_id_prefix}-{uuid.uuid4()}")
    return conf


def admin_config(client: dict[str, str]) -> dict[str, Any]:
    return {k: v for k, v in client.items() if not k.startswith(_CONSUMER_ONLY)}


def check_client_config(conf: dict[str, Any], role: str) -> None:
    """librdkafka refuses settings it does not know: say so while the query is planned."""
    try:
        if role == "consumer":
            Consumer(conf).close()
        else:
            from confluent_kafka import Producer

            Producer(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise SkiffOptionError(f"Invalid 'kafka.*' option for the Kafka {role}: {e}") from None


class OffsetReader:
    """Driver-side metadata and offset lookups for one query."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        conf = admin_config(opts.client)
        conf["bootstrap.servers"] = opts.bootstrap
        self._admin = AdminClient(conf)
        self._read_committed = opts.client.get("isolation.level", "") == "read_committed"

    def topic_partitions(self) -> list[TopicPart]:
        """Partitions the subscription covers now (assign: exactly those named)."""
        sub: Subscription = self.opts.subscription
        if sub.kind == "assign":
            return sorted(sub.assigned)
        md = self._admin.list_topics(timeout=_REQUEST_TIMEOUT_S)
        out: list[TopicPart] = []
        for name, t in md.topics.items():
            if t.error is not None or name.startswith("__") or not sub.matches(name):
                continue
            out.extend((name, p) for p in t.partitions)
        return sorted(out)

    def _list(self, specs: dict[TopicPart, Any]) -> dict[TopicPart, int]:
        if not specs:
            return {}
        from confluent_kafka import IsolationLevel

        level = (IsolationLevel.READ_COMMITTED if self._read_committed
                 else IsolationLevel.READ_UNCOMMITTED)
        futures = self._admin.list_offsets(
            {TopicPartition(t, p): s for (t, p), s in specs.items()},
            isolation_level=level, request_timeout=_REQUEST_TIMEOUT_S)
        out = {}
        for tp, fut in futures.items():
            out[(tp.topic, tp.partition)] = int(fut.result().offset)
        return out

    def earliest(self, tps: list[TopicPart]) -> dict[TopicPart, int]:
        return self._list({tp: _OffsetSpec.earliest() for tp in tps})

    def latest(self, tps: list[TopicPart]) -> dict[TopicPart, int]:
        return self._list({tp: _OffsetSpec.latest() for tp in tps})

    def by_timestamp(self, stamps: dict[TopicPart, int]) -> dict[TopicPart, int]:
        """First offset whose timestamp is >= the given one; -1 where there is none."""
        return self._list({tp: _OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})

    def resolve(self, spec: Spec, tps: list[TopicPart], which: str) -> Offsets:
        """Offsets for `tps` from a startingOffsets / endingOffsets specification."""
        if isinstance(spec, Earliest):
            return self.earliest(tps)
        if isinstance(spec, Latest):
            return self.latest(tps)
        if isinstance(spec, Specific):
            given = set(spec.offsets)
            if given != set(tps):
                raise SkiffOptionError(
                    f"If {which}Offsets contains specific offsets, you must specify all "
                    f"TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                    f"Specified: {_names(given)} Assigned: {_names(set(tps))}")
            early = self.earliest([tp for tp in tps if spec.offsets[tp] == EARLIEST])
            late = self.latest([tp for tp in tps if spec.offsets[tp] == LATEST])
            return {tp: early.get(tp, late.get(tp, spec.offsets[tp])) for tp in tps}
        if isinstance(spec, GlobalTimestamp):
            stamps = dict.fromkeys(tps, spec.timestamp)
        else:
            assert isinstance(spec, ByTimestamp)
            if set(spec.timestamps) != set(tps):
                raise SkiffOptionError(
                    f"If {which}OffsetsByTimestamp contains specific timestamps, you must "
                    f"specify all TopicPartitions.\nSpecified: {_names(set(spec.timestamps))} "
                    f"Assigned: {_names(set(tps))}")
            stamps = dict(spec.timestamps)
        found = self.by_timestamp(stamps)
        missing = [tp for tp, off in found.items() if off < 0]
        if missing:
            if which == "starting" and not self.opts.starting_by_timestamp_latest:
                t, p = missing[0]
                raise SkiffOptionError(
                    f"No offset matched from request of topic-partition {t}-{p} and "
                    f"timestamp {stamps[missing[0]]}.")
            found.update(self.latest(missing))
        return found

    def close(self) -> None:
        self._admin = None  # type: ignore[assignment]


def _names(tps: set[TopicPart]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"


def _check_range(opts: ReadOptions, consumer: Any, rng: OffsetRange) -> tuple[int, int] | None:
    """[start, until) to read after the data-loss checks, or None when nothing is left."""
    tp = TopicPartition(rng.topic, rng.partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=_REQUEST_TIMEOUT_S)
    except KafkaException as e:
        if opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(
                f"Cannot read {rng.topic}-{rng.partition}: {e}")) from None
        return None
    start = rng.from_offset
    if start < low:
        if opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(
                f"Cannot fetch offset {start} of {rng.topic}-{rng.partition}: its "
                f"earliest offset is now {low}"))
        start = low
    until = rng.until_offset
    if until > high:
        if opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(
                f"Cannot fetch offsets [{high}, {until}) of {rng.topic}-{rng.partition}: "
                f"its latest offset is now {high}"))
        until = high
    return (start, until) if start < until else None


def read_ranges(opts: ReadOptions, ranges: tuple[OffsetRange, ...]
                ) -> Iterator[pa.RecordBatch]:
    """The records of each [from, until) range (distinct partitions) as Arrow batches, read
    by one consumer (executor side).

    Gaps inside a range (compaction, transaction markers, aborted records under
    read_committed) are skipped. A start below the partition's earliest offset is data
    loss: an error with failOnDataLoss=true, else reading starts at the earliest offset.
    Each consume() result becomes one batch through column-wise comprehensions; the
    per-record Python work is one attribute call per column.
    """
    schema = arrow_schema(opts.include_headers)
    consumer = Consumer(consumer_config(opts))
    try:
        until: dict[TopicPart, int] = {}
        starts: dict[TopicPart, int] = {}
        for rng in ranges:
            span = _check_range(opts, consumer, rng)
            if span is not None:
                starts[(rng.topic, rng.partition)] = span[0]
                until[(rng.topic, rng.partition)] = span[1]
        if not until:
            return
        consumer.assign([TopicPartition(t, p, s) for (t, p), s in starts.items()])
        todo = set(until)
        position = dict(starts)
        last_progress = time.monotonic()
        while todo:
            # librdkafka's consume() returns only when it has num_messages or the timeout
            # passed: asking for no more than the ranges still hold keeps a short range (a
            # streaming micro-batch) from waiting out the timeout.
            wanted = sum(max(1, until[tp] - position[tp]) for tp in todo)
            msgs: list[Any] = consumer.consume(num_messages=min(_CONSUME_BATCH, wanted),
                                               timeout=_CONSUME_WAIT_S)
            if not msgs:
                if (time.monotonic() - last_progress) * 1000 > opts.poll_timeout_ms:
                    t, p = next(iter(todo))
                    raise TimeoutError(
                        f"Cannot fetch records of {t}-{p} up to offset {until[(t, p)]} in "
                        f"{opts.poll_timeout_ms} milliseconds")
                continue
            last_progress = time.monotonic()
            errors = [m for m in msgs if m.error() is not None]
            if errors:
                for m in errors:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(m.error())
                    todo.discard((m.topic(), m.partition()))  # nothing more below its end
                msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            batch = _batch(schema, msgs, opts.include_headers)
            del msgs
            # Per partition in this result: its last offset, to find completed ranges.
            last = pa.Table.from_batches([batch.select(["topic", "partition", "offset"])]
                                         ).group_by(["topic", "partition"]).aggregate(
                                             [("offset", "max")]).to_pylist()
            spill = False
            for row in last:
                tp = (row["topic"], row["partition"])
                if tp in position:
                    position[tp] = max(position[tp], row["offset_max"] + 1)
                end = until.get(tp)
                if end is None or tp not in todo:
                    spill = True
                    continue
                if row["offset_max"] >= end - 1:
                    todo.discard(tp)
                    spill = spill or row["offset_max"] >= end
            if spill:  # records past a range's end, or of a partition already complete
                keep = [o < until.get((t, p), -1) for t, p, o in zip(
                    batch.column("topic").to_pylist(), batch.column("partition").to_pylist(),
                    batch.column("offset").to_pylist(), strict=True)]
                batch = batch.filter(pa.array(keep))
            done = [TopicPartition(t, p) for t, p in until if (t, p) not in todo]
            if done:
                consumer.pause(done)
                # Forget finished partitions: their prefetched records are dropped above.
                until = {tp: e for tp, e in until.items() if tp in todo}
            if batch.num_rows:
                yield batch
    finally:
        consumer.close()


def _batch(schema: pa.Schema, msgs: list[Any], with_headers: bool) -> pa.RecordBatch:
    stamps = [m.timestamp() for m in msgs]
    cols = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.array([m.topic() for m in msgs], pa.string()),
        pa.array([m.partition() for m in msgs], pa.int32()),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array([ts * 1000 for _, ts in stamps], schema.field("timestamp").type),
        pa.array([kind - 1 if kind > 0 else 0 for kind, _ in stamps], pa.int32()),
    ]
    if with_headers:
        cols.append(pa.array(
            [[{"key": k, "value": v} for k, v in h] if (h := m.headers()) else None
             for m in msgs], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)
