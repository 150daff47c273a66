"""ListTransactions: filters by state name, producer id, (v1) ongoing duration and (v2) a
transactional id pattern."""

from __future__ import annotations

import asyncio

import pytest
from group_node import anyio_backend_fixture, ctx, encodes, request  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import TxnNode, init_txn, tnode_fixture, txn_ready  # noqa: F401

from broker.handlers import list_transactions

pytestmark = pytest.mark.anyio


async def listing(node: TxnNode, version: int = 1,
                  **kw: object) -> tuple[object, dict[str, tuple[int, str]]]:
    req = request("list_transactions", version, "ListTransactionsRequest", **kw)
    resp = encodes(await list_transactions.handle(node, ctx(66, version), req))
    return resp, {s.transactional_id: (s.producer_id, s.transaction_state)
                  for s in resp.transaction_states}


async def test_filters(tnode: TxnNode) -> None:
    for tid in ("a", "b", "c"):
        await txn_ready(tnode, tid)
    tnode.add_topic("t", 1)
    ra = await init_txn(tnode, "a")
    rb = await init_txn(tnode, "b")
    await init_txn(tnode, "c")
    await tnode.txn_coordinator.add_partitions("a", ra.producer_id, 0, [("t", 0)])
    resp, all_ = await listing(tnode)
    assert resp.error_code is ErrorCode.none  # type: ignore[attr-defined]
    assert all_ == {"a": (ra.producer_id, "Ongoing"), "b": (rb.producer_id, "Empty"),
                    "c": (rb.producer_id + 1, "Empty")}
    _, ongoing = await listing(tnode, state_filters=("Ongoing",))
    assert list(ongoing) == ["a"]
    _, by_pid = await listing(tnode, producer_id_filters=(rb.producer_id,))
    assert list(by_pid) == ["b"]
    resp, none = await listing(tnode, state_filters=("Bogus",))
    assert none == {} and resp.unknown_state_filters == ("Bogus",)  # type: ignore[attr-defined]
    await asyncio.sleep(0.05)
    _, long_running = await listing(tnode, duration_filter=20)
    assert list(long_running) == ["a"]
    _, not_yet = await listing(tnode, duration_filter=3_600_000)
    assert not_yet == {}


async def test_v0_without_coordinator_partitions(tnode: TxnNode) -> None:
    resp, out = await listing(tnode, version=0)
    assert resp.error_code is ErrorCode.none and out == {}  # type: ignore[attr-defined]


async def test_v2_filters_by_a_transactional_id_pattern(tnode: TxnNode) -> None:
    """KIP-1152: the whole id must match the expression; null or empty lists every id; an
    expression that does not compile is INVALID_REGULAR_EXPRESSION."""
    for tid in ("orders-1", "orders-2", "payments-1"):
        await txn_ready(tnode, tid)
        await init_txn(tnode, tid)
    _, orders = await listing(tnode, version=2, transactional_id_pattern="orders-.*")
    assert sorted(orders) == ["orders-1", "orders-2"]
    _, partial = await listing(tnode, version=2, transactional_id_pattern="orders")
    assert partial == {}  # a match of the whole id, not a search
    for everything in (None, ""):
        _, all_ = await listing(tnode, version=2, transactional_id_pattern=everything)
        assert sorted(all_) == ["orders-1", "orders-2", "payments-1"]
    resp, bad = await listing(tnode, version=2, transactional_id_pattern="orders-(")
    assert resp.error_code is ErrorCode.invalid_regular_expression  # type: ignore[attr-defined]
    assert bad == {}
