"""Produce (API 0): append record batches to partition leaders.

Versions 0-13 are served. v0-v2 (Kafka 3.9 served them; 4.0 dropped them, KIP-896) carry
legacy message sets (magic 0 on v0-v1, magic 1 on v2), which the log converts to v2 batches on
append (broker/protocol/legacy.py); they have no transactional_id, v0 no throttle time, v0-v1
no log_append_time in the answer. v10+ answers
NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current leader and its endpoint
(KIP-951), so the producer switches without a metadata round trip. v11 may answer
TRANSACTION_ABORTABLE (KIP-890). v12 is transactions V2: the first produce of a
transaction to a partition adds the partition to it (gated by the finalized
`transaction.version` >= 2, else UNSUPPORTED_VERSION for a transactional request). v13
names topics by id (KIP-516): an id the cluster does not know is UNKNOWN_TOPIC_ID. The
answer is written by the narrow encoder in broker/protocol/produce_encoder.py.

Transactional batches (v3+) are taken when the request names a transactional_id, as Kafka
requires (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the log then tracks the producer's
open transaction until the coordinator's marker (WriteTxnMarkers) ends it. Control batches
from clients are refused (INVALID_RECORD). KIP-890 part 1 (with
`transaction.partition.verification.enable`, Kafka's default): before the first append of
a producer's transaction on a partition this leader asks the transaction coordinator
whether the partition is in that transaction (broker/txn/verification.py) and appends only
with the verification guard it took before asking, so a write that arrives after the
transaction ended is refused (INVALID_TXN_STATE) instead of opening a hanging
transaction. Authorizing WRITE on the transactional id is the ACL layer's.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any, Final

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._leader_hints import (
    LEADER_HINT_ERRORS,
    current_leader,
    leader_endpoints,
    not_hosted_error,
)
from broker.handlers._quotas import now_ms, who
from broker.log import AppendResult
from broker.protocol.frames import ResponseChunks
from broker.protocol.produce_encoder import (
    ProducePartition,
    ProduceTopic,
    encode_produce_response,
)
from broker.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_MASK,
    iter_batch_headers,
)
from broker.protocol.wire import NodeEndpoint
from broker.replication.producer_state import Guard
from broker.server.dispatch import NoResponse
from broker.txn.verification import TxnOperation, produce_error, produce_operation
from broker.txn.version import transactions_v2

if TYPE_CHECKING:
    from broker.handlers._context import TxnBrokerServices
    from broker.server import RequestContext

API_KEY: Final = 0
TOPIC_ID_VERSION: Final = 13
log = structlog.get_logger(__name__)
# connection id -> a future done once the latest Produce of that connection that had to wait
# (for its verification, or for the one before it) has made its appends
_appending: Final[dict[str, asyncio.Future[None]]] = {}
_ATTRIBUTES_OFFSET: Final = 21
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


def has_transactional_batch(records: bytes | memoryview) -> bool:
    """Whether any v2 batch of `records` has the transactional attribute, read at fixed
    header positions (no parsing; malformed input is left to the log's checks)."""
    if isinstance(records, bytes):  # as kio parses a request
        return _has_transactional_bytes(records)
    mv = memoryview(records)
    pos, end = 0, len(mv)
    while end - pos >= HEADER_SIZE:
        if mv[pos + MAGIC_OFFSET] != 2:
            return False
        if _I16.unpack_from(mv, pos + _ATTRIBUTES_OFFSET)[0] & TRANSACTIONAL_MASK:
            return True
        (length,) = _I32.unpack_from(mv, pos + 8)
        if length < MIN_BATCH_LENGTH:
            return False
        pos += length + LOG_OVERHEAD
    return False


def _has_transactional_bytes(data: bytes) -> bool:
    """has_transactional_batch with compiled bytes indexing: a struct unpack per batch cost
    more than the rest of the loop (2.3% of a replayed produce's user CPU)."""
    pos, end = 0, len(data)
    while end - pos >= HEADER_SIZE:
        if data[pos + MAGIC_OFFSET] != 2:
            return False
        if data[pos + _ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:  # attributes' low byte
            return True
        if data[pos + 8] & 0x80:
            return False  # a negative batch length
        length = ((data[pos + 8] << 24) | (data[pos + 9] << 16) | (data[pos + 10] << 8)
                  | data[pos + 11])
        if length < MIN_BATCH_LENGTH:
            return False
        pos += length + LOG_OVERHEAD
    return False


def _transactional_producer(records: bytes | memoryview) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of the first transactional batch, if any."""
    if not has_transactional_batch(records):
        return None
    try:
        for _, h in iter_batch_headers(memoryview(records), validate_crc=False):
            if h.is_transactional and not h.is_control and h.producer_id >= 0:
                return h.producer_id, h.producer_epoch, h.base_sequence
    except KafkaError:
        return None  # malformed: the log's checks answer it
    return None


async def _verify(
    node: TxnBrokerServices, tid: str, op: TxnOperation,
    entries: dict[tuple[str, int], bytes | memoryview],
    errors: dict[tuple[str, int], KafkaError],
) -> dict[tuple[str, int], Guard | None]:
    """KIP-890: guards for the partitions whose transactional batch may open a
    transaction, after the coordinator confirmed (or, V2, added) them. Partitions that
    fail move from `entries` to `errors`."""
    producers = {k: p for k, r in entries.items() if (p := _transactional_producer(r))}
    if not producers:
        return {}
    if len({(pid, epoch) for pid, epoch, _ in producers.values()}) > 1:
        for k in producers:  # Kafka's InvalidPidMappingException: one producer per request
            entries.pop(k)
            errors[k] = KafkaError(ErrorCode.invalid_producer_id_mapping,
                                   "Transactional records contained more than one producer ID")
        return {}
    pid, epoch, _ = next(iter(producers.values()))
    # None where not the leader: the append answers it
    guards = await node.replicas.start_verifications(
        pid, epoch, {key: seq for key, (_, _, seq) in producers.items()},
        supports_epoch_bump=op is TxnOperation.ADD_PARTITION)
    wanted = [k for k, g in guards.items() if g is not None]
    if not wanted:
        return guards
    service = node.txn_coordinator
    verifier = None if service is None else service.verifier
    if verifier is None:
        failed = dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
    else:
        failed = await verifier.verify(tid, pid, epoch, wanted, op)
        if op is TxnOperation.ADD_PARTITION:
            # Kafka's ReplicaManager: while the coordinator is still completing the
            # producer's previous transaction, adding is retried here, not by the producer
            loop = asyncio.get_running_loop()
            backoff_s = int(node.config["add.partitions.to.txn.retry.backoff.ms"]) / 1000
            give_up = loop.time() + min(
                int(node.config["add.partitions.to.txn.retry.backoff.max.ms"]),
                int(node.config["request.timeout.ms"])) / 1000
            while loop.time() < give_up:
                busy = [k for k, code in failed.items()
                        if code is ErrorCode.concurrent_transactions]
                if not busy:
                    break
                await asyncio.sleep(backoff_s)
                again = await verifier.verify(tid, pid, epoch, busy, op)
                failed = {k: c for k, c in failed.items() if k not in busy} | again
    for key, code in failed.items():
        entries.pop(key, None)
        guards.pop(key, None)
        errors[key] = produce_error(code)
    return guards


def _unknown_id_key(topic_id: Any, index: int) -> tuple[str, int]:
    return (f"\0{topic_id}", index)  # never a topic's name


async def handle(node: TxnBrokerServices, ctx: RequestContext, request: Any
                 ) -> ResponseChunks | NoResponse | None:
    acks = request.acks
    entries: dict[tuple[str, int], bytes | memoryview] = {}
    errors: dict[tuple[str, int], KafkaError] = {}
    tid = getattr(request, "transactional_id", None)
    version = ctx.api_version
    image = node.metadata
    # v13: topics by id; the name stands in for it from here on ("" when unknown)
    names: list[str] = []
    for topic in request.topic_data:
        if version >= TOPIC_ID_VERSION:
            t = image.topic_by_id(topic.topic_id)
            name = t.name if t is not None else ""
        else:
            name = topic.name
        names.append(name)
    may_write = {n: allowed(node, ctx, Op.WRITE, Res.TOPIC, n) for n in names if n}
    # Kafka refuses the whole request when WRITE on the transactional id is missing
    may_txn = not tid or allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid)
    # what the request's version lets a transaction do (unused without one)
    op = produce_operation(version) if tid else TxnOperation.DEFAULT_ERROR
    v2_refused = (bool(tid) and op is TxnOperation.ADD_PARTITION
                  and not transactions_v2(image))
    for name, topic in zip(names, request.topic_data, strict=True):
        for part in topic.partition_data:
            key = (name, part.index)
            if not name:
                errors[_unknown_id_key(topic.topic_id, part.index)] = KafkaError(
                    ErrorCode.unknown_topic_id, str(topic.topic_id))
            elif acks not in (0, 1, -1):
                errors[key] = KafkaError(ErrorCode.invalid_required_acks, f"acks={acks}")
            elif not may_txn:
                errors[key] = KafkaError(ErrorCode.transactional_id_authorization_failed,
                                         f"WRITE on transactional id {tid}")
            elif not may_write[name]:  # WRITE on the topic, before it is looked up
                errors[key] = KafkaError(ErrorCode.topic_authorization_failed, name)
            elif part.records is None:
                errors[key] = KafkaError(ErrorCode.corrupt_message, "null record set")
            elif tid is None and has_transactional_batch(part.records):
                errors[key] = KafkaError(
                    ErrorCode.transactional_id_authorization_failed,
                    "transactional batches need the request's transactional_id",
                )
            elif image.topic(name) is None:
                errors[key] = KafkaError(ErrorCode.unknown_topic_or_partition, name)
            elif v2_refused:
                errors[key] = KafkaError(
                    ErrorCode.unsupported_version,
                    f"Produce v{version} in a transaction needs transactions V2 "
                    "(finalized transaction.version >= 2)")
            else:
                entries[key] = part.records
    verification: dict[tuple[str, int], Guard | None] | None = None
    verify = False
    if tid and entries:
        verify_enabled = bool(node.config["transaction.partition.verification.enable"])
        verify = verify_enabled or op is TxnOperation.ADD_PARTITION
    conn = ctx.connection_id
    before = _appending.get(conn) if conn else None
    mine: asyncio.Future[None] | None = None
    if conn and (verify or before is not None):
        mine = _appending[conn] = asyncio.get_running_loop().create_future()
    results: dict[tuple[str, int], AppendResult | KafkaError] = dict(errors)
    try:
        if verify and tid:
            guards = await _verify(node, tid, op, entries, errors)
            results.update(errors)
            if verify_enabled:
                verification = guards
        if before is not None:
            await asyncio.shield(before)  # the previous Produce of this connection appended
        if mine is not None:
            # its waiters run only once this task yields, after the appends below were made
            # (replicas.append appends before its first await)
            mine.set_result(None)
        if entries:
            results.update(
                await node.replicas.append(
                    entries, required_acks=acks,
                    timeout_ms=int(request.timeout.total_seconds() * 1000),
                    verification=verification,
                )
            )
    finally:
        if mine is not None:
            if not mine.done():
                mine.set_result(None)
            if _appending.get(conn) is mine:
                del _appending[conn]
    for key, result in results.items():
        if isinstance(result, KafkaError) and result.error_code not in (
            ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
            ErrorCode.topic_authorization_failed,
        ):
            log.info("produce_rejected", topic=key[0], partition=key[1],
                     error=result.error_code.name, reason=result.message, client=ctx.client_id)
    # producer_byte_rate (broker/quotas): the bytes count whether or not they were appended,
    # as Kafka records the request's size; over the quota, the answer carries the throttle
    # time and the server mutes the connection that long after sending it (KIP-219).
    quotas = node.metadata.client_quotas
    throttle_ms = 0
    if quotas:  # with no client quota set (the common case) nothing is counted
        user, client_id = who(ctx)
        throttle_ms = node.quotas.produce.record(
            quotas, user, client_id,
            sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data),
            now_ms())
    if acks == 0:
        return NoResponse(throttle_ms) if throttle_ms else None

    hints = version >= 10
    leaders: list[int] = []
    topics = []
    for name, topic in zip(names, request.topic_data, strict=True):
        partitions = []
        for part in topic.partition_data:
            result = results[(name, part.index) if name
                             else _unknown_id_key(topic.topic_id, part.index)]
            if isinstance(result, KafkaError):
                code = result.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(image, name, part.index)
                leader_and_epoch = (-1, -1)
                if hints and code in LEADER_HINT_ERRORS:
                    leader_and_epoch = current_leader(image, name, part.index)
                    if leader_and_epoch[0] >= 0:
                        leaders.append(leader_and_epoch[0])
                    else:
                        leader_and_epoch = (-1, -1)
                partitions.append(ProducePartition(
                    part.index, code.value, error_message=result.message or None,
                    current_leader=leader_and_epoch))
            else:
                partitions.append(ProducePartition(
                    part.index, 0, result.base_offset, result.log_append_time_ms,
                    result.log_start_offset))
        topics.append(ProduceTopic(name, partitions,
                                   topic.topic_id if version >= TOPIC_ID_VERSION else None))
    endpoints = [
        NodeEndpoint(b, host, port, rack)
        for b, host, port, rack in leader_endpoints(image, ctx.listener_name, leaders)
    ] if leaders else []
    return ResponseChunks.of_bytes(
        encode_produce_response(version, topics, throttle_ms, endpoints), throttle_ms)
