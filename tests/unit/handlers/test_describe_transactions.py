"""DescribeTransactions: state, producer, timeout, start time and partitions per id."""

from __future__ import annotations

import pytest
from group_node import anyio_backend_fixture, ctx, encodes, request  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import TxnNode, init_txn, tnode_fixture, txn_ready  # noqa: F401

from broker.handlers import describe_transactions

pytestmark = pytest.mark.anyio


async def describe(node: TxnNode, *ids: str) -> dict[str, object]:
    req = request("describe_transactions", 0, "DescribeTransactionsRequest",
                  transactional_ids=ids)
    resp = encodes(await describe_transactions.handle(node, ctx(65, 0), req))
    return {s.transactional_id: s for s in resp.transaction_states}


async def test_describes_ongoing_and_unknown(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("a", 2)
    r = await init_txn(tnode, "tx", timeout_ms=30000)
    await tnode.txn_coordinator.add_partitions("tx", r.producer_id, r.producer_epoch,
                                               [("a", 1), ("a", 0)])
    out = await describe(tnode, "tx", "unknown-id")
    s = out["tx"]
    assert s.error_code is ErrorCode.none  # type: ignore[attr-defined]
    assert s.transaction_state == "Ongoing"  # type: ignore[attr-defined]
    assert s.producer_id == r.producer_id and s.producer_epoch == 0  # type: ignore[attr-defined]
    assert s.transaction_timeout.total_seconds() == 30  # type: ignore[attr-defined]
    assert s.transaction_start_time.timestamp() > 0  # type: ignore[attr-defined]
    assert [(t.topic, t.partitions) for t in s.topics] == [("a", (0, 1))]  # type: ignore[attr-defined]
    assert out["unknown-id"].error_code in (  # type: ignore[attr-defined]
        ErrorCode.transactional_id_not_found, ErrorCode.not_coordinator)


async def test_empty_transaction_has_no_start_time(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    await init_txn(tnode, "tx")
    s = (await describe(tnode, "tx"))["tx"]
    assert s.transaction_state == "Empty"  # type: ignore[attr-defined]
    assert round(s.transaction_start_time.timestamp() * 1000) == -1  # type: ignore[attr-defined]


async def test_before_the_topic_exists(tnode: TxnNode) -> None:
    s = (await describe(tnode, "tx"))["tx"]
    assert s.error_code is ErrorCode.not_coordinator  # type: ignore[attr-defined]
