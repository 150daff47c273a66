"""The transaction coordinator on a real `skiff dev` process, over the Kafka wire and the
admin CLI: FindCoordinator(TRANSACTION), InitProducerId with a transactional id (epoch bumps,
fencing), AddPartitionsToTxn, EndTxn with its markers going to the partition leader (this
node, over its inter-broker listener), DescribeTransactions/ListTransactions,
`skiff transactions list|describe|abort`, and a kill -9 after which the coordinator reloads
__transaction_state and resumes a transaction left in PrepareCommit."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection
from broker.testing import admin as adm
from tests.support.node import ExternalBroker, SkiffNode

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


def own(node: SkiffNode | ExternalBroker) -> SkiffNode:
    if isinstance(node, ExternalBroker):
        pytest.skip(node.reason)
    return node


class Wire:
    """Kafka requests with kio entities on one connection to the node."""

    def __init__(self, port: int) -> None:
        self.port = port

    def call(self, api: str, api_key: int, version: int, cls: str, **fields: Any) -> Any:
        import importlib

        m = importlib.import_module(f"kio.schema.{api}.v{version}.request")
        from broker.protocol.kio_build import build

        async def go() -> Any:
            conn = KafkaConnection("127.0.0.1", self.port, "txn-it")
            try:
                return await conn.request(api_key, version, build(getattr(m, cls), **fields),
                                          10.0)
            finally:
                await conn.close()

        return asyncio.run(go())

    def until(self, fn: Callable[[], Any], ok: Callable[[Any], bool], what: str) -> Any:
        deadline = time.monotonic() + WAIT_S
        while True:
            out = fn()
            if ok(out):
                return out
            assert time.monotonic() < deadline, f"{what}: last answer {out}"
            time.sleep(0.1)

    def find(self, tid: str) -> Any:
        return self.until(lambda: self.call("find_coordinator", 10, 4, "FindCoordinatorRequest",
                                            key_type=1, coordinator_keys=(tid,)).coordinators[0],
                          lambda c: c.error_code is ErrorCode.none, "FindCoordinator")

    def init(self, tid: str, timeout_ms: int = 60000) -> Any:
        return self.until(lambda: self.call(
            "init_producer_id", 22, 4, "InitProducerIdRequest", transactional_id=tid,
            transaction_timeout=datetime.timedelta(milliseconds=timeout_ms), producer_id=-1,
            producer_epoch=-1), lambda r: r.error_code not in (
                ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                ErrorCode.coordinator_not_available, ErrorCode.concurrent_transactions),
            "InitProducerId")

    def add(self, tid: str, pid: int, epoch: int, topic: str, parts: list[int]) -> Any:
        from kio.schema.add_partitions_to_txn.v3 import request as m

        resp = self.call("add_partitions_to_txn", 24, 3, "AddPartitionsToTxnRequest",
                         v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                             m.AddPartitionsToTxnTopic(name=topic, partitions=tuple(parts)),))
        return {p.partition_index: p.partition_error_code
                for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}

    def end(self, tid: str, pid: int, epoch: int, committed: bool) -> ErrorCode:
        return self.call("end_txn", 26, 3, "EndTxnRequest", transactional_id=tid,  # type: ignore[no-any-return]
                         producer_id=pid, producer_epoch=epoch, committed=committed).error_code

    def produce_txn(self, tid: str, pid: int, epoch: int, topic: str, partition: int) -> Any:
        """A transactional batch straight to the leader (no AddPartitionsToTxn first)."""
        from kio.schema.produce.v9 import request as pr
        from kio.static.primitive import Records

        from broker.protocol.records import Record, build_batch

        batch = build_batch([Record(value=b"open")], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0, is_transactional=True)
        resp = self.call("produce", 0, 9, "ProduceRequest", transactional_id=tid, acks=-1,
                         timeout=datetime.timedelta(seconds=10), topic_data=(
                             pr.TopicProduceData(name=topic, partition_data=(
                                 pr.PartitionProduceData(index=partition,
                                                         records=Records(batch)),)),))
        return resp.responses[0].partition_responses[0].error_code

    def describe(self, tid: str) -> Any:
        return self.call("describe_transactions", 65, 0, "DescribeTransactionsRequest",
                         transactional_ids=(tid,)).transaction_states[0]

    def state(self, tid: str, want: str) -> Any:
        return self.until(lambda: self.describe(tid), lambda s: s.transaction_state == want,
                          f"{tid} -> {want}")


def skiff(node: SkiffNode, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKIFF_ADMIN": f"127.0.0.1:{node.admin_port}"}
    p = subprocess.run([sys.executable, "-m", "broker.cli.main", *args], capture_output=True,
                       text=True, timeout=60, env=env, cwd=ROOT)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def test_transactions_over_the_wire_and_the_cli(own_skiff_node: SkiffNode | ExternalBroker,
                                                topic_name: str) -> None:
    node = own(own_skiff_node)
    adm.create_topic(node.bootstrap, topic_name, partitions=2)
    w = Wire(node.port)
    c = w.find("tx-a")
    assert (c.node_id, c.port) == (1, node.port)
    first = w.init("tx-a")
    assert first.error_code is ErrorCode.none and first.producer_epoch == 0
    pid = first.producer_id
    bumped = w.init("tx-a")
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)
    assert w.init("tx-a", timeout_ms=900001).error_code is ErrorCode.invalid_transaction_timeout

    # commit: markers go to the leader (this node) and the transaction completes
    assert w.add("tx-a", pid, 1, topic_name, [0, 1]) == {0: ErrorCode.none, 1: ErrorCode.none}
    s = w.describe("tx-a")
    assert s.transaction_state == "Ongoing"
    assert [(t.topic, tuple(t.partitions)) for t in s.topics] == [(topic_name, (0, 1))]
    assert w.end("tx-a", pid, 0, True) is ErrorCode.producer_fenced  # the old epoch
    assert w.end("tx-a", pid, 1, True) is ErrorCode.none
    w.state("tx-a", "CompleteCommit")

    # the CLI sees it; an operator abort fences the producer
    assert w.add("tx-a", pid, 1, topic_name, [0]) == {0: ErrorCode.none}
    listed = json.loads(skiff(node, "transactions", "list", "--state", "Ongoing", "-o", "json"))
    assert [t["transactional_id"] for t in listed["transactions"]] == ["tx-a"]
    described = skiff(node, "transactions", "describe", "--transactional-id", "tx-a")
    assert "Ongoing" in described and f"{topic_name}-0" in described
    out = skiff(node, "transactions", "abort", "--transactional-id", "tx-a")
    assert "epoch 2" in out
    w.state("tx-a", "CompleteAbort")
    assert w.add("tx-a", pid, 1, topic_name, [0]) == {0: ErrorCode.producer_fenced}

    # a transaction left in PrepareCommit by a crash is resumed by the reloaded coordinator
    again = w.init("tx-a")
    assert (again.producer_id, again.producer_epoch) == (pid, 3)
    assert w.add("tx-a", pid, 3, topic_name, [1]) == {1: ErrorCode.none}
    assert w.end("tx-a", pid, 3, True) is ErrorCode.none
    node.kill()  # SIGKILL
    node.start()
    node.wait_ready()
    w.find("tx-a")
    s = w.state("tx-a", "CompleteCommit")
    assert (s.producer_id, s.producer_epoch) == (pid, 3)
    after = w.init("tx-a")
    assert (after.producer_id, after.producer_epoch) == (pid, 4)


@pytest.fixture
def unverified_node(tmp_path: Path) -> Any:
    """A node that lets a hanging transaction happen: KIP-890's verification off (Kafka's
    find-hanging tooling is for brokers where it is off or was not there)."""
    from tests.support.node import external_bootstrap

    if external_bootstrap() is not None:
        pytest.skip("needs its own node started with transaction.partition.verification."
                    "enable=false")
    node = SkiffNode(tmp_path / "node",
                     config_env={"SKIFF_TRANSACTION_PARTITION_VERIFICATION_ENABLE": "false"})
    node.start()
    try:
        node.wait_ready()
        yield node
    finally:
        node.close()


def test_producers_describe_and_find_hanging(unverified_node: SkiffNode,
                                             topic_name: str) -> None:
    node = unverified_node
    adm.create_topic(node.bootstrap, topic_name, partitions=2)
    w = Wire(node.port)
    w.find("tx-h")
    r = w.init("tx-h")
    # a transactional batch the coordinator never heard of (no AddPartitionsToTxn): the
    # partition's transaction stays open, and nothing will ever end it
    assert w.produce_txn("tx-h", r.producer_id, r.producer_epoch, topic_name, 1) is \
        ErrorCode.none
    doc = json.loads(skiff(node, "producers", "describe", "--topic", topic_name,
                           "--partition", "1", "-o", "json"))
    [p] = doc["producers"]
    assert (int(p["producer_id"]), int(p["current_txn_start_offset"])) == (r.producer_id, 0)
    time.sleep(0.05)
    found = json.loads(skiff(node, "transactions", "find-hanging",
                             "--max-transaction-timeout-ms", "10", "-o", "json"))
    [h] = found["transactions"]
    assert (h["topic"], h["partition"], int(h["producer_id"])) == (topic_name, 1, r.producer_id)
    assert (h["transactional_id"], h["coordinator_state"]) == ("tx-h", "Empty")
    # an ongoing transaction the coordinator knows about is not hanging
    assert w.add("tx-h", r.producer_id, r.producer_epoch, topic_name, [1]) == \
        {1: ErrorCode.none}
    found = json.loads(skiff(node, "transactions", "find-hanging",
                             "--max-transaction-timeout-ms", "10", "-o", "json"))
    assert found.get("transactions", []) == []
    skiff(node, "transactions", "abort", "--transactional-id", "tx-h")
    w.state("tx-h", "CompleteAbort")
    doc = json.loads(skiff(node, "producers", "describe", "--topic", topic_name,
                           "--partition", "1", "-o", "json"))
    [p] = doc["producers"]
    assert int(p["current_txn_start_offset"]) == -1
