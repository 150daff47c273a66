"""InitProducerId v0-6 and the idempotent Produce path through the handlers (v6: KIP-939's
two-phase commit fields, refused).

Producer ids come from blocks the (real) controller commits to the metadata log; the
responses are checked with kio and with kafka-python's own decoder."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import io
from typing import Any

import pytest
from group_node import anyio_backend_fixture  # noqa: F401
from kafka.protocol.producer.transaction import InitProducerIdResponse as KpResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from txn_node import (  # noqa: F401
    TxnNode,
    init_txn,
    tnode_fixture,
    txn_ready,
    wait_state,
)

from broker.controller import PRODUCER_ID_BLOCK_SIZE
from broker.controller.requests import AllocateProducerIdsReply
from broker.errors import KafkaError
from broker.handlers import init_producer_id
from broker.handlers.init_producer_id import ProducerIdManager, node_producer_ids
from broker.protocol.records import Record, build_batch
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, run
from tests.unit.handlers.datapath import BASE_TS, create, produce_answer, produce_request

VERSIONS = range(0, 7)


@pytest.fixture
def reg_node(node: TestNode) -> TestNode:
    node.broker_epoch = node.broker_epochs[NODE_ID]  # type: ignore[attr-defined]
    return node


def init_request(version: int, transactional_id: str | None = None, producer_id: int = -1,
                 producer_epoch: int = -1) -> Any:
    m = importlib.import_module(f"kio.schema.init_producer_id.v{version}.request")
    fields: dict[str, Any] = {
        "transactional_id": transactional_id,
        "transaction_timeout": datetime.timedelta(milliseconds=60000),
    }
    if version >= 3:
        fields |= {"producer_id": producer_id, "producer_epoch": producer_epoch}
    return m.InitProducerIdRequest(**fields)


def roundtrip(resp: Any) -> Any:
    """Encode with kio, decode with kio and with kafka-python; both must agree."""
    buf = io.BytesIO()
    entity_writer(type(resp))(buf, resp)
    data = buf.getvalue()
    decoded, used = entity_reader(type(resp))(data, 0)
    assert used == len(data) and decoded == resp
    version = int(resp.__version__)
    theirs = KpResponse.decode(data, version=version)
    assert theirs.error_code == resp.error_code.value
    assert (theirs.producer_id, theirs.producer_epoch) == (resp.producer_id, resp.producer_epoch)
    assert bytes(theirs.encode()) == data
    return decoded


async def init(node: TestNode, version: int = 4, **kw: Any) -> Any:
    resp = await init_producer_id.handle(node, make_ctx(22, version), init_request(version, **kw))
    roundtrip(resp)
    return resp


@pytest.mark.parametrize("version", VERSIONS)
def test_fresh_ids_with_epoch_zero_at_every_version(reg_node: TestNode, version: int) -> None:
    async def go() -> None:
        start = reg_node.metadata.next_producer_id
        seen = []
        for _ in range(3):
            resp = await init(reg_node, version)
            assert resp.error_code is ErrorCode.none
            assert resp.producer_epoch == 0
            seen.append(int(resp.producer_id))
        assert seen == [start, start + 1, start + 2]
        # The block is committed to the metadata log before any id of it is handed out.
        assert reg_node.metadata.next_producer_id == start + PRODUCER_ID_BLOCK_SIZE
    run(go())


def test_ids_come_in_blocks_and_never_repeat_across_brokers(reg_node: TestNode) -> None:
    async def go() -> None:
        await reg_node.register(2)
        other = ProducerIdManager(
            lambda: reg_node.controller.allocate_producer_ids(2, reg_node.broker_epochs[2]))
        ids = [int((await init(reg_node)).producer_id) for _ in range(PRODUCER_ID_BLOCK_SIZE + 5)]
        ids += [await other.generate() for _ in range(10)]
        assert len(set(ids)) == len(ids)
        assert reg_node.metadata.next_producer_id == 3 * PRODUCER_ID_BLOCK_SIZE
        # Broker 2 got the third block: after broker 1's first two.
        assert ids[-10:] == list(range(2 * PRODUCER_ID_BLOCK_SIZE, 2 * PRODUCER_ID_BLOCK_SIZE + 10))
    run(go())


def test_concurrent_callers_share_one_block_fetch() -> None:
    calls = 0

    async def allocate() -> AllocateProducerIdsReply:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return AllocateProducerIdsReply(producer_id_start=calls * 100, producer_id_len=10)

    async def go() -> None:
        manager = ProducerIdManager(allocate)
        ids = await asyncio.gather(*(manager.generate() for _ in range(25)))
        assert sorted(ids) == [*range(100, 110), *range(200, 210), *range(300, 305)]
        assert calls == 3
    run(go())


def test_manager_refuses_a_block_that_goes_back() -> None:
    async def go() -> None:
        replies = iter([AllocateProducerIdsReply(producer_id_start=50, producer_id_len=1),
                        AllocateProducerIdsReply(producer_id_start=10, producer_id_len=5)])

        async def allocate() -> AllocateProducerIdsReply:
            return next(replies)

        manager = ProducerIdManager(allocate)
        assert await manager.generate() == 50
        with pytest.raises(KafkaError) as info:
            await manager.generate()
        assert info.value.error_code is ErrorCode.unknown_server_error
    run(go())


@pytest.mark.parametrize("version", VERSIONS)
def test_transactional_id_without_a_coordinator(reg_node: TestNode, version: int) -> None:
    """A node without a transaction coordinator answers COORDINATOR_NOT_AVAILABLE (clients
    retry it); an empty transactional id is INVALID_REQUEST, as in Kafka."""
    async def go() -> None:
        resp = await init(reg_node, version, transactional_id="txn-1")
        assert resp.error_code is ErrorCode.coordinator_not_available
        assert (resp.producer_id, resp.producer_epoch) == (-1, -1)
        resp = await init(reg_node, version, transactional_id="")
        assert resp.error_code is ErrorCode.invalid_request
        assert reg_node.metadata.next_producer_id == 0  # no block was taken
    run(go())


# ---- transactional ids, through the transaction coordinator (txn_node.TxnNode) ----------


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_transactional_id_gets_its_id_and_bumped_epochs(tnode: TxnNode,
                                                              version: int) -> None:
    await txn_ready(tnode, "tx")
    first = await init_txn(tnode, "tx", version=version)
    roundtrip(first)
    assert (first.error_code, first.producer_id, first.producer_epoch) == (ErrorCode.none, 1000, 0)
    again = await init_txn(tnode, "tx", version=version)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.none, 1000, 1)
    other = await init_txn(tnode, "other", version=version)
    assert other.producer_id == 1001


@pytest.mark.anyio
async def test_timeout_above_the_maximum_is_refused(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    resp = await init_txn(tnode, "tx", timeout_ms=900001)
    assert resp.error_code is ErrorCode.invalid_transaction_timeout


@pytest.mark.anyio
@pytest.mark.parametrize("version,expected", [(3, ErrorCode.invalid_producer_epoch),
                                              (4, ErrorCode.producer_fenced)])
async def test_kip360_with_a_stale_epoch_is_fenced(tnode: TxnNode, version: int,
                                                   expected: ErrorCode) -> None:
    await txn_ready(tnode, "tx")
    for _ in range(3):
        resp = await init_txn(tnode, "tx")
    resp = await init_txn(tnode, "tx", version=version, producer_id=1000, producer_epoch=0)
    assert resp.error_code is expected
    ok = await init_txn(tnode, "tx", version=version, producer_id=1000, producer_epoch=2)
    assert (ok.error_code, ok.producer_epoch) == (ErrorCode.none, 3)


@pytest.mark.anyio
async def test_reinit_aborts_the_ongoing_transaction(tnode: TxnNode) -> None:
    await txn_ready(tnode, "tx")
    tnode.add_topic("data", 2)
    first = await init_txn(tnode, "tx")
    svc = tnode.txn_coordinator
    assert await svc.add_partitions("tx", 1000, 0, [("data", 0)]) is ErrorCode.none
    resp = await init_txn(tnode, "tx")
    assert resp.error_code is ErrorCode.concurrent_transactions
    await wait_state(tnode, "tx", "CompleteAbort")
    [(_, _, markers)] = tnode.leaders.requests
    [m] = markers.markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result) == (1000, 1, False)
    resp = await init_txn(tnode, "tx")
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
        ErrorCode.none, first.producer_id, 2)


@pytest.mark.parametrize("version", [3, 4])
def test_v3_producer_id_and_epoch_go_together(reg_node: TestNode, version: int) -> None:
    async def go() -> None:
        for pid, epoch in ((5, -1), (-1, 0)):
            resp = await init(reg_node, version, producer_id=pid, producer_epoch=epoch)
            assert resp.error_code is ErrorCode.invalid_request
        first = await init(reg_node, version)
        # KIP-360 bump request of an idempotent (null transactional id) producer: Kafka
        # answers a fresh id at epoch 0, never the same id again.
        bumped = await init(reg_node, version, producer_id=int(first.producer_id),
                            producer_epoch=0)
        assert bumped.error_code is ErrorCode.none
        assert bumped.producer_id == first.producer_id + 1 and bumped.producer_epoch == 0
    run(go())


def test_no_block_yet_is_retriable(reg_node: TestNode) -> None:
    async def go() -> None:
        real_epoch = reg_node.broker_epoch  # type: ignore[attr-defined]
        reg_node.broker_epoch = -1  # type: ignore[attr-defined]
        assert (await init(reg_node)).error_code is ErrorCode.coordinator_load_in_progress
        reg_node.broker_epoch = real_epoch + 7  # type: ignore[attr-defined]
        assert (await init(reg_node)).error_code is ErrorCode.coordinator_load_in_progress
        reg_node.broker_epoch = real_epoch  # type: ignore[attr-defined]
        reg_node.quorum.is_leader = False
        assert (await init(reg_node)).error_code is ErrorCode.coordinator_load_in_progress
        reg_node.quorum.is_leader = True
        ok = await init(reg_node)
        assert ok.error_code is ErrorCode.none and ok.producer_id == 0
    run(go())


def test_node_keeps_one_manager(reg_node: TestNode) -> None:
    first = node_producer_ids(reg_node)  # type: ignore[arg-type]
    assert node_producer_ids(reg_node) is first  # type: ignore[arg-type]


# ---- Produce with the ids handed out ------------------------------------------------------


def idem_batch(pid: int, seq: int, n: int = 1, epoch: int = 0, tag: bytes = b"v") -> bytes:
    return build_batch(
        [Record(timestamp=BASE_TS + i, key=b"k", value=tag + b"%d" % (seq + i)) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


async def produce_part(node: TestNode, version: int, data: bytes, acks: int = -1) -> Any:
    resp = await produce_answer(node, version,
                                produce_request(version, "t", 0, data, acks=acks))
    return resp.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", range(3, 10))
def test_duplicate_batch_is_acknowledged_with_its_original_offset(
    reg_node: TestNode, version: int,
) -> None:
    async def go() -> None:
        await create(reg_node, "t")
        pid = int((await init(reg_node)).producer_id)
        first = await produce_part(reg_node, version, idem_batch(pid, 0, 3))
        second = await produce_part(reg_node, version, idem_batch(pid, 3, 2))
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
        for acks in (-1, 1):
            again = await produce_part(reg_node, version, idem_batch(pid, 0, 3), acks=acks)
            assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        plog = reg_node.replicas.get("t", 0).log
        assert plog.log_end_offset == 5
        assert [r.value for r in plog.read_records(0)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    run(go())


def test_sequence_gap_and_stale_epoch_are_refused(reg_node: TestNode) -> None:
    async def go() -> None:
        await create(reg_node, "t")
        pid = int((await init(reg_node)).producer_id)
        assert (await produce_part(reg_node, 9, idem_batch(pid, 0))).error_code is ErrorCode.none
        gap = await produce_part(reg_node, 9, idem_batch(pid, 2))
        assert gap.error_code is ErrorCode.out_of_order_sequence_number
        # The client bumps its epoch itself (KIP-360) and starts again at 0.
        assert (await produce_part(reg_node, 9, idem_batch(pid, 1, epoch=1))).error_code is \
            ErrorCode.out_of_order_sequence_number
        assert (await produce_part(reg_node, 9, idem_batch(pid, 0, epoch=1))).error_code is \
            ErrorCode.none
        stale = await produce_part(reg_node, 9, idem_batch(pid, 1, epoch=0))
        assert stale.error_code is ErrorCode.invalid_producer_epoch
        assert reg_node.replicas.get("t", 0).log.log_end_offset == 2
    run(go())


@pytest.mark.anyio
async def test_v6_two_phase_commit_is_refused_as_kafka_does_without_it(tnode: TxnNode) -> None:
    """Kafka 4.1 with transaction.two.phase.commit.enable off (its default): Enable2Pc is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KeepPreparedTxn UNSUPPORTED_VERSION (Kafka has
    not implemented it); nothing changes for the id. Without them v6 is v5, with the
    ongoing-transaction fields at -1."""
    from kio.schema.init_producer_id.v6 import request as m

    await txn_ready(tnode, "tx")

    async def v6(**kw: Any) -> Any:
        req = m.InitProducerIdRequest(
            transactional_id="tx", transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1, producer_epoch=-1, **kw)
        resp = await init_producer_id.handle(tnode, make_ctx(22, 6), req)
        roundtrip(resp)
        return resp

    for kw, error in (({"enable2_pc": True}, ErrorCode.transactional_id_authorization_failed),
                      ({"keep_prepared_txn": True}, ErrorCode.unsupported_version),
                      ({"enable2_pc": True, "keep_prepared_txn": True},
                       ErrorCode.transactional_id_authorization_failed)):
        resp = await v6(**kw)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (error, -1, -1)
    assert tnode.txn_coordinator.describe("tx")[1] is None
    ok = await v6()
    assert (ok.error_code, ok.producer_epoch) == (ErrorCode.none, 0)
    assert (ok.ongoing_txn_producer_id, ok.ongoing_txn_producer_epoch) == (-1, -1)
