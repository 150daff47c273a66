"""TxnOffsetCommit (API 28): a transactional producer commits a group's offsets inside its
transaction (send_offsets_to_transaction). Sent to the GROUP coordinator: the offsets are
written to __consumer_offsets as the producer's transactional batch and take effect only
when the transaction's COMMIT marker reaches that partition (an ABORT drops them); see
broker/group/offsets.py. v3 (KIP-447) carries the consumer's generation and member id,
which are checked as OffsetCommit checks them; before v3 they are absent and not checked.

KIP-890: with `transaction.partition.verification.enable`, the group coordinator's broker
first asks the transaction coordinator whether the group's `__consumer_offsets` partition is
in the producer's transaction (AddOffsetsToTxn put it there), so offsets of a transaction
that already ended are refused (INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from v4) rather
than left pending; once the producer's transaction is open on that partition (its first
offsets are in the log) there is nothing to ask, as for a produce. v5 is transactions V2:
no AddOffsetsToTxn comes first, the partition is added to the transaction by this check
(it needs the finalized `transaction.version` >= 2,
else UNSUPPORTED_VERSION). v6 (KIP-1319, Kafka 4.4) names topics by id; an id no topic has is
UNKNOWN_TOPIC_ID, as Kafka answers. Unlike a produce, the offsets' own append carries no
verification guard here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import service_of
from broker.group.types import CommitPartition, TxnOffsetCommitRequest
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnOffsetCommitBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.txn.verification import TxnOperation, txn_offset_commit_operation
from broker.txn.version import transactions_v2

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 28
TOPIC_IDS_VERSION = 6  # KIP-1319: topics by id (class from broker/protocol/_kio_next)
# the coordinator could not be asked now: answered as a retriable error every client knows
_RETRIABLE = frozenset({
    ErrorCode.network_exception, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
})


async def _verify(node: TxnOffsetCommitBroker, request: Any, op: TxnOperation) -> ErrorCode | None:
    """The group's offsets partition checked with (V2: added to) the producer's
    transaction; None when it is in it, else the error for every partition."""
    service = node.txn_coordinator
    verifier = None if service is None else service.verifier
    if service is None or verifier is None:
        return ErrorCode.coordinator_not_available
    tp = (OFFSETS_TOPIC, service.offsets_partition_of(str(request.group_id)))
    part = node.replicas.get(*tp)
    if (op is not TxnOperation.ADD_PARTITION and part is not None
            and part.producer_state.has_ongoing_txn(int(request.producer_id),
                                                   int(request.producer_epoch))):
        return None  # the transaction is open on the offsets partition: nothing to verify
    failed = await verifier.verify(str(request.transactional_id), int(request.producer_id),
                                   int(request.producer_epoch), [tp], op)
    error: ErrorCode | None = failed.get(tp)
    if error is None:
        return None
    if error in _RETRIABLE:
        return ErrorCode.coordinator_not_available  # every client retries it
    return error


async def handle(node: TxnOffsetCommitBroker, ctx: RequestContext, request: Any) -> Any:
    image = node.metadata
    # keyed as the request names topics: by name, or by id (v6+)
    errors: dict[tuple[Any, int], ErrorCode] = {}
    accepted: list[CommitPartition] = []
    order: list[tuple[Any, int]] = []
    # WRITE on the transactional id, READ on the group, READ on each topic (Kafka's checks)
    whole: ErrorCode | None = None
    op = txn_offset_commit_operation(ctx.api_version)
    if not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, str(request.transactional_id)):
        whole = ErrorCode.transactional_id_authorization_failed
    elif not allowed(node, ctx, Op.READ, Res.GROUP, str(request.group_id)):
        whole = ErrorCode.group_authorization_failed
    elif op is TxnOperation.ADD_PARTITION and not transactions_v2(image):
        whole = ErrorCode.unsupported_version
    readable: dict[str, bool] = {}
    by_ids = ctx.api_version >= TOPIC_IDS_VERSION
    labels: dict[tuple[str, int], tuple[Any, int]] = {}  # (name, index) -> as requested
    for topic in request.topics:
        label: Any = topic.topic_id if by_ids else str(topic.name)
        name: str | None = str(topic.name) if not by_ids else None
        if by_ids and topic.topic_id is not None:
            t = image.topic_by_id(topic.topic_id)
            name = t.name if t is not None else None
        for p in topic.partitions:
            key = (label, int(p.partition_index))
            order.append(key)
            if whole is not None:
                errors[key] = whole
                continue
            if name is None:  # v6: an id no topic has (Kafka: UNKNOWN_TOPIC_ID)
                errors[key] = ErrorCode.unknown_topic_id
                continue
            if name not in readable:
                readable[name] = allowed(node, ctx, Op.READ, Res.TOPIC, name)
            if not readable[name]:
                errors[key] = ErrorCode.topic_authorization_failed
                continue
            if image.partition(name, p.partition_index) is None:
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            labels[(name, key[1])] = key
            accepted.append(CommitPartition(
                name, key[1], int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata))
    if accepted and (op is TxnOperation.ADD_PARTITION
                     or bool(node.config["transaction.partition.verification.enable"])):
        failed = await _verify(node, request, op)
        if failed is not None:
            for c in accepted:
                errors[labels[(c.topic, c.partition)]] = failed
            accepted = []
    if accepted:
        req = TxnOffsetCommitRequest(
            transactional_id=str(request.transactional_id), group_id=str(request.group_id),
            producer_id=int(request.producer_id), producer_epoch=int(request.producer_epoch),
            partitions=tuple(accepted),
            generation_id=int(getattr(request, "generation_id",
                                      getattr(request, "generation_id_or_member_epoch", -1))),
            member_id=str(getattr(request, "member_id", "")),
            group_instance_id=getattr(request, "group_instance_id", None))
        try:
            result = await service_of(node).commit_txn_offsets(req)
            errors.update({labels[k]: e for k, e in result.errors().items() if k in labels})
        except KafkaError as exc:
            for c in accepted:
                errors[labels[(c.topic, c.partition)]] = exc.error_code
    mod = response_module(request)
    by_topic: dict[Any, list[Any]] = {}
    for label, index in order:
        by_topic.setdefault(label, []).append(build(
            mod.TxnOffsetCommitResponsePartition, partition_index=index,
            error_code=errors.get((label, index), ErrorCode.unknown_server_error)))
    return build(mod.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
        build(mod.TxnOffsetCommitResponseTopic, name=label if not by_ids else None,
              topic_id=label if by_ids else None, partitions=tuple(parts))
        for label, parts in by_topic.items()))
