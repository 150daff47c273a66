"""The Kafka-client shell of the `skiff` source and sink (librdkafka through confluent-kafka).

Driver side: `OffsetReader` lists the partitions a subscription covers and resolves
earliest / latest / timestamps to offsets with one ListOffsets round per question.
Executor side: `read_range` reads one offset range with its own consumer and yields
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
from confluent_kafka.admin import (
    AdminClient,
    OffsetSpec,  # type: ignore[attr-defined]
)

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
ROWS_PER_BATCH = 32_768
_REQUEST_TIMEOUT_S = 30.0
# librdkafka's own prefetch default (1 s back-off when its queue is full) caps throughput.
_CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": "1", "enable.auto.commit": "false",
                      "enable.partition.eof": "true"}
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
        return self._list({tp: OffsetSpec.earliest() for tp in tps})  # type: ignore[no-untyped-call]

    def latest(self, tps: list[TopicPart]) -> dict[TopicPart, int]:
        return self._list({tp: OffsetSpec.latest() for tp in tps})  # type: ignore[no-untyped-call]

    def by_timestamp(self, stamps: dict[TopicPart, int]) -> dict[TopicPart, int]:
        """First offset whose timestamp is >= the given one; -1 where there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})

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


def read_range(opts: ReadOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of [from, until) of one partition as Arrow batches (executor side).

    Gaps inside the range (compaction, transaction markers, aborted records under
    read_committed) are skipped. A start below the partition's earliest offset is data
    loss: an error with failOnDataLoss=true, else reading starts at the earliest offset.
    """
    schema = arrow_schema(opts.include_headers)
    poll_timeout = opts.poll_timeout_ms
    consumer = Consumer(consumer_config(opts))
    try:
        tp = TopicPartition(rng.topic, rng.partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=_REQUEST_TIMEOUT_S)
        except KafkaException as e:
            if opts.fail_on_data_loss:
                raise DataLossError(data_loss_message(
                    f"Cannot read {rng.topic}-{rng.partition}: {e}")) from None
            return
        start = rng.from_offset
        if start < low:
            if opts.fail_on_data_loss:
                raise DataLossError(data_loss_message(
                    f"Cannot fetch offset {start} of {rng.topic}-{rng.partition}: its "
                    f"earliest offset is now {low}"))
            start = low
        until = min(rng.until_offset, high) if not opts.fail_on_data_loss else rng.until_offset
        if until > high and opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(
                f"Cannot fetch offsets [{high}, {until}) of {rng.topic}-{rng.partition}: "
                f"its latest offset is now {high}"))
        if start >= until:
            return
        consumer.assign([TopicPartition(rng.topic, rng.partition, start)])
        yield from _consume(consumer, rng, until, schema, opts.include_headers, poll_timeout)
    finally:
        consumer.close()


def _consume(consumer: Any, rng: OffsetRange, until: int, schema: pa.Schema,
             with_headers: bool, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int] = []
    types: list[int] = []
    headers: list[list[dict[str, object]] | None] = []
    last_progress = time.monotonic()
    done = False
    while not done:
        msgs: list[Any] = consumer.consume(num_messages=10_000, timeout=1.0)
        if not msgs:
            if (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                at = offsets[-1] + 1 if offsets else rng.from_offset
                raise TimeoutError(
                    f"Cannot fetch record for offset {at}"
                    f" of {rng.topic}-{rng.partition} in {poll_timeout_ms} milliseconds")
            continue
        last_progress = time.monotonic()
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done = True  # nothing more exists below the partition's end
                    break
                raise KafkaException(err)
            off = m.offset()
            if off >= until:
                done = True
                break
            keys.append(m.key())
            values.append(m.value())
            offsets.append(off)
            kind, ts = m.timestamp()
            stamps.append(ts * 1000)
            types.append(kind - 1 if kind > 0 else 0)
            if with_headers:
                h = m.headers()
                headers.append([{"key": k, "value": v} for k, v in h] if h else None)
            if off == until - 1:
                done = True
                break
        if len(offsets) >= ROWS_PER_BATCH or (done and offsets):
            yield _batch(schema, rng, keys, values, offsets, stamps, types, headers, with_headers)
            keys, values, offsets, stamps, types, headers = [], [], [], [], [], []


def _batch(schema: pa.Schema, rng: OffsetRange, keys: list[bytes | None],
           values: list[bytes | None], offsets: list[int], stamps: list[int], types: list[int],
           headers: list[list[dict[str, object]] | None], with_headers: bool) -> pa.RecordBatch:
    n = len(offsets)
    cols = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([rng.topic] * n, pa.string()),
        pa.array([rng.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, schema.field("timestamp").type),
        pa.array(types, pa.int32()),
    ]
    if with_headers:
        cols.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)
