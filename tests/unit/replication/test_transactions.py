"""Transactions on a partition replica: transactional appends open a producer's
transaction, end-transaction markers close it, the last stable offset and the aborted
transaction index (.txnindex) follow, through segment roll, truncation, clean reopen and
crash recovery. A model replays the surviving batches and a read_committed reader (the
consumer's algorithm over the fetched bytes and the aborted list) must see exactly the
committed and non-transactional records below the LSO."""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.log.cleaner import clean_log
from broker.log.control import read_marker
from broker.log.txn_index import AbortedTxn, decode_entries
from broker.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    whole_batches_length,
)
from broker.replication.partition import Partition
from broker.replication.producer_state import ProducerStateManager
from tests.unit.replication.test_producer_state import Log, hdr

TS = 1_700_000_000_000


def open_log(path: Path, *, clean: bool = True, segment_bytes: int = 1 << 30) -> PartitionLog:
    return PartitionLog(path, TopicPartition("t", 0), LogConfig(segment_bytes=segment_bytes),
                        clock=lambda: TS, clean_shutdown=clean, recovery_point=0)


def leader(plog: PartitionLog) -> Partition:
    part = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: TS, node_id=1)
    part.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,),
                       min_insync_replicas=1)
    return part


class Producer:
    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, values: list[bytes], *, transactional: bool = True) -> bytes:
        b = build_batch([Record(timestamp=TS, key=b"k", value=v) for v in values],
                        producer_id=self.pid, producer_epoch=self.epoch,
                        base_sequence=self.seq, is_transactional=transactional)
        self.seq += len(values)
        return b


def plain(values: list[bytes]) -> bytes:
    return build_batch([Record(timestamp=TS, key=b"k", value=v) for v in values])


def fetch_all(part: Partition, start: int, *, committed: bool) -> bytes:
    """Every batch a consumer would fetch from `start` (one segment per read)."""
    out = bytearray()
    offset = start
    for _ in range(10_000):
        data = part.read(offset, 1 << 30, for_replica=False, min_one_batch=True,
                         read_committed=committed).read_bytes()
        data = data[: whole_batches_length(data)]
        if not data:
            break
        out += data
        offset = max(h.next_offset for _, h in iter_batch_headers(data, validate_crc=True))
    return bytes(out)


def read_committed(part: Partition, start: int = 0) -> list[bytes]:
    """What a read_committed consumer gets from `start`: Kafka's consumer algorithm
    (aborted list ordered by first offset; a producer's data is skipped from its aborted
    transaction's first offset until its abort marker)."""
    lso = part.last_stable_offset
    data = fetch_all(part, start, committed=True)
    pending = sorted(((a.first_offset, a.producer_id)
                      for a in part.aborted_transactions(start, lso)), reverse=True)
    aborting: set[int] = set()
    out: list[bytes] = []
    mv = memoryview(data)
    for pos, h in iter_batch_headers(mv, validate_crc=True):
        assert h.last_offset < lso, "read_committed read past the LSO"
        while pending and pending[-1][0] <= h.last_offset:
            aborting.add(pending.pop()[1])
        raw = mv[pos : pos + h.size]
        if h.is_control:
            m = read_marker(raw, h)
            if m is not None and not m.committed:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        out += [r.value or b"" for r in decode_records(raw) if r.offset >= start]
    return out


# ---- the model ------------------------------------------------------------------------


@dataclass
class Written:
    base: int
    last: int
    pid: int  # -1: plain
    kind: str  # "data", "txn", "commit", "abort"
    values: tuple[bytes, ...] = ()


def expected(batches: list[Written], end: int) -> tuple[dict[int, int], list[AbortedTxn],
                                                        list[bytes]]:
    """(ongoing pid -> first offset, aborted txns, committed values below the LSO)."""
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    txn_values: dict[int, list[tuple[int, bytes]]] = {}
    visible: list[tuple[int, bytes]] = []
    for b in batches:
        if b.kind == "txn":
            ongoing.setdefault(b.pid, b.base)
            txn_values.setdefault(b.pid, []).extend(
                (b.base + i, v) for i, v in enumerate(b.values))
        elif b.kind == "data":
            visible += [(b.base + i, v) for i, v in enumerate(b.values)]
        elif b.pid in ongoing:
            first = ongoing.pop(b.pid)
            if b.kind == "abort":
                lso = min(ongoing.values(), default=b.base + 1)
                aborted.append(AbortedTxn(b.pid, first, b.base, lso))
                txn_values.pop(b.pid, None)
            else:
                visible += txn_values.pop(b.pid, [])
    lso = min([*ongoing.values(), end])
    return ongoing, aborted, [v for o, v in sorted(visible) if o < lso]


def check(part: Partition, batches: list[Written]) -> None:
    end = part.log.log_end_offset
    ongoing, aborted, visible = expected(batches, end)
    assert part.producer_state.ongoing_txns == ongoing
    assert list(part.log.all_aborted_txns()) == aborted
    assert part.last_stable_offset == min([*ongoing.values(), part.high_watermark])
    assert read_committed(part) == visible
    # read_uncommitted sees every data record below the high watermark
    mv = memoryview(fetch_all(part, 0, committed=False))
    seen = [r.value for pos, h in iter_batch_headers(mv, validate_crc=True)
            if not h.is_control for r in decode_records(mv[pos : pos + h.size])]
    assert len(seen) == sum(len(b.values) for b in batches)


class Harness:
    def __init__(self, path: Path, segment_bytes: int = 700) -> None:
        self.path, self.segment_bytes = path, segment_bytes
        self.part = leader(open_log(path, segment_bytes=segment_bytes))
        self.batches: list[Written] = []
        self.producers = {pid: Producer(pid) for pid in (10, 11, 12)}
        self.counter = 0

    def _value(self) -> bytes:
        self.counter += 1
        return b"v%05d" % self.counter

    def txn(self, pid: int, n: int) -> None:
        values = [self._value() for _ in range(n)]
        r = self.part.append_as_leader(self.producers[pid].batch(values), required_acks=1)
        self.batches.append(Written(r.base_offset, r.last_offset, pid, "txn", tuple(values)))

    def data(self, n: int) -> None:
        values = [self._value() for _ in range(n)]
        r = self.part.append_as_leader(plain(values), required_acks=1)
        self.batches.append(Written(r.base_offset, r.last_offset, -1, "data", tuple(values)))

    def end(self, pid: int, committed: bool) -> None:
        p = self.producers[pid]
        r = self.part.write_marker(producer_id=pid, producer_epoch=p.epoch,
                                   coordinator_epoch=1, committed=committed)
        self.batches.append(Written(r.base_offset, r.last_offset, pid,
                                    "commit" if committed else "abort"))

    def truncate(self, offset: int) -> None:
        self.part.log.truncate_to(offset)
        self.part.high_watermark = min(self.part.high_watermark, self.part.log.log_end_offset)
        end = self.part.log.log_end_offset
        self.batches = [b for b in self.batches if b.last < end]
        # producers go on from their last surviving sequence, as after a real truncation
        for pid, p in self.producers.items():
            entry = self.part.producer_state.entry(pid)
            p.seq = entry.last_seq + 1 if entry is not None and entry.batches else 0
            if entry is None:
                p.seq = 0

    def reopen(self, *, crash: bool) -> None:
        if not crash:
            self.part.close()
            self.part.log.close()
        self.part = leader(open_log(self.path, clean=not crash,
                                    segment_bytes=self.segment_bytes))


OPS = st.one_of(
    st.tuples(st.just("txn"), st.sampled_from([10, 11, 12]), st.integers(1, 3)),
    st.tuples(st.just("data"), st.just(0), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.sampled_from([10, 11, 12]), st.just(0)),
    st.tuples(st.just("abort"), st.sampled_from([10, 11, 12]), st.just(0)),
    st.tuples(st.just("roll"), st.just(0), st.just(0)),
    st.tuples(st.just("truncate"), st.just(0), st.integers(0, 100)),
    st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    st.tuples(st.just("crash"), st.just(0), st.just(0)),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=30))
def test_lso_and_aborted_index_follow_the_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]],
) -> None:
    h = Harness(tmp_path_factory.mktemp("txn") / "t-0")
    for op, pid, n in ops:
        if op == "txn":
            h.txn(pid, n)
        elif op == "data":
            h.data(n)
        elif op in ("commit", "abort"):
            h.end(pid, op == "commit")
        elif op == "roll":
            h.part.log.roll()
        elif op == "truncate":
            h.truncate(h.part.log.log_end_offset * n // 100)
        else:
            h.reopen(crash=op == "crash")
        check(h.part, h.batches)
    h.part.log.close()


def test_open_transaction_holds_the_lso_until_its_marker(tmp_path: Path) -> None:
    part = leader(open_log(tmp_path / "t-0"))
    p = Producer(5)
    part.append_as_leader(plain([b"a"]), required_acks=1)
    part.append_as_leader(p.batch([b"t1", b"t2"]), required_acks=1)
    part.append_as_leader(plain([b"b"]), required_acks=1)
    assert part.high_watermark == 4 and part.last_stable_offset == 1
    assert read_committed(part) == [b"a"]
    entry = part.producer_state.entry(5)
    assert entry is not None and entry.current_txn_first_offset == 1
    r = part.write_marker(producer_id=5, producer_epoch=0, coordinator_epoch=3, committed=True)
    assert r.base_offset == 4 and part.last_stable_offset == 5
    assert read_committed(part) == [b"a", b"t1", b"t2", b"b"]
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 3
    assert list(part.log.all_aborted_txns()) == []
    part.log.close()


def test_unreplicated_marker_keeps_the_lso_at_the_transaction_start(tmp_path: Path) -> None:
    part = Partition(topic="t", index=0, topic_id=None, log=open_log(tmp_path / "t-0"),
                     clock=lambda: TS, node_id=1)
    part.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1, 2), isr=(1, 2),
                       min_insync_replicas=1)
    p = Producer(5)
    part.append_as_leader(p.batch([b"t"]), required_acks=-1)
    part.update_follower(2, 1)
    part.write_marker(producer_id=5, producer_epoch=0, coordinator_epoch=0, committed=False)
    assert part.high_watermark == 1 and part.last_stable_offset == 0
    part.update_follower(2, 2)
    assert part.high_watermark == 2 and part.last_stable_offset == 2
    assert list(part.log.all_aborted_txns()) == [AbortedTxn(5, 0, 1, 2)]
    part.log.close()


def test_truncation_below_an_abort_marker_reopens_the_transaction(tmp_path: Path) -> None:
    h = Harness(tmp_path / "t-0", segment_bytes=1 << 20)
    h.txn(10, 2)
    h.data(1)
    h.end(10, committed=False)
    h.data(1)
    check(h.part, h.batches)
    assert [e.last_offset for e in h.part.log.all_aborted_txns()] == [3]
    h.truncate(3)  # the marker goes: the transaction is open again from offset 0
    check(h.part, h.batches)
    assert list(h.part.log.all_aborted_txns()) == []
    assert h.part.last_stable_offset == 0
    assert not list((tmp_path / "t-0").glob("*.txnindex"))
    h.end(10, committed=True)
    check(h.part, h.batches)
    h.part.log.close()


def test_fencing_and_transaction_state_errors(tmp_path: Path) -> None:
    part = leader(open_log(tmp_path / "t-0"))
    old = Producer(5, epoch=0)
    part.append_as_leader(old.batch([b"a"]), required_acks=1)
    new = Producer(5, epoch=1)
    part.append_as_leader(new.batch([b"b"]), required_acks=1)  # epoch bump: seq from 0

    def error(fn: object) -> ErrorCode:
        with pytest.raises(KafkaError) as info:
            fn()  # type: ignore[operator]
        return info.value.error_code

    assert error(lambda: part.append_as_leader(old.batch([b"z"]), required_acks=1)) \
        is ErrorCode.invalid_producer_epoch
    # a non-transactional batch while the producer's transaction is open
    assert error(lambda: part.append_as_leader(new.batch([b"c"], transactional=False),
                                               required_acks=1)) is ErrorCode.invalid_txn_state
    assert error(lambda: part.write_marker(producer_id=5, producer_epoch=0,
                                           coordinator_epoch=0, committed=True)) \
        is ErrorCode.invalid_producer_epoch
    part.write_marker(producer_id=5, producer_epoch=1, coordinator_epoch=4, committed=False)
    assert error(lambda: part.write_marker(producer_id=5, producer_epoch=1,
                                           coordinator_epoch=3, committed=False)) \
        is ErrorCode.transaction_coordinator_fenced
    # the transaction opened at epoch 0 and went on at epoch 1 is one aborted transaction
    assert list(part.log.all_aborted_txns()) == [AbortedTxn(5, 0, 2, 3)]
    part.log.close()


def test_snapshot_keeps_open_transactions_and_coordinator_epochs() -> None:
    state = ProducerStateManager()
    log = Log(state)
    h = hdr(pid=3, seq=0, n=2)
    log.write(h.__class__(**{**{f: getattr(h, f) for f in h.__dataclass_fields__},
                             "attributes": 0x10}))
    entry = state.entry(3)
    assert entry is not None and entry.current_txn_first_offset == 0
    entry.coordinator_epoch = 7
    fresh = ProducerStateManager()
    assert fresh.load_snapshot(state.snapshot(2)) == 2
    assert fresh.producers == state.producers and fresh.ongoing_txns == {3: 0}
    assert fresh.first_unstable_offset(10) == 0


def test_expiration_never_forgets_a_producer_with_an_open_transaction(tmp_path: Path) -> None:
    part = leader(open_log(tmp_path / "t-0"))
    part.append_as_leader(Producer(5).batch([b"a"]), required_acks=1)
    part.append_as_leader(build_batch([Record(timestamp=TS, key=b"k", value=b"x")],
                                      producer_id=6, producer_epoch=0, base_sequence=0),
                          required_acks=1)
    assert part.producer_state.expire(TS + 10**9, 1000) == [6]
    assert part.producer_state.ongoing_txns == {5: 0}
    part.log.close()


# ---- seeded crash tests: the log cut mid-transaction ----------------------------------


def _build_log(path: Path, rng: random.Random) -> list[Written]:
    h = Harness(path, segment_bytes=900)
    for _ in range(60):
        pid = rng.choice([10, 11, 12])
        roll = rng.random()
        if roll < 0.45:
            h.txn(pid, rng.randint(1, 3))
        elif roll < 0.6:
            h.data(rng.randint(1, 2))
        elif pid in h.part.producer_state.ongoing_txns:
            h.end(pid, rng.random() < 0.5)
    h.part.log.flush()
    return h.batches  # the log is left open: a crash, no snapshot, no clean marker


@pytest.mark.parametrize("seed", range(12))
def test_crash_cut_mid_transaction_recovers_open_txns_and_lso(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    src = tmp_path / "src" / "t-0"
    batches = _build_log(src, rng)
    dst = tmp_path / "crashed" / "t-0"
    shutil.copytree(src, dst)
    logs = sorted(dst.glob("*.log"))
    # cut the last segment at a random byte; lose some index files (never fsynced)
    victim = logs[-1]
    size = victim.stat().st_size
    cut = rng.randint(0, size)
    with victim.open("r+b") as f:
        f.truncate(cut)
    for p in dst.glob("*.txnindex"):
        if rng.random() < 0.5:
            p.unlink()
    part = leader(open_log(dst, clean=False, segment_bytes=900))
    end = part.log.log_end_offset
    surviving = [b for b in batches if b.last < end]
    assert all(b.last < end for b in surviving)
    check(part, surviving)
    # recovery rebuilt the index entries it dropped, in Kafka's file format on disk
    on_disk = []
    for p in sorted(dst.glob("*.txnindex")):
        on_disk += decode_entries(p.read_bytes())
    assert on_disk == list(part.log.all_aborted_txns())
    part.log.close()


# ---- the cleaner ----------------------------------------------------------------------


def test_cleaner_drops_aborted_data_keeps_markers_and_stops_at_open_transactions(
    tmp_path: Path,
) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=500, index_interval_bytes=64,
                    min_cleanable_dirty_ratio=0.01, file_delete_delay_ms=0)
    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), cfg, clock=lambda: TS)
    part = leader(plog)
    p1, p2, p3 = Producer(1), Producer(2), Producer(3)

    def keyed(p: Producer, key: bytes, value: bytes) -> bytes:
        b = build_batch([Record(timestamp=TS, key=key, value=value)], producer_id=p.pid,
                        producer_epoch=0, base_sequence=p.seq, is_transactional=True)
        p.seq += 1
        return b

    part.append_as_leader(plain([b"x"]), required_acks=1)                    # k: x
    part.append_as_leader(keyed(p1, b"k", b"aborted-1"), required_acks=1)
    part.append_as_leader(keyed(p1, b"j", b"aborted-2"), required_acks=1)
    part.write_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0, committed=False)
    part.append_as_leader(keyed(p2, b"j", b"committed"), required_acks=1)
    part.write_marker(producer_id=2, producer_epoch=0, coordinator_epoch=0, committed=True)
    part.append_as_leader(keyed(p1, b"m", b"last-of-p1"), required_acks=1)
    part.write_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0, committed=False)
    open_from = part.append_as_leader(keyed(p3, b"k", b"open"), required_acks=1).base_offset
    for i in range(12):
        part.append_as_leader(plain([b"filler%d" % i]), required_acks=1)
    assert len(plog.segments) > 3
    before_committed = read_committed(part)
    aborted_before = list(plog.all_aborted_txns())
    result = clean_log(plog, TS, 0)
    assert result is not None
    first_dirty, _ = result
    assert first_dirty <= open_from  # nothing from the open transaction on is cleaned
    values = [r.value for r in plog.read_records(0)]
    assert b"aborted-1" not in values and b"aborted-2" not in values
    assert b"last-of-p1" not in values and b"committed" in values and b"open" in values
    # markers kept; p1's last batch kept empty (its producer state survives)
    data = fetch_all(part, 0, committed=False)
    heads = [h for _, h in iter_batch_headers(data, validate_crc=True)]
    assert sum(h.is_control for h in heads) == 3
    assert any(h.producer_id == 1 and h.records_count == 0 for h in heads)
    # this pass met the aborted batches (it dropped them): markers and entries stay
    assert list(plog.all_aborted_txns()) == aborted_before
    assert read_committed(part) == before_committed
    plog.close()


def test_cleaner_removes_markers_past_their_delete_horizon(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=64,
                    min_cleanable_dirty_ratio=0.01, file_delete_delay_ms=0,
                    delete_retention_ms=1000)
    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), cfg, clock=lambda: TS)
    part = leader(plog)
    p1, p2 = Producer(1), Producer(2)

    def keyed(p: Producer, value: bytes) -> bytes:
        b = build_batch([Record(timestamp=TS, key=b"k", value=value)], producer_id=p.pid,
                        producer_epoch=0, base_sequence=p.seq, is_transactional=True)
        p.seq += 1
        return b

    part.append_as_leader(keyed(p1, b"aborted"), required_acks=1)             # 0
    part.write_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0,
                      committed=False)                                          # 1
    part.append_as_leader(keyed(p2, b"committed"), required_acks=1)           # 2
    part.write_marker(producer_id=2, producer_epoch=0, coordinator_epoch=0,
                      committed=True)                                           # 3
    # the producers' last batches come later, so neither old batch is kept empty
    part.append_as_leader(keyed(p1, b"p1-later"), required_acks=1)            # 4
    part.write_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0, committed=True)
    part.append_as_leader(keyed(p2, b"p2-later"), required_acks=1)            # 6
    part.write_marker(producer_id=2, producer_epoch=0, coordinator_epoch=0, committed=True)
    for i in range(10):
        part.append_as_leader(plain([b"f%d" % i]), required_acks=1)

    def markers_below(offset: int) -> list[tuple[int, bool]]:
        data = fetch_all(part, 0, committed=False)
        return [(h.base_offset, h.has_delete_horizon)
                for _, h in iter_batch_headers(data, validate_crc=True)
                if h.is_control and h.base_offset < offset]

    # pass 1 drops the aborted data; it met a batch of each transaction: markers stay
    assert clean_log(plog, TS, 0) is not None
    assert markers_below(4) == [(1, False), (3, False)]
    assert b"aborted" not in [r.value for r in plog.read_records(0)]
    assert [e.first_offset for e in plog.all_aborted_txns()] == [0]
    # pass 2 meets no batch of either: both get a delete horizon, the entry goes
    assert clean_log(plog, TS, 0) is not None
    assert markers_below(4) == [(1, True), (3, True)]
    assert list(plog.all_aborted_txns()) == []
    # before the horizon they stay; past it they go
    assert clean_log(plog, TS + 500, 0) is not None
    assert markers_below(4) == [(1, True), (3, True)]
    assert clean_log(plog, TS + 2000, 0) is not None
    assert markers_below(4) == []
    # what compaction kept of the committed data reads the same at either isolation level
    assert read_committed(part) == [r.value for r in plog.read_records(0)]
    # the producer state read back from the cleaned log has no open transaction
    part.log.close()
    again = leader(PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), cfg,
                                clock=lambda: TS, clean_shutdown=False))
    assert again.producer_state.ongoing_txns == {}
    assert again.last_stable_offset == again.high_watermark
    again.log.close()


def test_follower_tracks_transactions_and_keeps_them_when_it_becomes_leader(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path / "leader", segment_bytes=1 << 20)
    h.txn(10, 2)
    h.end(10, committed=False)
    h.txn(11, 1)
    h.data(1)
    source = h.part
    plog = open_log(tmp_path / "follower")
    follower = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: TS,
                         node_id=2)
    follower.become_follower(leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1, 2),
                             isr=(1, 2))
    follower.append_as_follower(fetch_all(source, 0, committed=False))
    follower.update_follower_high_watermark(source.high_watermark)
    assert follower.producer_state.ongoing_txns == {11: 3}
    assert list(plog.all_aborted_txns()) == list(source.log.all_aborted_txns())
    assert follower.last_stable_offset == 3
    follower.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(2,),
                           min_insync_replicas=1)
    assert follower.last_stable_offset == 3
    follower.write_marker(producer_id=11, producer_epoch=0, coordinator_epoch=1,
                          committed=True)
    assert follower.last_stable_offset == follower.log.log_end_offset == 6
    source.log.close()
    plog.close()


def test_lso_never_below_the_log_start(tmp_path: Path) -> None:
    h = Harness(tmp_path / "t-0", segment_bytes=1 << 20)
    h.data(1)
    h.txn(10, 1)
    h.data(2)
    assert h.part.last_stable_offset == 1
    h.part.log.delete_records_before(3)
    assert h.part.last_stable_offset == 3
    h.part.log.close()
