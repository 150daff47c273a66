"""The leader's side of KIP-890 (broker/txn/verification.py): the operation each request
version allows, the AddPartitionsToTxn it sends, and how the coordinator's answers and
failures become the errors a producer sees (Kafka's AddPartitionsToTxnManager and
ReplicaManager mappings)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.add_partitions_to_txn.v5 import response as resp5
from kio.schema.errors import ErrorCode

from broker.metadata.image import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from broker.txn.records import TRANSACTION_STATE_TOPIC
from broker.txn.verification import (
    TransactionVerifier,
    TxnOperation,
    map_partition_error,
    produce_error,
    produce_operation,
    txn_offset_commit_operation,
)

OP = TxnOperation


def test_operations_by_version() -> None:
    assert [produce_operation(v) for v in (3, 10, 11, 12, 13)] == [
        OP.DEFAULT_ERROR, OP.DEFAULT_ERROR, OP.GENERIC_ERROR, OP.ADD_PARTITION, OP.ADD_PARTITION]
    assert [txn_offset_commit_operation(v) for v in (0, 3, 4, 5)] == [
        OP.DEFAULT_ERROR, OP.DEFAULT_ERROR, OP.GENERIC_ERROR, OP.ADD_PARTITION]
    assert OP.DEFAULT_ERROR.verify_only and OP.GENERIC_ERROR.verify_only
    assert not OP.ADD_PARTITION.verify_only


def test_error_mappings() -> None:
    assert map_partition_error(ErrorCode.producer_fenced, OP.GENERIC_ERROR) is \
        ErrorCode.invalid_producer_epoch
    assert map_partition_error(ErrorCode.transaction_abortable, OP.DEFAULT_ERROR) is \
        ErrorCode.invalid_txn_state
    assert map_partition_error(ErrorCode.transaction_abortable, OP.GENERIC_ERROR) is \
        ErrorCode.transaction_abortable
    e = produce_error(ErrorCode.invalid_txn_state)
    assert (e.error_code, e.message) == (ErrorCode.invalid_txn_state,
                                         "Partition was not added to the transaction")
    for retriable in (ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                      ErrorCode.coordinator_load_in_progress,
                      ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
        e = produce_error(retriable)
        assert e.error_code is ErrorCode.not_enough_replicas
        assert retriable.name.upper() in e.message
    assert produce_error(ErrorCode.invalid_producer_epoch).error_code is \
        ErrorCode.invalid_producer_epoch


def image(leader_fenced: bool = False) -> MetadataImage:
    topic = TopicImage(TRANSACTION_STATE_TOPIC, uuid.uuid4(), {
        i: PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
        for i in range(3)})
    broker = BrokerRegistration(
        broker_id=1, epoch=1, incarnation_id=uuid.uuid4(),
        endpoints=(Endpoint("BROKER", "127.0.0.1", 9093),), fenced=leader_fenced)
    return MetadataImage(cluster_id="c", brokers={1: broker},
                         topics_by_id={topic.topic_id: topic},
                         topics_by_name={topic.name: topic})


@dataclass
class Node:
    metadata: MetadataImage


@dataclass
class Conn:
    answer: Any = None
    sent: list[tuple[int, int, Any]] = field(default_factory=list)

    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
        self.sent.append((api_key, version, request))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    async def close(self) -> None:
        return None


def verifier(img: MetadataImage, conn: Conn,
             dropped: list[tuple[str, int]]) -> TransactionVerifier:
    async def drop(host: str, port: int) -> None:
        dropped.append((host, port))

    return TransactionVerifier(Node(img), "BROKER", lambda h, p: conn, drop)


def answer(tid: str, results: dict[tuple[str, int], ErrorCode],
           top: ErrorCode = ErrorCode.none) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), e in results.items():
        by_topic.setdefault(t, []).append(resp5.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=e))
    return resp5.AddPartitionsToTxnResponse(
        throttle_time=datetime.timedelta(0), error_code=top,
        results_by_transaction=(resp5.AddPartitionsToTxnResult(
            transactional_id=tid, topic_results=tuple(
                resp5.AddPartitionsToTxnTopicResult(name=t, results_by_partition=tuple(rs))
                for t, rs in by_topic.items())),))


def test_verify_sends_one_request_and_maps_the_answer() -> None:
    conn = Conn(answer("tx", {("t", 0): ErrorCode.none,
                              ("t", 1): ErrorCode.transaction_abortable,
                              ("u", 0): ErrorCode.producer_fenced}))
    dropped: list[tuple[str, int]] = []
    v = verifier(image(), conn, dropped)
    out = asyncio.run(v.verify("tx", 7, 3, [("t", 1), ("t", 0), ("u", 0)], OP.DEFAULT_ERROR))
    assert out == {("t", 1): ErrorCode.invalid_txn_state,
                   ("u", 0): ErrorCode.invalid_producer_epoch}
    [(key, version, req)] = conn.sent
    assert (key, version) == (24, 5)
    [txn] = req.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == (
        "tx", 7, 3, True)
    assert {(t.name, tuple(t.partitions)) for t in txn.topics} == {("t", (0, 1)), ("u", (0,))}
    # V2: the same request without verify_only; a partition left out of the answer is an
    # error, not a success
    conn = Conn(answer("tx", {("t", 0): ErrorCode.none}))
    out = asyncio.run(verifier(image(), conn, dropped).verify(
        "tx", 7, 3, [("t", 0), ("t", 1)], OP.ADD_PARTITION))
    assert out == {("t", 1): ErrorCode.unknown_server_error}
    assert not conn.sent[0][2].transactions[0].verify_only


def test_verify_failures() -> None:
    dropped: list[tuple[str, int]] = []
    parts = [("t", 0)]
    # no coordinator: the topic is missing or its leader fenced
    empty = MetadataImage(cluster_id="c")
    assert asyncio.run(verifier(empty, Conn(), dropped).verify(
        "tx", 1, 0, parts, OP.DEFAULT_ERROR)) == {("t", 0): ErrorCode.coordinator_not_available}
    assert asyncio.run(verifier(image(leader_fenced=True), Conn(), dropped).verify(
        "tx", 1, 0, parts, OP.DEFAULT_ERROR)) == {("t", 0): ErrorCode.coordinator_not_available}
    # the connection failed: NETWORK_EXCEPTION, and the connection is dropped
    out = asyncio.run(verifier(image(), Conn(ConnectionError("reset")), dropped).verify(
        "tx", 1, 0, parts, OP.DEFAULT_ERROR))
    assert out == {("t", 0): ErrorCode.network_exception}
    assert dropped == [("127.0.0.1", 9093)]
    # the coordinator refused the leader (CLUSTER_ACTION): the client sees INVALID_TXN_STATE
    conn = Conn(answer("tx", {}, top=ErrorCode.cluster_authorization_failed))
    assert asyncio.run(verifier(image(), conn, dropped).verify(
        "tx", 1, 0, parts, OP.DEFAULT_ERROR)) == {("t", 0): ErrorCode.invalid_txn_state}
    # nothing to verify: no request
    conn = Conn()
    assert asyncio.run(verifier(image(), conn, dropped).verify(
        "tx", 1, 0, [], OP.DEFAULT_ERROR)) == {}
    assert conn.sent == []
