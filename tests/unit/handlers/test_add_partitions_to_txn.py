"""AddPartitionsToTxn: v0-v3 (one transaction) and v4 (batched, verify_only)."""

from __future__ import annotations

import pytest
from group_node import anyio_backend_fixture, ctx, encodes, request  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import (  # noqa: F401
    TxnNode,
    init_txn,
    set_transaction_version,
    tnode_fixture,
    txn_ready,
)

from broker.handlers import add_partitions_to_txn

pytestmark = pytest.mark.anyio


async def add(node: TxnNode, version: int, tid: str, pid: int, epoch: int,
              parts: dict[str, list[int]]) -> dict[tuple[str, int], ErrorCode]:
    mod = f"kio.schema.add_partitions_to_txn.v{version}.request"
    import importlib

    m = importlib.import_module(mod)
    topics = tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                   for t, ps in parts.items())
    req = m.AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid,
                                      v3_and_below_producer_id=pid,
                                      v3_and_below_producer_epoch=epoch,
                                      v3_and_below_topics=topics)
    resp = encodes(await add_partitions_to_txn.handle(node, ctx(24, version), req))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_adds_partitions_at_every_client_version(tnode: TxnNode, version: int) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 3)
    r = await init_txn(tnode, "tx")
    out = await add(tnode, version, "tx", r.producer_id, r.producer_epoch, {"data": [0, 2]})
    assert out == {("data", 0): ErrorCode.none, ("data", 2): ErrorCode.none}
    _, d = tnode.txn_coordinator.describe("tx")
    assert d is not None and d.state.kafka_name == "Ongoing"
    assert d.partitions == {("data", 0), ("data", 2)}


@pytest.mark.parametrize("version,expected", [(1, ErrorCode.invalid_producer_epoch),
                                              (2, ErrorCode.producer_fenced)])
async def test_stale_epoch(tnode: TxnNode, version: int, expected: ErrorCode) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 1)
    r = await init_txn(tnode, "tx")
    await init_txn(tnode, "tx")
    out = await add(tnode, version, "tx", r.producer_id, r.producer_epoch, {"data": [0]})
    assert out == {("data", 0): expected}


async def test_unknown_partitions_and_ids(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 1)
    r = await init_txn(tnode, "tx")
    out = await add(tnode, 3, "tx", r.producer_id, r.producer_epoch,
                    {"data": [0, 5], "nope": [0]})
    assert out == {("data", 0): ErrorCode.operation_not_attempted,
                   ("data", 5): ErrorCode.unknown_topic_or_partition,
                   ("nope", 0): ErrorCode.unknown_topic_or_partition}
    out = await add(tnode, 3, "tx", r.producer_id + 7, r.producer_epoch, {"data": [0]})
    assert out == {("data", 0): ErrorCode.invalid_producer_id_mapping}


async def test_v4_batched_add_and_verify_only(tnode: TxnNode) -> None:
    from kio.schema.add_partitions_to_txn.v4 import request as m

    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 2)
    r = await init_txn(tnode, "tx")

    def txn(verify: bool, parts: list[int]) -> object:
        return m.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
            verify_only=verify, topics=(m.AddPartitionsToTxnTopic(name="data",
                                                                  partitions=tuple(parts)),))

    async def send(*txns: object) -> list[dict[tuple[str, int], ErrorCode]]:
        req = m.AddPartitionsToTxnRequest(transactions=tuple(txns))  # type: ignore[arg-type]
        resp = encodes(await add_partitions_to_txn.handle(tnode, ctx(24, 4), req))
        assert resp.error_code is ErrorCode.none
        return [{(t.name, p.partition_index): p.partition_error_code
                 for t in res.topic_results for p in t.results_by_partition}
                for res in resp.results_by_transaction]

    [before] = await send(txn(True, [0]))
    assert before == {("data", 0): ErrorCode.invalid_txn_state}
    [added] = await send(txn(False, [0]))
    assert added == {("data", 0): ErrorCode.none}
    [checked] = await send(txn(True, [0, 1]))
    assert checked == {("data", 0): ErrorCode.none, ("data", 1): ErrorCode.invalid_txn_state}


async def test_v5_answers_transaction_abortable_and_gates_adding_on_transactions_v2(
        tnode: TxnNode) -> None:
    """v5 carries TRANSACTION_ABORTABLE for a partition outside the transaction (v4 says
    INVALID_TXN_STATE, above); a v5 add (a leader adding a V2 producer's partition) needs
    the finalized transaction.version >= 2; this node's image is held at 1 (a new
    cluster's image has 2)."""
    from kio.schema.add_partitions_to_txn.v5 import request as m

    from broker.txn.version import transaction_version

    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 2)
    r = await init_txn(tnode, "tx")
    set_transaction_version(tnode, 1)
    assert transaction_version(tnode.metadata) < 2

    async def send(verify: bool, parts: list[int]) -> dict[tuple[str, int], ErrorCode]:
        req = m.AddPartitionsToTxnRequest(transactions=(m.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
            verify_only=verify, topics=(m.AddPartitionsToTxnTopic(
                name="data", partitions=tuple(parts)),)),))
        resp = encodes(await add_partitions_to_txn.handle(tnode, ctx(24, 5), req))
        [res] = resp.results_by_transaction
        return {(t.name, p.partition_index): p.partition_error_code
                for t in res.topic_results for p in t.results_by_partition}

    assert await send(True, [0]) == {("data", 0): ErrorCode.transaction_abortable}
    assert await send(False, [0]) == {("data", 0): ErrorCode.unsupported_version}
    _, d = tnode.txn_coordinator.describe("tx")
    assert d is not None and d.state.kafka_name == "Empty"
