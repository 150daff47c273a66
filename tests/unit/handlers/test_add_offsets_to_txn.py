"""AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""

from __future__ import annotations

import pytest
from group_node import anyio_backend_fixture, ctx, encodes, request  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import TxnNode, init_txn, tnode_fixture, txn_ready  # noqa: F401

from broker.coordinator.partitioning import partition_for
from broker.group.records import OFFSETS_TOPIC
from broker.handlers import add_offsets_to_txn

pytestmark = pytest.mark.anyio


async def add_offsets(node: TxnNode, version: int, tid: str, pid: int, epoch: int,
                      group: str) -> ErrorCode:
    req = request("add_offsets_to_txn", version, "AddOffsetsToTxnRequest", transactional_id=tid,
                  producer_id=pid, producer_epoch=epoch, group_id=group)
    resp = encodes(await add_offsets_to_txn.handle(node, ctx(25, version), req))
    return resp.error_code  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_adds_the_groups_offsets_partition(tnode: TxnNode, version: int) -> None:
    await txn_ready(tnode, "tx")
    r = await init_txn(tnode, "tx")
    assert await add_offsets(tnode, version, "tx", r.producer_id, r.producer_epoch,
                             "grp") is ErrorCode.none
    _, d = tnode.txn_coordinator.describe("tx")
    assert d is not None and d.partitions == {(OFFSETS_TOPIC, partition_for("grp", 4))}


@pytest.mark.parametrize("version,expected", [(0, ErrorCode.invalid_producer_epoch),
                                              (2, ErrorCode.producer_fenced)])
async def test_fenced(tnode: TxnNode, version: int, expected: ErrorCode) -> None:
    await txn_ready(tnode, "tx")
    r = await init_txn(tnode, "tx")
    await init_txn(tnode, "tx")
    assert await add_offsets(tnode, version, "tx", r.producer_id, r.producer_epoch,
                             "grp") is expected


async def test_not_coordinator_before_the_topic_exists(tnode: TxnNode) -> None:
    assert await add_offsets(tnode, 3, "tx", 1, 0, "grp") is ErrorCode.not_coordinator
