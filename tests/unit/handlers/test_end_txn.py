"""EndTxn: commit and abort through PrepareX, markers to the leaders, CompleteX."""

from __future__ import annotations

from typing import Any

import pytest
from group_node import anyio_backend_fixture, ctx, encodes, request  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import (  # noqa: F401
    TxnNode,
    init_txn,
    set_transaction_version,
    tnode_fixture,
    txn_ready,
    wait_state,
)

from broker.handlers import end_txn

pytestmark = pytest.mark.anyio


async def end(node: TxnNode, version: int, tid: str, pid: int, epoch: int,
              committed: bool) -> ErrorCode:
    req = request("end_txn", version, "EndTxnRequest", transactional_id=tid, producer_id=pid,
                  producer_epoch=epoch, committed=committed)
    resp = encodes(await end_txn.handle(node, ctx(26, version), req))
    return resp.error_code  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("committed", [True, False])
async def test_end_sends_markers_to_every_partition(tnode: TxnNode, version: int,
                                                    committed: bool) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("a", 2)
    tnode.add_topic("b", 1)
    r = await init_txn(tnode, "tx")
    svc = tnode.txn_coordinator
    assert await svc.add_partitions("tx", r.producer_id, r.producer_epoch,
                                    [("a", 0), ("a", 1), ("b", 0)]) is ErrorCode.none
    assert await end(tnode, version, "tx", r.producer_id, r.producer_epoch,
                     committed) is ErrorCode.none
    await wait_state(tnode, "tx", "CompleteCommit" if committed else "CompleteAbort")
    [(host, port, req)] = tnode.leaders.requests
    assert (host, port) == ("127.0.0.1", 9092)
    [m] = req.markers
    assert m.transaction_result is committed and m.producer_id == r.producer_id
    assert {(t.name, p) for t in m.topics for p in t.partition_indexes} == {
        ("a", 0), ("a", 1), ("b", 0)}
    assert m.coordinator_epoch == 0
    # a retry of the same EndTxn is fine, the other result is not
    assert await end(tnode, version, "tx", r.producer_id, r.producer_epoch,
                     committed) is ErrorCode.none
    assert await end(tnode, version, "tx", r.producer_id, r.producer_epoch,
                     not committed) is ErrorCode.invalid_txn_state


async def test_markers_are_retried_until_acknowledged(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("a", 1)
    r = await init_txn(tnode, "tx")
    await tnode.txn_coordinator.add_partitions("tx", r.producer_id, r.producer_epoch, [("a", 0)])
    tnode.leaders.errors = [ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas]
    assert await end(tnode, 3, "tx", r.producer_id, r.producer_epoch, True) is ErrorCode.none
    assert (await init_txn(tnode, "tx")).error_code is ErrorCode.concurrent_transactions
    await wait_state(tnode, "tx", "CompleteCommit")
    assert len(tnode.leaders.requests) == 3


@pytest.mark.parametrize("version,expected", [(1, ErrorCode.invalid_producer_epoch),
                                              (2, ErrorCode.producer_fenced)])
async def test_zombie_is_fenced(tnode: TxnNode, version: int, expected: ErrorCode) -> None:
    await txn_ready(tnode, "tx")
    r = await init_txn(tnode, "tx")
    await init_txn(tnode, "tx")
    assert await end(tnode, version, "tx", r.producer_id, r.producer_epoch, True) is expected


async def test_end_without_a_transaction(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    r = await init_txn(tnode, "tx")
    assert await end(tnode, 3, "tx", r.producer_id, r.producer_epoch,
                     True) is ErrorCode.invalid_txn_state
    assert await end(tnode, 3, "nope", 5, 0, True) in (ErrorCode.invalid_producer_id_mapping,
                                                       ErrorCode.not_coordinator)


async def end_v5(node: TxnNode, tid: str, pid: int, epoch: int, committed: bool) -> Any:
    req = request("end_txn", 5, "EndTxnRequest", transactional_id=tid, producer_id=pid,
                  producer_epoch=epoch, committed=committed)
    return encodes(await end_txn.handle(node, ctx(26, 5), req))


async def test_v5_bumps_the_epoch_and_returns_it(tnode: TxnNode) -> None:
    """Transactions V2: the epoch goes up at every end, the markers carry the new one, the
    answer names it; a retry with the old epoch gets the same answer; v4 and below keep
    the epoch. Refused while transaction.version < 2."""
    await txn_ready(tnode, "tx")
    tnode.add_topic("a", 1)
    r = await init_txn(tnode, "tx", version=5)
    pid, epoch = r.producer_id, r.producer_epoch
    svc = tnode.txn_coordinator
    set_transaction_version(tnode, 1)
    refused = await end_v5(tnode, "tx", pid, epoch, True)
    assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
        ErrorCode.unsupported_version, -1, -1)
    set_transaction_version(tnode, 2)
    assert await svc.add_partitions("tx", pid, epoch, [("a", 0)], tv2=True) is ErrorCode.none
    resp = await end_v5(tnode, "tx", pid, epoch, True)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
        ErrorCode.none, pid, epoch + 1)
    await wait_state(tnode, "tx", "CompleteCommit")
    [(_, _, req)] = tnode.leaders.requests
    [m] = req.markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result) == (pid, epoch + 1, True)
    retry = await end_v5(tnode, "tx", pid, epoch, True)
    assert (retry.error_code, retry.producer_epoch) == (ErrorCode.none, epoch + 1)
    # the next transaction, at the new epoch, aborted
    assert await svc.add_partitions("tx", pid, epoch + 1, [("a", 0)], tv2=True) is \
        ErrorCode.none
    resp = await end_v5(tnode, "tx", pid, epoch + 1, False)
    assert (resp.error_code, resp.producer_epoch) == (ErrorCode.none, epoch + 2)
    await wait_state(tnode, "tx", "CompleteAbort")
    stale = await end_v5(tnode, "tx", pid, epoch, False)
    assert stale.error_code is ErrorCode.producer_fenced
