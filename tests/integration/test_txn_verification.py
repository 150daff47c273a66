"""KIP-890 on a real node, over the Kafka wire with kio-built requests (no client here sends
transactions V2: librdkafka 2.16, kafka-python 3.0 and kafkajs 2.2 stop at EndTxn v3 or
below): part 1, a partition leader verifies a transaction's first write with the
coordinator (`transaction.partition.verification.enable`, on by default) and refuses, with
nothing written, a transactional Produce for a partition never added or a late write of a
transaction that already ended; part 2, transactions V2 (a node formatted with Kafka 4.1's
levels has transaction.version 2): Produce v12 adds the partition itself, EndTxn v5 bumps
the epoch and returns it, TxnOffsetCommit v5 adds the group's offsets partition; Produce
v13 by topic id; InitProducerId v6 with two-phase commit refused."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import Record, build_batch
from broker.testing import admin as adm
from tests.integration.test_txn_coordinator_node import Wire

pytestmark = pytest.mark.timeout(180)


class TxnWire(Wire):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(int(bootstrap.rsplit(":", 1)[1]))
        self.seqs: dict[tuple[int, int, str, int], int] = {}

    def produce(self, version: int, tid: str | None, pid: int, epoch: int, topic: str,
                partition: int, values: list[bytes], *, transactional: bool = True,
                topic_id: Any = None) -> Any:
        """The partition's answer to one batch; sequences follow on per producer epoch."""
        import importlib

        from kio.static.primitive import Records

        pr = importlib.import_module(f"kio.schema.produce.v{version}.request")
        key = (pid, epoch, topic, partition)
        seq = self.seqs.get(key, 0) if pid >= 0 else -1
        batch = build_batch([Record(value=v) for v in values], producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq,
                            is_transactional=transactional)
        from broker.protocol.kio_build import build

        resp = self.call("produce", 0, version, "ProduceRequest", transactional_id=tid, acks=-1,
                         timeout=datetime.timedelta(seconds=10), topic_data=(
                             build(pr.TopicProduceData, name=topic, topic_id=topic_id,
                                   partition_data=(pr.PartitionProduceData(
                                       index=partition, records=Records(batch)),)),))
        part = resp.responses[0].partition_responses[0]
        if part.error_code is ErrorCode.none and pid >= 0:
            self.seqs[key] = seq + len(values)
        return part

    def init_v(self, tid: str, version: int, **kw: Any) -> Any:
        return self.until(lambda: self.call(
            "init_producer_id", 22, version, "InitProducerIdRequest", transactional_id=tid,
            transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
            producer_epoch=-1, **kw), lambda r: r.error_code not in (
                ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                ErrorCode.coordinator_not_available, ErrorCode.concurrent_transactions),
            "InitProducerId")

    def end_v5(self, tid: str, pid: int, epoch: int, committed: bool) -> Any:
        return self.until(lambda: self.call(
            "end_txn", 26, 5, "EndTxnRequest", transactional_id=tid, producer_id=pid,
            producer_epoch=epoch, committed=committed),
            lambda r: r.error_code is not ErrorCode.concurrent_transactions, "EndTxn v5")

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log end offset, last stable offset) by ListOffsets LATEST."""
        from kio.schema.list_offsets.v7 import request as lo

        out = []
        for isolation in (0, 1):
            resp = self.call("list_offsets", 2, 7, "ListOffsetsRequest", replica_id=-1,
                             isolation_level=isolation, topics=(lo.ListOffsetsTopic(
                                 name=topic, partitions=(lo.ListOffsetsPartition(
                                     partition_index=partition, current_leader_epoch=-1,
                                     timestamp=-1),)),))
            p = resp.topics[0].partitions[0]
            assert p.error_code is ErrorCode.none, p
            out.append(int(p.offset))
        return out[0], out[1]


@pytest.fixture
def w(bootstrap: str) -> TxnWire:
    return TxnWire(bootstrap)


def test_a_partition_never_added_is_refused_and_nothing_is_written(
        bootstrap: str, w: TxnWire, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-tx"
    w.find(tid)
    r = w.init(tid)
    pid, epoch = r.producer_id, r.producer_epoch
    assert w.add(tid, pid, epoch, topic_name, [0]) == {0: ErrorCode.none}
    # partition 1 was never added: before v11 INVALID_TXN_STATE, from v11 the coordinator's
    # TRANSACTION_ABORTABLE
    for version, error in ((3, ErrorCode.invalid_txn_state), (9, ErrorCode.invalid_txn_state),
                           (10, ErrorCode.invalid_txn_state),
                           (11, ErrorCode.transaction_abortable)):
        part = w.produce(version, tid, pid, epoch, topic_name, 1, [b"stray"])
        assert part.error_code is error, (version, part)
    assert w.offsets(topic_name, 1) == (0, 0)
    # a producer id the coordinator does not know for this id
    part = w.produce(9, tid, pid + 12345, 0, topic_name, 0, [b"who"])
    assert part.error_code is ErrorCode.invalid_producer_id_mapping
    # the added partition takes the writes
    assert w.produce(9, tid, pid, epoch, topic_name, 0, [b"a", b"b"]).error_code is \
        ErrorCode.none
    assert w.offsets(topic_name, 0) == (2, 0)
    assert w.end(tid, pid, epoch, True) is ErrorCode.none
    w.state(tid, "CompleteCommit")
    assert w.offsets(topic_name, 0) == (3, 3)
    assert w.offsets(topic_name, 1) == (0, 0)


def test_a_late_write_after_the_abort_opens_no_transaction(
        bootstrap: str, w: TxnWire, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    tid = f"{topic_name}-tx"
    w.find(tid)
    r = w.init(tid)
    pid, epoch = r.producer_id, r.producer_epoch
    assert w.add(tid, pid, epoch, topic_name, [0]) == {0: ErrorCode.none}
    assert w.produce(9, tid, pid, epoch, topic_name, 0, [b"x"]).error_code is ErrorCode.none
    assert w.end(tid, pid, epoch, False) is ErrorCode.none
    w.state(tid, "CompleteAbort")
    end = w.offsets(topic_name, 0)
    assert end == (2, 2)  # the record and the ABORT marker; nothing open
    # the same producer's next batch arrives after the abort (a retry stuck in a socket)
    late = w.produce(9, tid, pid, epoch, topic_name, 0, [b"late"])
    assert late.error_code is ErrorCode.invalid_txn_state
    assert late.error_message == "Partition was not added to the transaction"
    assert w.offsets(topic_name, 0) == end  # no hanging transaction holds the LSO


def test_transactions_v2_end_to_end(bootstrap: str, w: TxnWire, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-tx"
    w.find(tid)
    r = w.init_v(tid, 5)
    assert r.error_code is ErrorCode.none
    pid, epoch = r.producer_id, r.producer_epoch
    # Produce v12 without AddPartitionsToTxn: the leader adds the partitions
    for p in (0, 1):
        assert w.produce(12, tid, pid, epoch, topic_name, p, [b"c"]).error_code is \
            ErrorCode.none
    d = w.state(tid, "Ongoing")
    assert sorted((t.topic, p) for t in d.topics for p in t.partitions) == [
        (topic_name, 0), (topic_name, 1)]
    # TxnOffsetCommit v5 adds the group's offsets partition in the same way
    group = f"{topic_name}-g"
    w.until(lambda: w.call("find_coordinator", 10, 4, "FindCoordinatorRequest", key_type=0,
                           coordinator_keys=(group,)).coordinators[0],
            lambda c: c.error_code is ErrorCode.none, "FindCoordinator(GROUP)")
    from kio.schema.txn_offset_commit.v5 import request as tc

    commit = w.until(lambda: w.call(
        "txn_offset_commit", 28, 5, "TxnOffsetCommitRequest", transactional_id=tid,
        group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
        group_instance_id=None, topics=(tc.TxnOffsetCommitRequestTopic(
            name=topic_name, partitions=(tc.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                committed_metadata=""),)),)),
        lambda resp: resp.topics[0].partitions[0].error_code is not
        ErrorCode.coordinator_load_in_progress, "TxnOffsetCommit v5")
    assert commit.topics[0].partitions[0].error_code is ErrorCode.none
    d = w.describe(tid)
    assert "__consumer_offsets" in {t.topic for t in d.topics}
    # EndTxn v5 commits and bumps the epoch; the answer names it
    resp = w.end_v5(tid, pid, epoch, True)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
        ErrorCode.none, pid, epoch + 1)
    w.state(tid, "CompleteCommit")
    assert w.offsets(topic_name, 0) == (2, 2)
    # a retry of that EndTxn with the old epoch gets the same answer
    again = w.end_v5(tid, pid, epoch, True)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.none, epoch + 1)
    # the old epoch cannot write any more; the new one starts a transaction at sequence 0
    stale = w.produce(12, tid, pid, epoch, topic_name, 0, [b"zombie"])
    assert stale.error_code is ErrorCode.invalid_producer_epoch
    assert w.produce(12, tid, pid, epoch + 1, topic_name, 0, [b"a"]).error_code is \
        ErrorCode.none
    resp = w.end_v5(tid, pid, epoch + 1, False)
    assert (resp.error_code, resp.producer_epoch) == (ErrorCode.none, epoch + 2)
    w.state(tid, "CompleteAbort")
    assert w.offsets(topic_name, 0) == (4, 4)
    fetched = w.call("offset_fetch", 9, 8, "OffsetFetchRequest", require_stable=True,
                     groups=(_offset_fetch_group(group, topic_name),))
    [g] = fetched.groups
    assert g.topics[0].partitions[0].committed_offset == 1


def _offset_fetch_group(group: str, topic: str) -> Any:
    from kio.schema.offset_fetch.v8 import request as of

    return of.OffsetFetchRequestGroup(group_id=group, topics=(of.OffsetFetchRequestTopics(
        name=topic, partition_indexes=(0,)),))


def test_produce_v13_by_topic_id(bootstrap: str, w: TxnWire, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    md = w.call("metadata", 3, 12, "MetadataRequest", topics=None,
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    [topic_id] = [t.topic_id for t in md.topics if t.name == topic_name]
    part = w.produce(13, None, -1, -1, topic_name, 0, [b"by-id"], transactional=False,
                     topic_id=topic_id)
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
    part = w.produce(13, None, -1, -1, topic_name, 0, [b"x"], transactional=False,
                     topic_id=uuid.uuid4())
    assert part.error_code is ErrorCode.unknown_topic_id
    assert w.offsets(topic_name, 0) == (1, 1)


def test_init_producer_id_v6_two_phase_commit_refused(bootstrap: str, w: TxnWire,
                                                      topic_name: str) -> None:
    tid = f"{topic_name}-2pc"
    w.find(tid)
    r = w.init_v(tid, 6, enable2_pc=True)
    assert r.error_code is ErrorCode.transactional_id_authorization_failed
    r = w.init_v(tid, 6, keep_prepared_txn=True)
    assert r.error_code is ErrorCode.unsupported_version
    r = w.init_v(tid, 6)
    assert (r.error_code, r.producer_epoch, r.ongoing_txn_producer_id) == (ErrorCode.none, 0, -1)


def test_librdkafka_transactions_with_verification_on(bootstrap: str, w: TxnWire,
                                                      topic_name: str) -> None:
    """A real transactional client (librdkafka 2.16: AddPartitionsToTxn v0, Produce v10)
    on a node that verifies: each transaction's first batch per partition is checked with
    the coordinator and goes in; commit and abort are read back as Kafka's; a kio-built
    stray write of the same transactional id to a partition it never added is refused."""
    from tests.compat.test_transactions_confluent import producer, read

    adm.create_topic(bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-rd"
    p = producer(bootstrap, tid)
    p.init_transactions(30)
    for round_, commit in ((0, True), (1, False), (2, True)):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic_name, value=b"r%d-%d" % (round_, i), partition=0)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    got = read(bootstrap, topic_name, 2, "read_committed")
    assert sorted(got) == sorted([b"r%d-%d" % (r, i) for r in (0, 2) for i in range(10)])
    # the producer's id and epoch as the coordinator has them; partition 1 is not in any
    # of its transactions
    d = w.describe(tid)
    part = w.produce(10, tid, d.producer_id, d.producer_epoch, topic_name, 1, [b"stray"])
    assert part.error_code is ErrorCode.invalid_txn_state
    assert w.offsets(topic_name, 1) == (0, 0)
