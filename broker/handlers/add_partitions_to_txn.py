"""AddPartitionsToTxn (API 24): partitions join a producer's transaction.

v0-v3 are the client's form (one transaction). v4+ is the batched form brokers send
(KIP-890): several transactions, each either added or, with verify_only, only checked
against the ongoing transaction (no state change; a partition not in it is
TRANSACTION_ABORTABLE, which v4 answers as INVALID_TXN_STATE). Partitions of unknown topics
get UNKNOWN_TOPIC_OR_PARTITION and the others of that transaction OPERATION_NOT_ATTEMPTED, as
in Kafka; otherwise every partition gets the coordinator's answer. v5 without verify_only is
how a leader adds the partition of a transactions V2 producer's first produce (the
transaction becomes one of V2); it needs the finalized `transaction.version` >= 2, else
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.txn.version import transactions_v2

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 24
BATCHED_VERSION = 4
TV2_VERSION = 5
FENCED_VERSION = 2

TopicPartition = tuple[str, int]


def _unknown(node: TxnBroker, parts: list[TopicPartition]) -> set[TopicPartition]:
    image = node.metadata
    out = set()
    for topic, p in parts:
        t = image.topic(topic)
        if t is None or p not in t.partitions:
            out.add((topic, p))
    return out


def _parts(topics: Any) -> list[TopicPartition]:
    return [(str(t.name), int(p)) for t in topics for p in t.partitions]


def _refused(node: TxnBroker, ctx: RequestContext, tid: str,
             parts: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka's checks for the client form: WRITE on the transactional id (every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic (the refused ones
    TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED). None: allowed."""
    if not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(parts, ErrorCode.transactional_id_authorization_failed)
    writable = {t: allowed(node, ctx, Op.WRITE, Res.TOPIC, t) for t in {t for t, _ in parts}}
    if all(writable.values()):
        return None
    return {tp: (ErrorCode.topic_authorization_failed if not writable[tp[0]]
                 else ErrorCode.operation_not_attempted) for tp in parts}


async def _one(node: TxnBroker, tid: str, pid: int, epoch: int, parts: list[TopicPartition],
               verify_only: bool, tv2: bool = False) -> dict[TopicPartition, ErrorCode]:
    try:
        svc = _txn.service(node)
    except KafkaError as exc:
        return dict.fromkeys(parts, exc.error_code)
    unknown = _unknown(node, parts)
    if unknown:
        return {tp: (ErrorCode.unknown_topic_or_partition if tp in unknown
                     else ErrorCode.operation_not_attempted) for tp in parts}
    if verify_only:
        return svc.verify_partitions(tid, pid, epoch, parts)
    if tv2 and not transactions_v2(node.metadata):
        return dict.fromkeys(parts, ErrorCode.unsupported_version)
    error = await svc.add_partitions(tid, pid, epoch, parts, tv2=tv2)
    return dict.fromkeys(parts, error)


def _topic_results(mod: Any, results: dict[TopicPartition, ErrorCode],
                   version: int) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), err in results.items():
        if err is ErrorCode.transaction_abortable and version < TV2_VERSION:
            err = ErrorCode.invalid_txn_state
        by_topic.setdefault(topic, []).append(build(
            mod.AddPartitionsToTxnPartitionResult, partition_index=p,
            partition_error_code=_txn.fenced_for(version, FENCED_VERSION, err)))
    return tuple(build(mod.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(rs))
                 for t, rs in by_topic.items())


async def handle(node: TxnBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    if ctx.api_version < BATCHED_VERSION:
        parts = _parts(request.v3_and_below_topics)
        tid = str(request.v3_and_below_transactional_id)
        results = _refused(node, ctx, tid, parts) or await _one(
            node, tid, int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch), parts, False)
        return build(mod.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     results_by_topic_v3_and_below=_topic_results(mod, results, ctx.api_version))
    if not allowed(node, ctx, Op.CLUSTER_ACTION, Res.CLUSTER):
        # the batched form is the brokers' (KIP-890): CLUSTER_ACTION, as Kafka checks it
        return build(mod.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed,
                     results_by_transaction=())
    out = []
    for txn in request.transactions:
        results = await _one(node, str(txn.transactional_id), int(txn.producer_id),
                             int(txn.producer_epoch), _parts(txn.topics), bool(txn.verify_only),
                             tv2=ctx.api_version >= TV2_VERSION)
        out.append(build(mod.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                         topic_results=_topic_results(mod, results, ctx.api_version)))
    return build(mod.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, results_by_transaction=tuple(out))
