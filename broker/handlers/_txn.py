"""What the transaction handlers share: the coordinator service of the node, and Kafka's
answer to clients too old to know PRODUCER_FENCED (KIP-588: they get INVALID_PRODUCER_EPOCH)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.handlers._context import TxnBroker
from broker.txn.shell import TransactionCoordinatorService, txn_service_of


def service(node: TxnBroker) -> TransactionCoordinatorService:
    """The node's transaction coordinator; raises KafkaError(COORDINATOR_NOT_AVAILABLE)."""
    return txn_service_of(node)


def fenced_for(version: int, first_fenced_version: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED as a request of `version` understands it."""
    if error is ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error
