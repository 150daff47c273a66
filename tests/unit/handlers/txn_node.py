"""A node for the transaction handler tests: group_node's GroupNode (real publisher, logs,
replica manager, group coordinator) with a real TransactionCoordinatorService whose markers
go to `FakeLeaders` (it records each WriteTxnMarkers and answers as a leader that appended
the markers; a marker for __consumer_offsets calls the group coordinator's hook, as the
WriteTxnMarkers handler does); a leader's KIP-890 AddPartitionsToTxn goes to this node's
own handler, as this node leads every __transaction_state partition."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from group_node import CONFIG, GroupNode, ctx, encodes, request
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1 import response as markers_v1

from broker.group.shell import on_txn_marker_written
from broker.handlers import add_partitions_to_txn, find_coordinator, init_producer_id
from broker.txn.records import TRANSACTION_STATE_TOPIC
from broker.txn.shell import TransactionCoordinatorService

TXN_CONFIG: dict[str, Any] = {
    **CONFIG,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.segment.bytes": 1 << 20,
    "transaction.max.timeout.ms": 900000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
    "transaction.partition.verification.enable": True,
    "add.partitions.to.txn.retry.backoff.ms": 20,
    "add.partitions.to.txn.retry.backoff.max.ms": 100,
    "request.timeout.ms": 30000,
}


class FakeLeaders:
    def __init__(self, node: TxnNode) -> None:
        self.node = node
        self.requests: list[tuple[str, int, Any]] = []
        self.errors: list[ErrorCode] = []  # answers to give first, one per request
        self.verifications: list[tuple[int, Any]] = []  # AddPartitionsToTxn from leaders

    def __call__(self, host: str, port: int) -> FakeLeaders.Conn:
        return FakeLeaders.Conn(self, host, port)

    class Conn:
        def __init__(self, owner: FakeLeaders, host: str, port: int) -> None:
            self.owner, self.host, self.port = owner, host, port

        async def request(self, api_key: int, version: int, req: Any, timeout_s: float) -> Any:
            if api_key == 24:  # KIP-890 verification: this node is every coordinator
                self.owner.verifications.append((version, req))
                return encodes(await add_partitions_to_txn.handle(
                    self.owner.node, ctx(24, version), req))
            assert (api_key, version) == (27, 1)
            self.owner.requests.append((self.host, self.port, req))
            error = self.owner.errors.pop(0) if self.owner.errors else ErrorCode.none
            out = []
            for m in req.markers:
                for t in m.topics:
                    for p in t.partition_indexes:
                        if error is ErrorCode.none:
                            on_txn_marker_written(self.owner.node, t.name, p, m.producer_id,
                                                  m.transaction_result)
                out.append(markers_v1.WritableTxnMarkerResult(
                    producer_id=m.producer_id, topics=tuple(
                        markers_v1.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                            markers_v1.WritableTxnMarkerPartitionResult(
                                partition_index=p, error_code=error)
                            for p in t.partition_indexes)) for t in m.topics)))
            return markers_v1.WriteTxnMarkersResponse(markers=tuple(out))

        async def close(self) -> None:
            return None


class TxnNode(GroupNode):
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        super().__init__(tmp_path, **{**TXN_CONFIG, **config})
        self._pids = itertools.count(1000)
        self.leaders = FakeLeaders(self)
        self.txn_coordinator = TransactionCoordinatorService(
            self, self._generate, tick_interval_s=0.02, connect=self.leaders,
            listener_name="PLAINTEXT")

    async def _generate(self) -> int:
        return next(self._pids)

    async def start(self) -> None:
        await super().start()
        self.txn_coordinator.start()

    async def stop(self) -> None:
        await self.txn_coordinator.stop()
        await super().stop()


@pytest.fixture(name="tnode")
async def tnode_fixture(tmp_path: Path) -> AsyncIterator[TxnNode]:
    n = TxnNode(tmp_path)
    await n.start()
    try:
        yield n
    finally:
        await n.stop()


async def find_txn(node: TxnNode, tid: str, version: int = 3) -> Any:
    req = request("find_coordinator", version, "FindCoordinatorRequest", key=tid, key_type=1,
                  coordinator_keys=(tid,))
    return encodes(await find_coordinator.handle(node, ctx(10, version), req))


async def txn_ready(node: TxnNode, tid: str = "tx") -> None:
    """FindCoordinator(TRANSACTION) until the id's partition is loaded."""
    svc = node.txn_coordinator
    for _ in range(300):
        resp = await find_txn(node, tid)
        if resp.error_code is ErrorCode.none and svc.partition_of(tid) in svc.coordinators:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("transaction coordinator never became available")


async def init_txn(node: TxnNode, tid: str = "tx", version: int = 4, timeout_ms: int = 60000,
                   producer_id: int = -1, producer_epoch: int = -1) -> Any:
    import datetime

    req = request("init_producer_id", version, "InitProducerIdRequest", transactional_id=tid,
                  transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                  producer_id=producer_id, producer_epoch=producer_epoch)
    return encodes(await init_producer_id.handle(node, ctx(22, version), req))


async def wait_state(node: TxnNode, tid: str, state: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        error, d = node.txn_coordinator.describe(tid)
        if d is not None and d.state.kafka_name == state:
            return
        assert asyncio.get_running_loop().time() < deadline, (tid, error, d)
        await asyncio.sleep(0.01)


__all__ = ["TRANSACTION_STATE_TOPIC", "TxnNode", "find_txn", "init_txn", "tnode_fixture",
           "txn_ready", "wait_state"]


def set_transaction_version(node: TxnNode, level: int) -> None:
    """Finalize transaction.version at `level` in the node's image (a FeatureLevel record
    would; level 2 lets transactions V2 in, broker/txn/version.py)."""
    from dataclasses import replace

    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, features={
        **image.features, "transaction.version": level}))
