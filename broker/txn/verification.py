"""KIP-890 on the partition leader's side: before the first append of a producer's
transaction on a partition, ask the transaction coordinator whether the partition is in
that transaction (Kafka's AddPartitionsToTxnManager).

The leader sends AddPartitionsToTxn v5, the batched broker form (CLUSTER_ACTION), to the
leader of the transactional id's `__transaction_state` partition over the inter-broker
listener: `verify_only=true` for producers of transactions V1 (Produce v3-v11), which
added the partition themselves, or `verify_only=false` for transactions V2 (Produce v12+,
TxnOffsetCommit v5+), where the first produce adds the partition (the coordinator then
adds it as AddPartitionsToTxn would). The answer is mapped to what a producer of that
request version understands, as Kafka's manager and ReplicaManager map it:

    coordinator unknown / no leader     COORDINATOR_NOT_AVAILABLE
    connection failed or timed out      NETWORK_EXCEPTION
    CLUSTER_AUTHORIZATION_FAILED        INVALID_TXN_STATE (the client must not see it)
    PRODUCER_FENCED                     INVALID_PRODUCER_EPOCH
    TRANSACTION_ABORTABLE               INVALID_TXN_STATE unless the request may carry it
                                        (Produce v11+, TxnOffsetCommit v4+)
    UNSUPPORTED_VERSION (the whole      verification skipped, as Kafka does with a
    request)                            coordinator too old to verify

and then, for the produce answer (`produce_error`): INVALID_TXN_STATE with "Partition was
not added to the transaction"; CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR become
NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh.

Kafka also merges the verifications of many producers bound for one coordinator into one
request; here each produce request sends its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from broker.coordinator.partitioning import partition_for
from broker.errors import KafkaError
from broker.txn.records import TRANSACTION_STATE_TOPIC, TopicPartition

if TYPE_CHECKING:
    from broker.metadata.image import MetadataImage

log = structlog.get_logger(__name__)

ADD_PARTITIONS_TO_TXN = 24
BROKER_VERSION = 5
REQUEST_TIMEOUT_S = 30.0


class TxnOperation(enum.Enum):
    """What a client's request version lets the leader do (Kafka's
    TransactionSupportedOperation)."""

    DEFAULT_ERROR = "defaultError"  # verify; TRANSACTION_ABORTABLE is not understood
    GENERIC_ERROR = "genericErrorSupported"  # verify; TRANSACTION_ABORTABLE may be answered
    ADD_PARTITION = "addPartition"  # transactions V2: the produce adds the partition

    @property
    def verify_only(self) -> bool:
        return self is not TxnOperation.ADD_PARTITION

    @property
    def abortable_ok(self) -> bool:
        return self is not TxnOperation.DEFAULT_ERROR


def produce_operation(version: int) -> TxnOperation:
    """Produce v11 may answer TRANSACTION_ABORTABLE; v12+ is transactions V2."""
    if version >= 12:
        return TxnOperation.ADD_PARTITION
    if version >= 11:
        return TxnOperation.GENERIC_ERROR
    return TxnOperation.DEFAULT_ERROR


def txn_offset_commit_operation(version: int) -> TxnOperation:
    """TxnOffsetCommit v4 may answer TRANSACTION_ABORTABLE; v5+ is transactions V2."""
    if version >= 5:
        return TxnOperation.ADD_PARTITION
    if version >= 4:
        return TxnOperation.GENERIC_ERROR
    return TxnOperation.DEFAULT_ERROR


_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
})


def produce_error(error: ErrorCode) -> KafkaError:
    """A verification failure as the produce answer carries it (Kafka's ReplicaManager)."""
    if error is ErrorCode.invalid_txn_state:
        return KafkaError(error, "Partition was not added to the transaction")
    if error in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return KafkaError(ErrorCode.not_enough_replicas,
                          "Unable to verify the partition has been added to the transaction. "
                          f"Underlying error: {error.name.upper()}")
    return KafkaError(error, "transaction verification failed")


def map_partition_error(error: ErrorCode, op: TxnOperation) -> ErrorCode:
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error is ErrorCode.transaction_abortable and not op.abortable_ok:
        return ErrorCode.invalid_txn_state
    return error


class Connection(Protocol):
    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any: ...

    async def close(self) -> None: ...


class MetadataSource(Protocol):
    """Where the verifier finds the transaction coordinators: the node's metadata image."""

    @property
    def metadata(self) -> MetadataImage: ...


class TransactionVerifier:
    """Sends the verifications of this leader. `connection(host, port)` gives a pooled
    inter-broker connection, `drop(host, port)` forgets a broken one."""

    def __init__(self, node: MetadataSource, listener_name: str,
                 connection: Callable[[str, int], Connection],
                 drop: Callable[[str, int], Any]) -> None:
        self.node = node
        self.listener_name = listener_name
        self.connection = connection
        self.drop = drop

    def coordinator_address(self, transactional_id: str) -> tuple[str, int] | None:
        image = self.node.metadata
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or topic.num_partitions <= 0:
            return None
        p = partition_for(transactional_id, int(topic.num_partitions))
        leader = image.leader_of(TRANSACTION_STATE_TOPIC, p)
        broker = image.broker(leader) if leader >= 0 else None
        if broker is None or broker.fenced:
            return None
        ep = broker.endpoint(self.listener_name)
        return None if ep is None else (ep.host, ep.port)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition], op: TxnOperation,
                     ) -> dict[TopicPartition, ErrorCode]:
        """The partitions that could not be verified (or added), with their error; an
        empty answer means all of them are in the transaction."""
        from kio.schema.add_partitions_to_txn.v5 import request as req

        parts = sorted(set(partitions))
        if not parts:
            return {}
        addr = self.coordinator_address(transactional_id)
        if addr is None:
            return dict.fromkeys(parts, ErrorCode.coordinator_not_available)
        topics: dict[str, list[int]] = {}
        for t, i in parts:
            topics.setdefault(t, []).append(i)
        request = req.AddPartitionsToTxnRequest(transactions=(req.AddPartitionsToTxnTransaction(
            transactional_id=TransactionalId(transactional_id),
            producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
            verify_only=op.verify_only,
            topics=tuple(req.AddPartitionsToTxnTopic(
                name=TopicName(t), partitions=tuple(i32(i) for i in ps))
                for t, ps in topics.items())),))
        try:
            response = await self.connection(*addr).request(
                ADD_PARTITIONS_TO_TXN, BROKER_VERSION, request, REQUEST_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:
            if exc.error_code is ErrorCode.unsupported_version:
                log.warning("txn_verification_unsupported", coordinator=f"{addr[0]}:{addr[1]}")
                return {}
            return dict.fromkeys(parts, ErrorCode.network_exception)
        except Exception as exc:
            log.info("txn_verification_send_failed", coordinator=f"{addr[0]}:{addr[1]}",
                     error=repr(exc))
            with contextlib.suppress(Exception):
                await self.drop(*addr)
            return dict.fromkeys(parts, ErrorCode.network_exception)
        top = response.error_code
        if top is not ErrorCode.none:
            if top is ErrorCode.cluster_authorization_failed:
                top = ErrorCode.invalid_txn_state
            return dict.fromkeys(parts, top)
        out: dict[TopicPartition, ErrorCode] = {}
        seen: set[TopicPartition] = set()
        for result in response.results_by_transaction:
            if str(result.transactional_id) != transactional_id:
                continue
            for tr in result.topic_results:
                for pr in tr.results_by_partition:
                    tp = (str(tr.name), int(pr.partition_index))
                    seen.add(tp)
                    if pr.partition_error_code is not ErrorCode.none:
                        out[tp] = map_partition_error(pr.partition_error_code, op)
        for tp in parts:
            if tp not in seen:
                out[tp] = ErrorCode.unknown_server_error
        return out
