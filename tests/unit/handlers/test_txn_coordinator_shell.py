"""The transaction coordinator's IO shell on real logs (here, beside the handler tests, for
their node helpers): transitions are written to __transaction_state, and a coordinator that
loads the partition (failover, restart) resumes a transaction left in PrepareCommit by
sending its markers again."""

from __future__ import annotations

from pathlib import Path

import pytest
from group_node import anyio_backend_fixture  # noqa: F401
from kio.schema.errors import ErrorCode
from txn_node import TxnNode, init_txn, txn_ready, wait_state

from broker.txn.records import TRANSACTION_STATE_TOPIC, decode_key, decode_value
from broker.txn.shell import TransactionCoordinatorService

pytestmark = pytest.mark.anyio


async def test_reload_resumes_prepare_commit(tmp_path: Path) -> None:
    node = TxnNode(tmp_path)
    await node.start()
    try:
        await txn_ready(node, "tx")
        node.add_topic("a", 1)
        r = await init_txn(node, "tx")
        svc = node.txn_coordinator
        assert await svc.add_partitions("tx", r.producer_id, 0, [("a", 0)]) is ErrorCode.none
        node.leaders.errors = [ErrorCode.not_leader_or_follower] * 1000  # never acknowledged
        assert (await svc.end_txn("tx", r.producer_id, 0, True)).error is ErrorCode.none
        await wait_state(node, "tx", "PrepareCommit")
        await svc.stop()

        # what is in the log, in Kafka's format: Empty, Ongoing, PrepareCommit
        p = svc.partition_of("tx")
        part = node.replicas.get(TRANSACTION_STATE_TOPIC, p)
        assert part is not None
        states = [decode_value(rec.value).state for rec in part.log.read_records(0)
                  if rec.key is not None and decode_key(rec.key) == "tx" and rec.value]
        assert states == [0, 1, 2]

        # a new coordinator on the same logs (as after a restart or a leader change)
        node.leaders.errors = []
        sent_before = len(node.leaders.requests)
        node.txn_coordinator = TransactionCoordinatorService(
            node, node._generate, tick_interval_s=0.02, connect=node.leaders,
            listener_name="PLAINTEXT")
        node.txn_coordinator.start()
        await wait_state(node, "tx", "CompleteCommit")
        [m] = node.leaders.requests[-1][2].markers
        assert len(node.leaders.requests) > sent_before
        assert (m.producer_id, m.producer_epoch, m.transaction_result) == (r.producer_id, 0, True)
    finally:
        await node.stop()


async def test_leadership_loss_unloads_and_answers_not_coordinator(tmp_path: Path) -> None:
    import asyncio

    node = TxnNode(tmp_path)
    await node.start()
    try:
        await txn_ready(node, "tx")
        svc = node.txn_coordinator
        p = svc.partition_of("tx")
        assert p in svc.coordinators
        topic = node.metadata.topic(TRANSACTION_STATE_TOPIC)
        assert topic is not None
        node.add_topic(TRANSACTION_STATE_TOPIC, len(topic.partitions), leader=2, epoch=1)
        for _ in range(200):
            if not svc.coordinators:
                break
            await asyncio.sleep(0.01)
        assert svc.coordinators == {}
        r = await init_txn(node, "tx")
        assert r.error_code is ErrorCode.not_coordinator
        # back to this broker at a newer epoch: loaded again, with that coordinator epoch
        node.add_topic(TRANSACTION_STATE_TOPIC, len(topic.partitions), leader=1, epoch=2)
        await txn_ready(node, "tx")
        assert svc.coordinators[p].coordinator_epoch == 2
    finally:
        await node.stop()
