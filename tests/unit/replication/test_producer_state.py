"""Idempotent-producer state: the pure rules (broker.replication.producer_state), then the
partition wiring on a real PartitionLog (leader checks, follower appends, truncation,
rebuild when a replica is opened)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

import broker.replication.partition as partition_mod
from broker.errors import KafkaError
from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.protocol.legacy import build_message_set
from broker.protocol.records import (
    CONTROL_MASK,
    BatchHeader,
    Record,
    build_batch,
    iter_batch_headers,
)
from broker.replication.partition import Partition
from broker.replication.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateManager,
    in_sequence,
    increment_sequence,
)

TS = 1_700_000_000_000
PID = 1000


def hdr(pid: int = PID, epoch: int = 0, seq: int = 0, n: int = 1, offset: int = 0,
        ts: int = TS, control: bool = False) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=CONTROL_MASK if control else 0, last_offset_delta=n - 1,
        base_timestamp=ts, max_timestamp=ts, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, records_count=n,
    )


class Log:
    """Assigns offsets like a log would, so tests can drive on_append."""

    def __init__(self, state: ProducerStateManager) -> None:
        self.state = state
        self.next_offset = 0

    def write(self, h: BatchHeader) -> BatchHeader:
        written = BatchHeader(
            self.next_offset, h.batch_length, 0, 2, 0, h.attributes, h.last_offset_delta,
            h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
            h.base_sequence, h.records_count,
        )
        self.next_offset = written.next_offset
        self.state.on_append([written])
        return written

    def produce(self, h: BatchHeader) -> BatchMetadata | BatchHeader:
        dup = self.state.validate([h])
        return dup if dup is not None else self.write(h)


def error_of(state: ProducerStateManager, *batches: BatchHeader) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        state.validate(list(batches))
    return info.value.error_code


# ---- sequence arithmetic ---------------------------------------------------------------


def test_increment_sequence_wraps_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert increment_sequence(INT32_MAX - 2, 2) == INT32_MAX
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(-1, 0)
    assert not in_sequence(INT32_MAX, 1)
    assert not in_sequence(4, 6)


# ---- validation rules --------------------------------------------------------------------


def test_unknown_producer_may_start_at_any_sequence_then_must_follow_on() -> None:
    state = ProducerStateManager()
    log = Log(state)
    assert state.validate([hdr(seq=42, n=3)]) is None
    log.write(hdr(seq=42, n=3))
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 0 and entry.last_seq == 44
    assert state.validate([hdr(seq=45)]) is None
    assert error_of(state, hdr(seq=46)) is ErrorCode.out_of_order_sequence_number
    assert error_of(state, hdr(seq=44)) is ErrorCode.out_of_order_sequence_number


def test_duplicate_of_each_of_the_last_five_returns_the_original_offsets() -> None:
    state = ProducerStateManager()
    log = Log(state)
    written = [log.write(hdr(seq=2 * i, n=2)) for i in range(7)]
    end = log.next_offset
    for w in written[-NUM_BATCHES_TO_RETAIN:]:
        dup = state.validate([hdr(seq=w.base_sequence, n=2)])
        assert dup == BatchMetadata(w.base_sequence, w.base_sequence + 1, w.base_offset,
                                    w.last_offset, TS)
    # Older than the five cached batches: no longer recognised, and out of sequence.
    for w in written[:-NUM_BATCHES_TO_RETAIN]:
        assert error_of(state, hdr(seq=w.base_sequence, n=2)) is \
            ErrorCode.out_of_order_sequence_number
    # Same first sequence but a different range is not the same batch.
    assert error_of(state, hdr(seq=written[-1].base_sequence, n=1)) is \
        ErrorCode.out_of_order_sequence_number
    assert log.next_offset == end


def test_older_epoch_is_invalid_producer_epoch_even_for_a_retry() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(epoch=0, seq=0))
    log.write(hdr(epoch=1, seq=0))
    assert error_of(state, hdr(epoch=0, seq=1)) is ErrorCode.invalid_producer_epoch
    assert error_of(state, hdr(epoch=0, seq=0)) is ErrorCode.invalid_producer_epoch


def test_new_epoch_must_start_at_zero_and_forgets_the_old_batches() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(epoch=3, seq=0, n=5))
    assert error_of(state, hdr(epoch=4, seq=5)) is ErrorCode.out_of_order_sequence_number
    assert error_of(state, hdr(epoch=4, seq=1)) is ErrorCode.out_of_order_sequence_number
    assert state.validate([hdr(epoch=4, seq=0)]) is None
    log.write(hdr(epoch=4, seq=0, n=2))
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 4 and len(entry.batches) == 1
    assert state.validate([hdr(epoch=4, seq=2)]) is None


def test_sequence_wraps_from_int32_max_to_zero() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(seq=INT32_MAX - 1, n=2))  # ends at INT32_MAX
    assert error_of(state, hdr(seq=1)) is ErrorCode.out_of_order_sequence_number
    assert state.validate([hdr(seq=0, n=3)]) is None
    # A batch that itself crosses the wrap: INT32_MAX-1, INT32_MAX, 0.
    state2 = ProducerStateManager()
    log2 = Log(state2)
    w = log2.write(hdr(seq=INT32_MAX - 1, n=3))
    entry = state2.entry(PID)
    assert entry is not None and entry.last_seq == 0
    dup = state2.validate([hdr(seq=INT32_MAX - 1, n=3)])
    assert dup is not None and dup.first_offset == w.base_offset
    assert error_of(state2, hdr(seq=0)) is ErrorCode.out_of_order_sequence_number
    assert state2.validate([hdr(seq=1)]) is None


def test_batches_of_one_append_are_checked_in_order() -> None:
    state = ProducerStateManager()
    Log(state).write(hdr(seq=0, n=2))
    assert state.validate([hdr(seq=2, n=2), hdr(seq=4)]) is None
    assert error_of(state, hdr(seq=2, n=2), hdr(seq=5)) is \
        ErrorCode.out_of_order_sequence_number
    # Unknown producer: the first batch sets where the second must go on.
    assert error_of(state, hdr(pid=7, seq=10), hdr(pid=7, seq=12)) is \
        ErrorCode.out_of_order_sequence_number
    assert state.validate([hdr(pid=7, seq=10), hdr(pid=7, seq=11)]) is None
    assert state.entry(7) is None  # validation alone changes nothing


def test_a_retry_mixed_with_other_batches_is_refused() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(seq=0, n=2))
    assert error_of(state, hdr(seq=2), hdr(seq=0, n=2)) is ErrorCode.invalid_record
    assert error_of(state, hdr(seq=0, n=2), hdr(pid=5, seq=0)) is ErrorCode.invalid_record
    assert state.validate([hdr(seq=0, n=2)]) is not None


def test_idempotent_batch_without_sequence_is_invalid_record() -> None:
    state = ProducerStateManager()
    assert error_of(state, hdr(seq=-1)) is ErrorCode.invalid_record


def test_batches_without_producer_id_and_control_batches_are_not_checked() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(seq=0))
    assert state.validate([hdr(pid=-1, epoch=-1, seq=-1)]) is None
    assert state.validate([hdr(seq=9, control=True)]) is None
    log.write(hdr(pid=-1, epoch=-1, seq=-1))
    assert len(state) == 1


def test_follower_appends_are_taken_without_checks() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(epoch=5, seq=0, n=3))
    log.write(hdr(epoch=5, seq=10))  # a gap the leader accepted (unknown to us before)
    log.write(hdr(epoch=2, seq=7))   # even an older epoch: the leader's log is the truth
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 2 and entry.last_seq == 7
    assert len(entry.batches) == 1


def test_control_batch_moves_the_epoch_without_caching_a_batch() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(epoch=0, seq=0))
    log.write(hdr(epoch=1, seq=-1, control=True))
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 1 and not entry.batches
    assert error_of(state, hdr(epoch=0, seq=1)) is ErrorCode.invalid_producer_epoch
    assert error_of(state, hdr(epoch=1, seq=3)) is ErrorCode.out_of_order_sequence_number
    assert state.validate([hdr(epoch=1, seq=0)]) is None


def test_rebuild_replays_headers_to_the_same_state() -> None:
    state = ProducerStateManager()
    log = Log(state)
    written = [log.write(hdr(pid=p, epoch=e, seq=s, n=2))
               for p, e, s in [(1, 0, 0), (2, 0, 5), (1, 0, 2), (1, 1, 0), (2, 0, 7)]]
    fresh = ProducerStateManager()
    fresh.rebuild((h, None) for h in written)
    assert fresh.producers == state.producers
    fresh.rebuild((h, None) for h in written[:2])
    e1 = fresh.entry(1)
    assert e1 is not None and e1.epoch == 0 and e1.last_seq == 1


def test_expire_forgets_idle_producers_only() -> None:
    state = ProducerStateManager()
    log = Log(state)
    log.write(hdr(pid=1, seq=0, ts=TS))
    log.write(hdr(pid=2, seq=0, ts=TS + 10_000))
    log.write(hdr(pid=3, seq=0, ts=-1))
    assert state.expire(TS + 10_500, 1000) == [1]
    assert state.entry(1) is None and state.entry(2) is not None and state.entry(3) is not None
    # Forgotten means unknown: it may start anywhere again.
    assert state.validate([hdr(pid=1, seq=77)]) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 6)), min_size=1, max_size=40))
def test_retries_never_duplicate_and_answer_the_original_offsets(
    plan: list[tuple[int, int]],
) -> None:
    """A producer sends batches in order; before each new batch it may retry any of its
    last few sends. Every batch lands once, in order, and a retry gets its first offsets."""
    state = ProducerStateManager()
    log = Log(state)
    sent: list[tuple[int, int, int]] = []  # (first seq, n, base offset)
    seq = 0
    for n, retry_back in plan:
        if sent and retry_back:
            back = min(retry_back, len(sent))
            first, m, base = sent[-back]
            if back <= NUM_BATCHES_TO_RETAIN:
                result = log.produce(hdr(seq=first, n=m))
                assert isinstance(result, BatchMetadata) and result.first_offset == base
            else:
                with pytest.raises(KafkaError) as info:
                    log.produce(hdr(seq=first, n=m))
                assert info.value.error_code is ErrorCode.out_of_order_sequence_number
        w = log.produce(hdr(seq=seq, n=n))
        assert isinstance(w, BatchHeader)
        sent.append((seq, n, w.base_offset))
        seq += n
    assert log.next_offset == seq


def test_retry_older_than_the_cache_is_refused_not_appended() -> None:
    state = ProducerStateManager()
    log = Log(state)
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        log.write(hdr(seq=i))
    with pytest.raises(KafkaError):
        log.produce(hdr(seq=0))
    assert log.next_offset == NUM_BATCHES_TO_RETAIN + 1


# ---- the partition: leader path, follower appends, truncation, reopening ------------------


def idem_batch(seq: int, n: int = 1, pid: int = PID, epoch: int = 0, tag: bytes = b"v") -> bytes:
    return build_batch(
        [Record(timestamp=TS + i, key=b"k", value=tag + b"%d" % (seq + i)) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


def open_log(path: Path, config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(path, TopicPartition("t", 0), config or LogConfig(), clock=lambda: TS)


def leader(plog: PartitionLog) -> Partition:
    part = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: TS, node_id=1)
    part.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,),
                       min_insync_replicas=1)
    return part


def all_headers(plog: PartitionLog) -> list[BatchHeader]:
    data = plog.read(plog.log_start_offset, 1 << 30, plog.log_end_offset).read_bytes()
    return [h for _, h in iter_batch_headers(data, validate_crc=True)]


def test_leader_retry_is_acknowledged_with_the_original_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    first = part.append_as_leader(idem_batch(0, 3), required_acks=-1)
    part.append_as_leader(idem_batch(3, 2), required_acks=-1)
    again = part.append_as_leader(idem_batch(0, 3), required_acks=-1)
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert plog.log_end_offset == 5
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(idem_batch(9), required_acks=-1)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    assert plog.log_end_offset == 5
    assert [h.base_sequence for h in all_headers(plog)] == [0, 3]
    plog.close()


def test_corrupt_retry_is_refused_not_acknowledged(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    part.append_as_leader(idem_batch(0, 2), required_acks=1)
    bad = bytearray(idem_batch(0, 2))
    bad[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(bytes(bad), required_acks=1)
    assert info.value.error_code is ErrorCode.corrupt_message
    assert part.append_as_leader(idem_batch(0, 2), required_acks=1).base_offset == 0
    assert plog.log_end_offset == 2
    plog.close()


def test_follower_appends_feed_the_state_a_new_leader_checks(tmp_path: Path) -> None:
    source = leader(open_log(tmp_path / "leader"))
    for seq in (0, 2, 4):
        source.append_as_leader(idem_batch(seq, 2), required_acks=1)
    data = source.log.read(0, 1 << 20, source.log.log_end_offset).read_bytes()
    plog = open_log(tmp_path / "follower")
    part = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: TS, node_id=2)
    part.become_follower(leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1, 2),
                         isr=(1, 2))
    plog.append_as_follower(data)
    entry = part.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 5 and entry.last_offset == 5
    part.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(2,),
                       min_insync_replicas=1)
    assert part.append_as_leader(idem_batch(2, 2), required_acks=1).base_offset == 2
    assert part.append_as_leader(idem_batch(6), required_acks=1).base_offset == 6
    assert plog.log_end_offset == 7
    source.log.close()
    plog.close()


def test_truncation_forgets_batches_past_the_new_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    for seq in (0, 1, 2):
        part.append_as_leader(idem_batch(seq), required_acks=1)
    plog.truncate_to(2)
    entry = part.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 1
    # The truncated batch is no duplicate any more: it is written again at offset 2.
    assert part.append_as_leader(idem_batch(2), required_acks=1).base_offset == 2
    assert plog.log_end_offset == 3
    plog.truncate_fully_and_start_at(10)
    assert len(part.producer_state) == 0
    plog.close()


def test_reopened_replica_rebuilds_its_state_from_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    part = leader(plog)
    for seq in range(0, 12, 2):
        part.append_as_leader(idem_batch(seq, 2, pid=PID), required_acks=1)
        part.append_as_leader(idem_batch(seq // 2, 1, pid=PID + 1), required_acks=1)
    assert len(plog.segments) > 2
    before = {pid: (e.epoch, list(e.batches)) for pid, e in part.producer_state.producers.items()}
    plog.close()
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    part = leader(plog)
    after = {pid: (e.epoch, list(e.batches)) for pid, e in part.producer_state.producers.items()}
    assert after == before
    end = plog.log_end_offset
    assert part.append_as_leader(idem_batch(10, 2), required_acks=1).base_offset < end
    assert plog.log_end_offset == end
    plog.close()


def test_rebuild_reads_only_a_bounded_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = LogConfig(segment_bytes=400, index_interval_bytes=1)
    plog = open_log(tmp_path / "t-0", config)
    part = leader(plog)
    for pid in range(100, 130):  # one batch per producer, oldest producer first
        part.append_as_leader(idem_batch(0, pid=pid), required_acks=1)
    size = sum(s.size for s in plog.segments)
    one = len(idem_batch(0, pid=100))
    plog.close()
    monkeypatch.setattr(partition_mod, "PRODUCER_STATE_SCAN_BYTES", 5 * one)
    plog = open_log(tmp_path / "t-0", config)
    part = leader(plog)
    known = sorted(part.producer_state.producers)
    assert size > 20 * one
    assert 5 <= len(known) <= 8 and known[-1] == 129 and known == list(range(known[0], 130))
    # A producer outside the window is unknown: it may go on at any sequence.
    assert part.append_as_leader(idem_batch(5, pid=100), required_acks=1).base_offset == 30
    plog.close()


def test_idempotent_batch_behind_a_plain_one_is_still_checked(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    plain = build_batch([Record(timestamp=TS, value=b"p")])
    part.append_as_leader(plain + idem_batch(0), required_acks=1)
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(plain + idem_batch(5), required_acks=1)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(plain + plain[:-3], required_acks=1)
    assert info.value.error_code is ErrorCode.corrupt_message
    assert plog.log_end_offset == 2
    plog.close()


def test_magic_0_and_1_records_pass_the_producer_check(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    part.append_as_leader(idem_batch(0), required_acks=1)
    for magic in (0, 1):
        legacy = build_message_set([(None, b"old", TS)], magic=magic)
        assert part.append_as_leader(legacy, required_acks=1).base_offset == 1 + magic
    assert part.append_as_leader(idem_batch(1), required_acks=1).base_offset == 3
    plog.close()


def test_log_checks_come_before_the_producer_checks(tmp_path: Path) -> None:
    """Kafka's UnifiedLog.append: a batch the log refuses is refused for that, whatever its
    sequence says (here a corrupt CRC on an out-of-order batch and on a retry)."""
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    first = idem_batch(0)
    part.append_as_leader(first, required_acks=1)
    for batch in (idem_batch(7), first):
        corrupt = bytearray(batch)
        corrupt[-1] ^= 0xFF
        with pytest.raises(KafkaError) as info:
            part.append_as_leader(bytes(corrupt), required_acks=1)
        assert info.value.error_code is ErrorCode.corrupt_message
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(idem_batch(7), required_acks=1)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    assert part.append_as_leader(first, required_acks=1).base_offset == 0  # the retry
    assert plog.log_end_offset == 1
    plog.close()


# ---- snapshots at close ---------------------------------------------------------------------


def sample_state() -> ProducerStateManager:
    state = ProducerStateManager()
    log = Log(state)
    for i in range(7):
        log.write(hdr(pid=1, seq=2 * i, n=2))
    log.write(hdr(pid=2, epoch=3, seq=INT32_MAX, n=2, ts=-1))
    log.write(hdr(pid=3, epoch=1, seq=0, control=True))
    return state


def test_snapshot_round_trip() -> None:
    state = sample_state()
    data = state.snapshot(42)
    fresh = ProducerStateManager()
    assert fresh.load_snapshot(data) == 42
    assert fresh.producers == state.producers
    assert fresh.load_snapshot(ProducerStateManager().snapshot(0)) == 0 and len(fresh) == 0


def test_malformed_snapshots_are_refused_and_change_nothing() -> None:
    data = sample_state().snapshot(42)
    target = sample_state()
    before = {p: (e.epoch, list(e.batches)) for p, e in target.producers.items()}
    bad: list[bytes] = [data[:n] for n in range(len(data))]
    bad += [data + b"\0", b"\x00\x03" + data[2:]]
    for i in range(0, len(data), 7):
        flipped = bytearray(data)
        flipped[i] ^= 0x40
        bad.append(bytes(flipped))
    for blob in bad:
        with pytest.raises(ValueError):
            target.load_snapshot(blob)
    assert {p: (e.epoch, list(e.batches)) for p, e in target.producers.items()} == before


def test_clean_close_snapshot_restores_state_beyond_the_scan_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    for seq in (0, 2, 4):
        part.append_as_leader(idem_batch(seq, 2), required_acks=1)
    part.close()
    plog.close()
    assert [p.name for p in (tmp_path / "t-0").glob("*.snapshot")] == [f"{6:020d}.snapshot"]
    monkeypatch.setattr(partition_mod, "PRODUCER_STATE_SCAN_BYTES", 0)  # no scanning at all
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    assert not list((tmp_path / "t-0").glob("*.snapshot"))  # used once
    assert part.append_as_leader(idem_batch(2, 2), required_acks=1).base_offset == 2
    assert plog.log_end_offset == 6
    plog.close()
    # Without the snapshot (this open) and with no window, the producer is unknown.
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    assert len(part.producer_state) == 0
    plog.close()


def test_snapshot_not_at_the_log_end_or_corrupt_is_ignored(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    part.append_as_leader(idem_batch(0), required_acks=1)
    part.close()  # snapshot at offset 1
    plog.append_as_leader(idem_batch(1), 0, TS)  # written after it, without the partition
    plog.close()
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    entry = part.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 1  # from the scan, not the old snapshot
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    part.close()
    plog.close()
    snap = tmp_path / "t-0" / f"{2:020d}.snapshot"
    snap.write_bytes(snap.read_bytes()[:-1])
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    entry = part.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 1 and not snap.exists()
    plog.close()


def test_truncation_removes_snapshots(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    for seq in (0, 1, 2):
        part.append_as_leader(idem_batch(seq), required_acks=1)
    part.close()
    assert list((tmp_path / "t-0").glob("*.snapshot"))
    plog.truncate_to(1)
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    plog.close()


def test_a_never_written_partition_takes_a_new_producer_only_from_sequence_zero() -> None:
    # KAFKA-15591: two requests in flight to a just-created partition, the first refused
    # while the leader was not ready; the second must not be appended ahead of it
    state = ProducerStateManager()
    with pytest.raises(KafkaError) as info:
        state.validate([hdr(seq=17, n=5)], never_written=True)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    assert "never held a record" in str(info.value)
    assert state.validate([hdr(seq=0, n=17), hdr(seq=17, n=5)], never_written=True) is None
    # a partition that has held records still takes a producer it lost the state of
    assert state.validate([hdr(seq=17, n=5)], never_written=False) is None


def test_a_leader_with_an_empty_log_refuses_a_first_sequence_above_zero(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    part = leader(plog)
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(idem_batch(3, 2), required_acks=-1)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    assert plog.log_end_offset == 0
    assert part.append_as_leader(idem_batch(0, 3), required_acks=-1).base_offset == 0
    assert part.append_as_leader(idem_batch(3, 2), required_acks=-1).base_offset == 3
    plog.close()
