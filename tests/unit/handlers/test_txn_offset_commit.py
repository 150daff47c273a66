"""TxnOffsetCommit on the group coordinator: offsets written as the producer's transactional
batch, visible only once the COMMIT marker reaches the offsets partition, dropped on ABORT;
and the load of __consumer_offsets replaying transactional batches and control batches."""

from __future__ import annotations

import random

import pytest
from group_node import (  # noqa: F401
    anyio_backend_fixture,
    ctx,
    encodes,
    fetch,
    fetched,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode
from txn_node import TxnNode, init_txn, tnode_fixture, txn_ready, wait_state  # noqa: F401

from broker.group import records as rec
from broker.group.coordinator import GroupCoordinator
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import replay_batch
from broker.group.types import GroupConfig
from broker.handlers import txn_offset_commit
from broker.protocol.records import Record, build_batch, decode_records, iter_batch_headers

pytestmark = pytest.mark.anyio


async def txn_commit(node: TxnNode, version: int, tid: str, pid: int, epoch: int, group: str,
                     offsets: dict[tuple[str, int], int],
                     **kw: object) -> dict[tuple[str, int], ErrorCode]:
    part_cls = request_class("txn_offset_commit", version, "TxnOffsetCommitRequestPartition")
    topic_cls = request_class("txn_offset_commit", version, "TxnOffsetCommitRequestTopic")
    by: dict[str, list[object]] = {}
    for (t, p), off in offsets.items():
        from broker.protocol.kio_build import build

        by.setdefault(t, []).append(build(part_cls, partition_index=p, committed_offset=off,
                                          committed_leader_epoch=-1, committed_metadata="m"))
    req = request("txn_offset_commit", version, "TxnOffsetCommitRequest", transactional_id=tid,
                  group_id=group, producer_id=pid, producer_epoch=epoch,
                  topics=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by.items()),
                  **kw)
    resp = encodes(await txn_offset_commit.handle(node, ctx(28, version), req))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def setup(node: TxnNode, group: str = "grp") -> tuple[int, int]:
    await txn_ready(node, "tx")
    await ready(node, group)
    node.add_topic("in", 2)
    r = await init_txn(node, "tx")
    assert await node.txn_coordinator.add_offsets("tx", r.producer_id, r.producer_epoch,
                                                  group) is ErrorCode.none
    return r.producer_id, r.producer_epoch


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_offsets_appear_only_when_the_transaction_commits(tnode: TxnNode,
                                                                version: int) -> None:
    pid, epoch = await setup(tnode)
    out = await txn_commit(tnode, version, "tx", pid, epoch, "grp", {("in", 0): 10, ("in", 1): 7})
    assert out == {("in", 0): ErrorCode.none, ("in", 1): ErrorCode.none}
    assert fetched((await fetch(tnode, "grp", [("in", 0)])).topics) == {("in", 0): -1}
    # the record is in the log as the producer's transactional batch
    part = tnode.replicas.get(OFFSETS_TOPIC, tnode.group_coordinator.partition_of("grp"))
    assert part is not None
    data = part.log.read(part.log.log_start_offset, 1 << 20, part.log.log_end_offset).read_bytes()
    headers = [h for _, h in iter_batch_headers(data, validate_crc=True)]
    assert any(h.is_transactional and h.producer_id == pid for h in headers)
    assert (await tnode.txn_coordinator.end_txn("tx", pid, epoch, True)).error is ErrorCode.none
    await wait_state(tnode, "tx", "CompleteCommit")
    assert fetched((await fetch(tnode, "grp", [("in", 0), ("in", 1)])).topics) == {
        ("in", 0): 10, ("in", 1): 7}


async def test_abort_drops_them(tnode: TxnNode) -> None:
    pid, epoch = await setup(tnode)
    await txn_commit(tnode, 3, "tx", pid, epoch, "grp", {("in", 0): 10})
    assert (await tnode.txn_coordinator.end_txn("tx", pid, epoch, False)).error is ErrorCode.none
    await wait_state(tnode, "tx", "CompleteAbort")
    assert fetched((await fetch(tnode, "grp", [("in", 0)])).topics) == {("in", 0): -1}
    coord = tnode.group_coordinator.coordinators[tnode.group_coordinator.partition_of("grp")]
    assert coord.pending_txn_offsets == {}


async def test_v3_member_checks_and_unknown_partitions(tnode: TxnNode) -> None:
    pid, epoch = await setup(tnode)
    out = await txn_commit(tnode, 3, "tx", pid, epoch, "grp", {("in", 0): 1, ("gone", 0): 1},
                           generation_id=5, member_id="nobody")
    assert out == {("in", 0): ErrorCode.unknown_member_id,
                   ("gone", 0): ErrorCode.unknown_topic_or_partition}


def test_replay_honours_control_batches() -> None:
    coord = GroupCoordinator(GroupConfig(), random.Random(1), 0)
    key = rec.encode_offset_commit_key("g", "t", 0)

    def value(off: int) -> bytes:
        return rec.encode_offset_commit_value(rec.OffsetCommitValue(off, -1, "", 1, -1))

    def control(pid: int, committed: bool) -> bytes:
        return build_batch([Record(key=b"\x00\x00" + (b"\x00\x01" if committed else b"\x00\x00"),
                                   value=b"\x00\x00\x00\x00\x00\x00")],
                           producer_id=pid, producer_epoch=0, is_transactional=True,
                           is_control=True)

    batches = [
        build_batch([Record(key=key, value=value(5))]),
        build_batch([Record(key=key, value=value(9))], producer_id=7, producer_epoch=0,
                    is_transactional=True),
        build_batch([Record(key=key, value=value(11))], producer_id=8, producer_epoch=0,
                    is_transactional=True),
        control(8, False),
    ]
    for b in batches:
        [(_, h)] = list(iter_batch_headers(b, validate_crc=True))
        replay_batch(coord, h, decode_records(b))
    assert coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 5
    assert set(coord.pending_txn_offsets) == {7}
    [(_, h)] = list(iter_batch_headers(control(7, True), validate_crc=True))
    replay_batch(coord, h, decode_records(control(7, True)))
    assert coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 9
    assert coord.pending_txn_offsets == {}


def test_require_stable_answers_unstable_while_pending() -> None:
    coord = GroupCoordinator(GroupConfig(), random.Random(1), 0)
    key = rec.encode_offset_commit_key("g", "t", 0)
    coord.replay(key, rec.encode_offset_commit_value(rec.OffsetCommitValue(3, -1, "", 1, -1)))
    coord.replay_txn_offset(7, key, rec.encode_offset_commit_value(
        rec.OffsetCommitValue(9, -1, "", 1, -1)))
    [plain] = coord.fetch_offsets("g", [("t", 0)]).partitions
    assert (plain.offset, plain.error) == (3, ErrorCode.none)
    [stable] = coord.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
    assert stable.error is ErrorCode.unstable_offset_commit
    coord.complete_txn_offsets(7, True)
    [done] = coord.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
    assert (done.offset, done.error) == (9, ErrorCode.none)


async def test_marker_during_load_is_applied_when_loaded(tnode: TxnNode) -> None:
    """A marker that reaches an offsets partition while it loads (the load may have read
    the log before the marker was appended) is applied once the partition is loaded."""
    pid, epoch = await setup(tnode)
    await txn_commit(tnode, 3, "tx", pid, epoch, "grp", {("in", 0): 42})
    svc = tnode.group_coordinator
    p = svc.partition_of("grp")
    topic = tnode.metadata.topic(OFFSETS_TOPIC)
    assert topic is not None
    # a new leader epoch: the partition is unloaded and its load starts (not yet run)
    tnode.add_topic(OFFSETS_TOPIC, len(topic.partitions), epoch=1)
    assert p not in svc.coordinators and p in svc.runtime.loading
    assert svc.complete_txn_offsets(p, pid, True) == 0  # the FakeLeaders wrote no marker
    await tnode.wait_loaded()
    assert svc.coordinators[p].pending_txn_offsets == {}
    assert fetched((await fetch(tnode, "grp", [("in", 0)])).topics) == {("in", 0): 42}


@pytest.mark.parametrize("version,expected", [(3, ErrorCode.invalid_txn_state),
                                              (4, ErrorCode.transaction_abortable)])
async def test_offsets_outside_the_transaction_are_refused(tnode: TxnNode, version: int,
                                                           expected: ErrorCode) -> None:
    """KIP-890: without AddOffsetsToTxn the group's offsets partition is not in the
    transaction; the transaction coordinator says so and nothing is written."""
    await txn_ready(tnode, "tx")
    await ready(tnode, "grp")
    tnode.add_topic("in", 1)
    r = await init_txn(tnode, "tx")
    part = tnode.replicas.get(OFFSETS_TOPIC, tnode.group_coordinator.partition_of("grp"))
    assert part is not None
    end = part.log.log_end_offset
    out = await txn_commit(tnode, version, "tx", r.producer_id, r.producer_epoch, "grp",
                           {("in", 0): 3})
    assert out == {("in", 0): expected}
    assert part.log.log_end_offset == end
    [(sent_version, req)] = tnode.leaders.verifications
    assert sent_version == 5 and req.transactions[0].verify_only


async def test_v5_adds_the_offsets_partition_itself(tnode: TxnNode) -> None:
    """Transactions V2: no AddOffsetsToTxn; TxnOffsetCommit v5 adds the group's offsets
    partition to the transaction (AddPartitionsToTxn v5 without verify_only). Refused while
    transaction.version < 2."""
    from txn_node import set_transaction_version

    await txn_ready(tnode, "tx")
    await ready(tnode, "grp")
    tnode.add_topic("in", 1)
    r = await init_txn(tnode, "tx", version=5)
    set_transaction_version(tnode, 1)
    out = await txn_commit(tnode, 5, "tx", r.producer_id, r.producer_epoch, "grp",
                           {("in", 0): 3})
    assert out == {("in", 0): ErrorCode.unsupported_version}
    set_transaction_version(tnode, 2)
    out = await txn_commit(tnode, 5, "tx", r.producer_id, r.producer_epoch, "grp",
                           {("in", 0): 3})
    assert out == {("in", 0): ErrorCode.none}
    [(_, req)] = tnode.leaders.verifications
    assert not req.transactions[0].verify_only
    _, d = tnode.txn_coordinator.describe("tx")
    assert d is not None and d.state.kafka_name == "Ongoing"
    assert d.partitions == {(OFFSETS_TOPIC, tnode.group_coordinator.partition_of("grp"))}
    result = await tnode.txn_coordinator.end_txn("tx", r.producer_id, r.producer_epoch, True,
                                                 tv2=True)
    assert (result.error, result.producer_epoch) == (ErrorCode.none, r.producer_epoch + 1)
    await wait_state(tnode, "tx", "CompleteCommit")
    assert fetched((await fetch(tnode, "grp", [("in", 0)])).topics) == {("in", 0): 3}


async def test_v6_names_topics_by_id(tnode: TxnNode) -> None:
    """KIP-1319: v6 names topics by id; an id no topic has is UNKNOWN_TOPIC_ID (Kafka's
    answer), the known one commits, and the answer names topics by the request's ids."""
    import uuid

    from broker.protocol.kio_build import build

    await txn_ready(tnode, "tx")
    await ready(tnode, "grp")
    tnode.add_topic("in", 1)
    r = await init_txn(tnode, "tx", version=5)
    topic = tnode.metadata.topic("in")
    assert topic is not None
    unknown = uuid.uuid4()
    part_cls = request_class("txn_offset_commit", 6, "TxnOffsetCommitRequestPartition")
    topic_cls = request_class("txn_offset_commit", 6, "TxnOffsetCommitRequestTopic")
    parts = (build(part_cls, partition_index=0, committed_offset=4, committed_metadata="m"),)
    req = request("txn_offset_commit", 6, "TxnOffsetCommitRequest", transactional_id="tx",
                  group_id="grp", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                  generation_id_or_member_epoch=-1,
                  topics=(topic_cls(topic_id=topic.topic_id, partitions=parts),
                          topic_cls(topic_id=unknown, partitions=parts)))
    resp = encodes(await txn_offset_commit.handle(tnode, ctx(28, 6), req))
    assert {(t.topic_id, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions} == {
        (topic.topic_id, 0): ErrorCode.none, (unknown, 0): ErrorCode.unknown_topic_id}
    result = await tnode.txn_coordinator.end_txn("tx", r.producer_id, r.producer_epoch, True,
                                                 tv2=True)
    assert result.error is ErrorCode.none
    await wait_state(tnode, "tx", "CompleteCommit")
    assert fetched((await fetch(tnode, "grp", [("in", 0)])).topics) == {("in", 0): 4}
