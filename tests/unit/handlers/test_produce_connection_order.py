"""Produce keeps a connection's order across the KIP-890 verification wait, and a
transactions V2 leader retries CONCURRENT_TRANSACTIONS itself, as Kafka's does.

Kafka serves one request of a connection at a time, so a producer's pipelined Produce
requests are appended in the order it sent them. Skiff runs a connection's handlers
concurrently and a Produce appends before its first await, which keeps that order, except
when a request must first verify a partition with the transaction coordinator: a later
request on the same connection, with nothing to verify, appended first. Kafka Streams
(exactly_once_v2) met it: request 1 held sequences 17..25 of an ongoing partition plus a
partition new to the transaction, request 2 held sequence 26 of the same ongoing
partition; 26 was refused as out of order ("does not follow 16"), then 17..25 was
appended, and the Java producer, which now had 25 acknowledged, took the refusal of 26
as fatal (OutOfOrderSequenceException) and the Streams task was migrated.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from group_node import anyio_backend_fixture  # noqa: F401
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from txn_node import (  # noqa: F401
    TxnNode,
    init_txn,
    set_transaction_version,
    tnode_fixture,
    txn_ready,
)

from broker.handlers import produce
from broker.protocol.api import BROKER_APIS, response_schema
from broker.protocol.kio_build import build
from broker.quotas.core import Quotas
from broker.server.context import RequestContext
from tests.unit.handlers.datapath import schema_module, txn_records

pytestmark = pytest.mark.anyio
VERSION = 9
TOPIC = "ordered"


def on_connection(connection_id: str) -> RequestContext:
    return RequestContext(api_key=0, api_version=VERSION, correlation_id=1, client_id="p",
                          listener_name="PLAINTEXT", peer_host="127.0.0.1", peer_port=5555,
                          received_ms=0, apis=BROKER_APIS, connection_id=connection_id)


def produce_request(batches: dict[int, bytes]) -> Any:
    m = schema_module("produce", VERSION)
    return build(m.ProduceRequest, transactional_id="tx", acks=-1,
                 timeout=datetime.timedelta(seconds=5),
                 topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=tuple(
                     build(m.PartitionProduceData, index=p, records=data)
                     for p, data in batches.items())),))


async def answer(node: TxnNode, ctx: RequestContext, request: Any) -> dict[int, ErrorCode]:
    if not hasattr(node, "quotas"):
        node.quotas = Quotas()  # type: ignore[attr-defined]  # Produce records its bytes
    chunks = await produce.handle(node, ctx, request)
    assert chunks is not None
    body = chunks.to_bytes()
    decoded, _ = entity_reader(response_schema(0, VERSION))(body, 0)
    return {p.index: p.error_code for t in decoded.responses for p in t.partition_responses}


def slow_verifier(node: TxnNode) -> None:
    """The coordinator's answer to a leader's verification takes a network round trip
    (here it is this node's own handler, which answers without yielding)."""
    verifier = node.txn_coordinator.verifier
    verify = verifier.verify

    async def later(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.05)
        return await verify(*args, **kwargs)

    verifier.verify = later  # type: ignore[method-assign]


async def test_a_later_request_does_not_append_ahead_of_one_being_verified(
        tnode: TxnNode) -> None:
    slow_verifier(tnode)
    await txn_ready(tnode, "tx")
    tnode.add_topic(TOPIC, 2)
    r = await init_txn(tnode, "tx")
    pid, epoch = r.producer_id, r.producer_epoch
    await tnode.txn_coordinator.add_partitions("tx", pid, epoch, [(TOPIC, 0), (TOPIC, 1)])
    ctx = on_connection("conn-1")
    # partition 0's transaction is open on the leader (its first write was verified)
    assert await answer(tnode, ctx, produce_request(
        {0: txn_records(pid, epoch, 0, b"a")})) == {0: ErrorCode.none}
    # pipelined on the same connection: 1 must verify partition 1 first, 2 need not
    first = asyncio.create_task(answer(tnode, ctx, produce_request(
        {0: txn_records(pid, epoch, 1, b"b"), 1: txn_records(pid, epoch, 0, b"x")})))
    second = asyncio.create_task(answer(tnode, ctx, produce_request(
        {0: txn_records(pid, epoch, 2, b"c")})))
    assert await first == {0: ErrorCode.none, 1: ErrorCode.none}
    assert await second == {0: ErrorCode.none}
    log = tnode.replicas.get(TOPIC, 0).log
    assert log.log_end_offset == 3


async def test_other_connections_do_not_wait(tnode: TxnNode) -> None:
    """The order kept is per connection: another connection's request (here, another
    producer's) appends while the first connection's waits on its verification."""
    slow_verifier(tnode)
    await txn_ready(tnode, "tx")
    await txn_ready(tnode, "other")
    tnode.add_topic(TOPIC, 2)
    r = await init_txn(tnode, "tx")
    pid, epoch = r.producer_id, r.producer_epoch
    await tnode.txn_coordinator.add_partitions("tx", pid, epoch, [(TOPIC, 1)])
    o = await init_txn(tnode, "other")
    await tnode.txn_coordinator.add_partitions("other", o.producer_id, o.producer_epoch,
                                               [(TOPIC, 0)])
    m = schema_module("produce", VERSION)
    other_first = build(m.ProduceRequest, transactional_id="other", acks=-1,
                        timeout=datetime.timedelta(seconds=5),
                        topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=(
                            build(m.PartitionProduceData, index=0, records=txn_records(
                                o.producer_id, o.producer_epoch, 0, b"o")),)),))
    assert await answer(tnode, on_connection("conn-2"), other_first) == {0: ErrorCode.none}
    waiting = asyncio.create_task(answer(tnode, on_connection("conn-1"), produce_request(
        {1: txn_records(pid, epoch, 0, b"x")})))
    await asyncio.sleep(0)
    other_next = build(m.ProduceRequest, transactional_id="other", acks=-1,
                       timeout=datetime.timedelta(seconds=5),
                       topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=(
                           build(m.PartitionProduceData, index=0, records=txn_records(
                               o.producer_id, o.producer_epoch, 1, b"p")),)),))
    assert await answer(tnode, on_connection("conn-2"), other_next) == {0: ErrorCode.none}
    assert not waiting.done()
    assert await waiting == {1: ErrorCode.none}


def busy_coordinator(node: TxnNode, times: int) -> list[list[tuple[str, int]]]:
    """The coordinator answers CONCURRENT_TRANSACTIONS to the first `times` verifications
    (it is still writing the previous transaction's markers); returns the partitions asked
    for at each call."""
    verifier = node.txn_coordinator.verifier
    verify = verifier.verify
    calls: list[list[tuple[str, int]]] = []

    async def busy(tid: str, pid: int, epoch: int, parts: Any, op: Any) -> Any:
        parts = sorted(parts)
        calls.append(parts)
        if len(calls) <= times:
            return dict.fromkeys(parts, ErrorCode.concurrent_transactions)
        return await verify(tid, pid, epoch, parts, op)

    verifier.verify = busy  # type: ignore[method-assign]
    return calls


def v12_request(pid: int, epoch: int) -> Any:
    m = schema_module("produce", 12)
    return build(m.ProduceRequest, transactional_id="tx", acks=-1,
                 timeout=datetime.timedelta(seconds=5),
                 topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=(
                     build(m.PartitionProduceData, index=0,
                           records=txn_records(pid, epoch, 0, b"a")),)),))


async def answer_v12(node: TxnNode, request: Any) -> Any:
    if not hasattr(node, "quotas"):
        node.quotas = Quotas()  # type: ignore[attr-defined]
    ctx = RequestContext(api_key=0, api_version=12, correlation_id=1, client_id="p",
                         listener_name="PLAINTEXT", peer_host="127.0.0.1", peer_port=5555,
                         received_ms=0, apis=BROKER_APIS, connection_id="c")
    chunks = await produce.handle(node, ctx, request)
    assert chunks is not None
    body = chunks.to_bytes()
    decoded, _ = entity_reader(response_schema(0, 12))(body, 0)
    return decoded.responses[0].partition_responses[0]


async def test_transactions_v2_add_retries_concurrent_transactions_on_the_leader(
        tnode: TxnNode) -> None:
    """Kafka's leader retries the add (transactions V2) while the coordinator answers
    CONCURRENT_TRANSACTIONS, every add.partitions.to.txn.retry.backoff.ms for up to
    add.partitions.to.txn.retry.backoff.max.ms; the producer does not see it."""
    set_transaction_version(tnode, 2)
    await txn_ready(tnode, "tx")
    tnode.add_topic(TOPIC, 1)
    r = await init_txn(tnode, "tx", version=5)
    calls = busy_coordinator(tnode, 2)
    part = await answer_v12(tnode, v12_request(r.producer_id, r.producer_epoch))
    assert part.error_code is ErrorCode.none, part
    assert calls == [[(TOPIC, 0)]] * 3


async def test_transactions_v2_add_gives_up_after_the_max(tnode: TxnNode) -> None:
    set_transaction_version(tnode, 2)
    tnode.config["add.partitions.to.txn.retry.backoff.max.ms"] = 50
    await txn_ready(tnode, "tx")
    tnode.add_topic(TOPIC, 1)
    r = await init_txn(tnode, "tx", version=5)
    calls = busy_coordinator(tnode, 1000)
    part = await answer_v12(tnode, v12_request(r.producer_id, r.producer_epoch))
    assert part.error_code is ErrorCode.not_enough_replicas
    assert "CONCURRENT_TRANSACTIONS" in (part.error_message or "")
    assert 2 <= len(calls) <= 5  # 20 ms apart for 50 ms
