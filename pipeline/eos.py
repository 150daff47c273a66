"""The exactly-once streaming sink: one Kafka transaction per micro-batch and task, committed
by the driver in `commit(messages, batchId)` (docs/pipeline.md, "Exactly-once sink").

Names (stable across task attempts, micro-batches and query restarts):
    transactional.id   <prefix>-<Spark partition id>    prefix: skiff.transactionalIdPrefix,
                                                        else spark-skiff-sink-<query id>
    marker group       the same string                  (a consumer group id)

Task (executor), `write_in_transaction`:
    1. nothing to write -> no transaction
    2. init_transactions(transactional.id): fences every earlier producer of the id (a failed
       attempt, a zombie, the run before a crash) and aborts its unfinished transaction
    3. the marker group's committed offset on (marker topic, 0) >= batchId: this task's
       output of this batch is already committed (a batch replayed after a driver crash) ->
       write nothing, report `already_committed`
    4. begin; produce every row, flush (all acknowledged)
    5. DescribeTransactions(transactional.id) -> producer id and epoch (librdkafka does not
       expose them; read after step 2 and before step 6, the answer can only be this
       producer's: see `write_in_transaction`)
    6. send_offsets_to_transaction(marker group, (marker topic, 0) at offset batchId): the
       marker commits and aborts with the rows
    7. return (transactional.id, producer id, epoch) WITHOUT committing
Driver, `commit_batch`: EndTxn(commit) for each reported transaction (pipeline/txn.py); any
error fails the micro-batch (a fenced or timed-out transaction was aborted: its rows are not
visible, the query stops, and a restart replays the batch). `abort_batch`: EndTxn(abort),
best effort (the next init_transactions of the id aborts it anyway).

Pure helpers (`transactional_id`, `already_committed`, `pending_transactions`) are unit
tested; the rest is the Kafka shell.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from pipeline.options import SkiffOptionError, WriteOptions

log = logging.getLogger(__name__)

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
DEFAULT_PREFIX = "spark-skiff-sink-"
_TIMEOUT_S = 60.0
# Client settings the coordinator client (pipeline/txn.py) cannot honour.
_SECURITY_KEYS = ("security.protocol",)
_REFUSED = ("transactional.id", "enable.idempotence")


@dataclass
class TxnCommitMessage(WriterCommitMessage):
    """What a task reports: its open transaction, or that it has nothing to commit."""

    partition: int
    batch_id: int
    rows: int
    transactional_id: str | None = None  # None: no transaction to commit
    producer_id: int = -1
    producer_epoch: int = -1
    already_committed: bool = False


def transactional_id(prefix: str, partition: int) -> str:
    return f"{prefix}-{partition}"


def already_committed(marker_offset: int | None, batch_id: int) -> bool:
    """The marker holds the id of the last committed batch of this task's partition; Spark
    commits batches in order, so a marker at or past `batch_id` means this batch is done."""
    return marker_offset is not None and marker_offset >= 0 and marker_offset >= batch_id


def pending_transactions(messages: Sequence[WriterCommitMessage | None], batch_id: int
                         ) -> list[TxnCommitMessage]:
    """The transactions of `batch_id` to end; refuses messages of another batch or kind."""
    out: list[TxnCommitMessage] = []
    seen: set[str] = set()
    for m in messages:
        if m is None:
            continue
        if not isinstance(m, TxnCommitMessage):
            raise RuntimeError(f"exactly-once sink got a commit message {m!r} of another kind")
        if m.batch_id != batch_id:
            raise RuntimeError(f"a task of micro-batch {m.batch_id} reported to the commit "
                               f"of micro-batch {batch_id}")
        if m.transactional_id is None:
            continue
        if m.transactional_id in seen:
            raise RuntimeError(f"two tasks reported transactional id {m.transactional_id}")
        seen.add(m.transactional_id)
        out.append(m)
    return out


def check_transactional_config(opts: WriteOptions) -> None:
    """Planning-time refusals for exactly-once delivery."""
    for key in _REFUSED:
        if key in opts.client:
            raise SkiffOptionError(
                f"Kafka option '{key}' is set by the exactly-once sink itself "
                "(skiff.transactionalIdPrefix names its transactional ids)")
    protocol = opts.client.get("security.protocol", "plaintext").strip().lower()
    if protocol != "plaintext":
        raise SkiffOptionError(
            f"skiff.deliveryGuarantee 'exactly-once' supports security.protocol PLAINTEXT "
            f"only, not '{protocol}': the driver ends transactions with its own coordinator "
            "client, which has no TLS/SASL settings yet")


def _task_context() -> tuple[int, int, str]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the exactly-once sink's write() must run in a Spark task")
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    query = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    if batch is None or query is None:
        raise RuntimeError("the exactly-once sink runs in streaming queries only (no batch id "
                           "in the task's properties)")
    return ctx.partitionId(), int(batch), query


def _client_conf(opts: WriteOptions) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": opts.bootstrap}
    conf.update({k: v for k, v in opts.client.items() if k.startswith(_SECURITY_KEYS)})
    return conf


def _first_rows(batches: Iterator[pa.RecordBatch]) -> tuple[pa.RecordBatch | None,
                                                           Iterator[pa.RecordBatch]]:
    for b in batches:
        if b.num_rows:
            return b, batches
    return None, batches


def _marker_topic(opts: WriteOptions, first: pa.RecordBatch) -> str:
    if opts.topic is not None:
        return opts.topic
    from pipeline.produce import column

    topics = column(first, "topic")
    topic = topics[0] if topics else None
    if topic is None:
        raise SkiffOptionError(
            "null topic present in the data. Use the topic option for setting a topic.")
    return str(topic)


def write_in_transaction(opts: WriteOptions, batches: Iterator[pa.RecordBatch]
                         ) -> TxnCommitMessage:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    from pipeline import txn
    from pipeline.produce import produce_with, producer_config

    partition, batch_id, query_id = _task_context()
    first, rest = _first_rows(batches)
    if first is None:
        return TxnCommitMessage(partition, batch_id, 0)
    prefix = opts.transactional_id_prefix or DEFAULT_PREFIX + query_id
    tid = transactional_id(prefix, partition)
    marker = TopicPartition(_marker_topic(opts, first), 0)
    conf = producer_config(opts)
    conf["transactional.id"] = tid
    producer = Producer(conf)
    producer.init_transactions(_TIMEOUT_S)
    consumer = Consumer({**_client_conf(opts), "group.id": tid, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        done = consumer.committed([marker], timeout=_TIMEOUT_S)[0]
        if done.error is not None:
            raise KafkaException(done.error)
        if already_committed(done.offset, batch_id):
            log.info("%s: micro-batch %d already committed (marker %d); nothing to write",
                     tid, batch_id, done.offset)
            return TxnCommitMessage(partition, batch_id, 0, already_committed=True)
        producer.begin_transaction()
        rows = produce_with(producer, opts, _chain(first, rest))
        # The id and epoch the coordinator holds now. init_transactions above made this
        # producer current; send_offsets_to_transaction below succeeds only if it still is,
        # and epochs only grow, so when it succeeds no other producer took the id in
        # between and this answer is this producer's own. (Asked once the transaction is
        # Ongoing: kio cannot read the -1 start time of an Empty one.)
        state = txn.describe(opts.bootstrap, tid)
        group = consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction(
            [TopicPartition(marker.topic, 0, batch_id, f"spark micro-batch {batch_id}")],
            group, _TIMEOUT_S)
    finally:
        consumer.close()
    if state.state != "Ongoing":
        raise RuntimeError(f"{tid}: transaction state {state.state} after the rows were "
                           "flushed, not Ongoing")
    # Not committed: the driver ends it. The producer is dropped without abort_transaction.
    return TxnCommitMessage(partition, batch_id, rows, tid, state.producer_id,
                            state.producer_epoch)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def commit_batch(opts: WriteOptions, messages: Sequence[WriterCommitMessage | None],
                 batch_id: int) -> None:
    from pipeline import txn

    pending = pending_transactions(messages, batch_id)
    if not pending:
        return
    results = txn.end_transactions(
        opts.bootstrap, [(m.transactional_id or "", m.producer_id, m.producer_epoch)
                         for m in pending], committed=True)
    failed = []
    for m, r in zip(pending, results, strict=True):
        if isinstance(r, txn.TxnError):
            failed.append(f"{m.transactional_id}: {r}")
        elif r.error.name != "none":
            failed.append(f"{m.transactional_id} (producer {m.producer_id} epoch "
                          f"{m.producer_epoch}): {r.error.name}")
    if failed:
        raise RuntimeError(
            f"exactly-once sink: micro-batch {batch_id} could not commit "
            f"{len(failed)} of {len(pending)} transactions: {'; '.join(failed)}. Their rows "
            "are not visible to read_committed readers; restart the query from its "
            "checkpoint to replay the batch (tasks whose transaction did commit skip it)")


def abort_batch(opts: WriteOptions, messages: Sequence[WriterCommitMessage | None],
                batch_id: int) -> None:
    from pipeline import txn

    try:
        pending = [m for m in messages
                   if isinstance(m, TxnCommitMessage) and m.transactional_id is not None]
        results = txn.end_transactions(
            opts.bootstrap, [(m.transactional_id or "", m.producer_id, m.producer_epoch)
                             for m in pending], committed=False, deadline_s=10.0)
    except Exception as e:  # best effort: the next init_transactions aborts them anyway
        log.warning("exactly-once sink: aborting micro-batch %d failed: %s", batch_id, e)
        return
    for m, r in zip(pending, results, strict=True):
        if not isinstance(r, txn.EndResult) or r.error.name != "none":
            log.warning("exactly-once sink: abort of %s in micro-batch %d: %s",
                        m.transactional_id, batch_id, r)
