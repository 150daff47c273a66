"""Transactions, the log side, on a real node with real consumers: transactional batches
sent with a raw kio Produce (the transaction coordinator is not part of this test),
end-transaction markers written with kio-built WriteTxnMarkers as a coordinator would, and
read_committed consumers (librdkafka, kafka-python, aiokafka) that never see aborted
records and stop at the last stable offset of an open transaction, while read_uncommitted
sees everything. The open transaction survives kill -9 (recovery rebuilds it from the log).

Transactions no coordinator knows are what KIP-890's verification refuses, so these nodes
run with `transaction.partition.verification.enable=false` (the test is about the log);
tests/integration/test_txn_verification.py covers the default.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from broker.protocol.records import Record, build_batch
from broker.testing.wire import RawConnection
from tests.compat.test_idempotence import create_topic
from tests.conftest import Broker
from tests.support.node import SkiffNode, external_bootstrap, started_node

pytestmark = pytest.mark.timeout(120)
UNVERIFIED = {"SKIFF_TRANSACTION_PARTITION_VERIFICATION_ENABLE": "false"}


def _unverified_node(data_dir: Path) -> SkiffNode:
    if external_bootstrap() is not None:
        pytest.skip("writes transactions no coordinator knows: needs a Skiff node started "
                    "with transaction.partition.verification.enable=false")
    return started_node(data_dir, UNVERIFIED)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's own node (see the module's docstring)."""
    node = _unverified_node(tmp_path_factory.mktemp("unverified-node"))
    try:
        yield node.bootstrap
    finally:
        node.close()


@pytest.fixture
def own_skiff_node(tmp_path: Path) -> Iterator[Broker]:
    node = _unverified_node(tmp_path / "node")
    try:
        yield node
    finally:
        node.close()
WAIT_S = 20.0
NOT_YET = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
           ErrorCode.leader_not_available, ErrorCode.request_timed_out)


class TxnClient(RawConnection):
    """A raw Kafka connection that plays the transactional producer and the coordinator."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, WAIT_S)
        self.seqs: dict[int, int] = {}

    def producer_id(self) -> int:
        resp = self.call(InitProducerIdRequest(
            transactional_id=None, transaction_timeout=i32Timedelta.parse(
                datetime.timedelta(seconds=60))))
        assert resp.error_code is ErrorCode.none
        assert int(resp.producer_epoch) == 0
        return int(resp.producer_id)

    def produce(self, topic: str, values: list[bytes], pid: int = -1,
                transactional_id: str | None = None) -> tuple[ErrorCode, int]:
        now = int(time.time() * 1000)
        records = [Record(timestamp=now, key=b"k", value=v) for v in values]
        if pid >= 0:
            seq = self.seqs.get(pid, 0)
            batch = build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                is_transactional=transactional_id is not None)
        else:
            batch = build_batch(records)
        resp = self.call(ProduceRequest(
            transactional_id=transactional_id, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=i32(0), records=Records(batch)),)),)))
        part = resp.responses[0].partition_responses[0]
        if part.error_code is ErrorCode.none and pid >= 0:
            self.seqs[pid] = self.seqs.get(pid, 0) + len(values)
        return part.error_code, int(part.base_offset)

    def end_txn(self, topic: str, pid: int, committed: bool) -> ErrorCode:
        resp = self.call(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=i64(pid), producer_epoch=i16(0), transaction_result=committed,
            coordinator_epoch=i32(0),
            topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(i32(0),)),)),)))
        return resp.markers[0].topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    def latest(self, topic: str, isolation_level: int, *, wait: bool = False) -> int:
        """ListOffsets LATEST at `isolation_level`; with `wait`, until the partition has a
        leader here again (after a restart)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            part = self._latest(topic, isolation_level)
            if not wait or part.error_code not in NOT_YET or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert part.error_code is ErrorCode.none
        return int(part.offset)

    def _latest(self, topic: str, isolation_level: int) -> Any:
        resp = self.call(ListOffsetsRequest(
            replica_id=i32(-1), isolation_level=i8(isolation_level),
            topics=(ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
                partition_index=i32(0), current_leader_epoch=i32(-1),
                timestamp=i64(-1)),)),)))
        return resp.topics[0].partitions[0]


def ok(result: tuple[ErrorCode, int]) -> int:
    assert result[0] is ErrorCode.none, result
    return result[1]


# ---- the three consumers: everything they get within a grace period --------------------


def confluent_read(bootstrap: str, topic: str, isolation: str, expect: int) -> tuple[
        list[bytes], int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{isolation}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": 1})
    out: list[bytes] = []
    position = -1
    try:
        tp = TopicPartition(topic, 0, 0)
        c.assign([tp])
        deadline = time.monotonic() + WAIT_S
        quiet_until = None
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
                out.append(m.value())
            if len(out) >= expect:
                quiet_until = quiet_until or time.monotonic() + 1.5
                if time.monotonic() >= quiet_until:
                    break
        position = c.position([TopicPartition(topic, 0)])[0].offset
    finally:
        c.close()
    return out, position


def kafka_python_read(bootstrap: str, topic: str, isolation: str, expect: int) -> tuple[
        list[bytes], int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, group_id=None, fetch_max_wait_ms=50,
                      request_timeout_ms=15000)
    out: list[bytes] = []
    try:
        tp = KpTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        deadline = time.monotonic() + WAIT_S
        quiet_until = None
        while time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                out += [m.value for m in msgs]
            if len(out) >= expect:
                quiet_until = quiet_until or time.monotonic() + 1.5
                if time.monotonic() >= quiet_until:
                    break
        end = c.end_offsets([tp])[tp]  # ListOffsets at the consumer's isolation level
    finally:
        c.close()
    return out, end


def aiokafka_read(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    async def go() -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, fetch_max_wait_ms=50)
        await c.start()
        out: list[bytes] = []
        try:
            tp = AioTP(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_S
            quiet_until = None
            while loop.time() < deadline:
                got = await c.getmany(timeout_ms=200)
                for msgs in got.values():
                    out += [m.value for m in msgs]
                if len(out) >= expect:
                    quiet_until = quiet_until or loop.time() + 1.5
                    if loop.time() >= quiet_until:
                        break
        finally:
            await c.stop()
        return out

    return asyncio.run(go())


def test_transactional_batch_needs_a_transactional_id(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    cl = TxnClient(bootstrap)
    try:
        pid = cl.producer_id()
        now = int(time.time() * 1000)
        batch = build_batch([Record(timestamp=now, value=b"x")], producer_id=pid,
                            producer_epoch=0, base_sequence=0, is_transactional=True)
        resp = cl.call(ProduceRequest(
            transactional_id=None, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(TopicProduceData(name=topic_name, partition_data=(
                PartitionProduceData(index=i32(0), records=Records(batch)),)),)))
        code = resp.responses[0].partition_responses[0].error_code
        assert code is ErrorCode.transactional_id_authorization_failed
        assert ok(cl.produce(topic_name, [b"y"], pid, "tx")) == 0
    finally:
        cl.close()


def test_read_committed_end_to_end(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    t = topic_name
    cl = TxnClient(bootstrap)
    try:
        p1, p2 = cl.producer_id(), cl.producer_id()
        assert ok(cl.produce(t, [b"c0"])) == 0
        assert ok(cl.produce(t, [b"a1", b"a2"], p1, "tx-1")) == 1     # aborted below
        assert ok(cl.produce(t, [b"b1"], p2, "tx-2")) == 3            # committed below
        assert cl.end_txn(t, p1, committed=False) is ErrorCode.none   # 4: ABORT
        assert cl.end_txn(t, p2, committed=True) is ErrorCode.none    # 5: COMMIT
        assert ok(cl.produce(t, [b"c1"])) == 6
        assert ok(cl.produce(t, [b"a3"], p1, "tx-1")) == 7            # open
        assert ok(cl.produce(t, [b"c2"])) == 8
        assert cl.latest(t, 1) == 7 and cl.latest(t, 0) == 9
        committed = [b"c0", b"b1", b"c1"]
        everything = [b"c0", b"a1", b"a2", b"b1", b"c1", b"a3", b"c2"]

        got, position = confluent_read(bootstrap, t, "read_committed", len(committed))
        assert got == committed and position == 7
        got, _ = confluent_read(bootstrap, t, "read_uncommitted", len(everything))
        assert got == everything
        got, end = kafka_python_read(bootstrap, t, "read_committed", len(committed))
        assert got == committed and end == 7
        got, end = kafka_python_read(bootstrap, t, "read_uncommitted", len(everything))
        assert got == everything and end == 9
        assert aiokafka_read(bootstrap, t, "read_committed", len(committed)) == committed
        assert aiokafka_read(bootstrap, t, "read_uncommitted", len(everything)) == everything

        assert cl.end_txn(t, p1, committed=True) is ErrorCode.none    # 9: COMMIT of a3
        assert cl.latest(t, 1) == 10
        final = [b"c0", b"b1", b"c1", b"a3", b"c2"]
        got, position = confluent_read(bootstrap, t, "read_committed", len(final))
        assert got == final and position == 10
        got, end = kafka_python_read(bootstrap, t, "read_committed", len(final))
        assert got == final and end == 10
        assert aiokafka_read(bootstrap, t, "read_committed", len(final)) == final
    finally:
        cl.close()


def test_open_transaction_survives_kill_9(own_skiff_node: Broker, topic_name: str) -> None:
    if not isinstance(own_skiff_node, SkiffNode):
        pytest.skip("needs a node this test may kill")
    bootstrap = own_skiff_node.bootstrap
    create_topic(bootstrap, topic_name)
    t = topic_name
    cl = TxnClient(bootstrap)
    try:
        pid = cl.producer_id()
        ok(cl.produce(t, [b"before"]))                                  # 0
        ok(cl.produce(t, [b"x1", b"x2"], pid, "tx"))                    # 1-2, open
        ok(cl.produce(t, [b"after"]))                                   # 3
        assert cl.latest(t, 1) == 1
    finally:
        cl.close()
    own_skiff_node.kill()
    own_skiff_node.start()
    own_skiff_node.wait_ready()
    cl = TxnClient(bootstrap)
    try:
        # recovery rebuilt the open transaction from the log: the LSO is its first offset
        assert cl.latest(t, 1, wait=True) == 1 and cl.latest(t, 0) == 4
    finally:
        cl.close()
    assert confluent_read(bootstrap, t, "read_committed", 1) == ([b"before"], 1)
    cl = TxnClient(bootstrap)
    try:
        assert cl.end_txn(t, pid, committed=False) is ErrorCode.none
        assert cl.latest(t, 1) == 5 == cl.latest(t, 0)
    finally:
        cl.close()
    assert confluent_read(bootstrap, t, "read_committed", 2)[0] == [b"before", b"after"]
    assert kafka_python_read(bootstrap, t, "read_committed", 2)[0] == [b"before", b"after"]
    assert confluent_read(bootstrap, t, "read_uncommitted", 4)[0] == \
        [b"before", b"x1", b"x2", b"after"]
