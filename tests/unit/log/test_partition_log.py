import os
import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode
from loghelpers import batch

from broker.errors import KafkaError
from broker.log import LogConfig
from broker.log.checkpoints import read_partition_metadata
from broker.protocol.compression import Compression
from broker.protocol.records import (
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batch_headers,
    parse_header,
    whole_batches_length,
)


def all_values(plog):
    return [(r.offset, r.value) for r in plog.read_records(plog.log_start_offset)]


def test_append_assigns_offsets_and_epoch_in_place(open_log, clock):
    plog = open_log()
    buf = bytearray(batch(3))
    r = plog.append_as_leader(buf, leader_epoch=4, now_ms=clock.now)
    assert (r.base_offset, r.last_offset, r.records_count, r.log_append_time_ms) == (0, 2, 3, -1)
    r2 = plog.append_as_leader(batch(2, tag=1), leader_epoch=4, now_ms=clock.now)
    assert (r2.base_offset, r2.last_offset) == (3, 4)
    assert plog.log_end_offset == 5 and plog.latest_epoch == 4
    # The caller's writable buffer was patched, not copied.
    h = parse_header(buf)
    assert h.base_offset == 0 and h.partition_leader_epoch == 4
    data = plog.read(0, 1 << 20, plog.log_end_offset).read_bytes()
    hs = [h for _, h in iter_batch_headers(data, validate_crc=True)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 4), (3, 4)]


def test_bytes_on_disk_are_exactly_the_batches(open_log, clock, tmp_path):
    plog = open_log()
    b1, b2 = bytearray(batch(3)), bytearray(batch(1, tag=2))
    plog.append_as_leader(b1, 0, clock.now)
    plog.append_as_leader(b2, 0, clock.now)
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == bytes(b1 + b2)


def test_log_append_time(open_log, clock):
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    r = plog.append_as_leader(batch(2, ts=5), 0, now_ms=777)
    assert r.log_append_time_ms == 777 and r.max_timestamp == 777
    recs = plog.read_records(0)
    assert [x.timestamp for x in recs] == [777, 777]
    h = parse_header(plog.read(0, 1000, 10).read_bytes())
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME


def test_rejections_leave_the_log_unchanged(open_log, clock):
    plog = open_log(LogConfig(max_message_bytes=200, segment_bytes=100_000))
    plog.append_as_leader(batch(1), 0, clock.now)
    size = plog.size_in_bytes
    big = batch(1, size=500)
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(big, 0, clock.now)
    assert e.value.error_code == ErrorCode.message_too_large
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(bad, 0, clock.now)
    assert e.value.error_code == ErrorCode.corrupt_message
    for length in (-5, 2**31 - 1, 1 << 30):
        lying = bytearray(batch(1))
        struct.pack_into(">i", lying, 8, length)
        with pytest.raises(KafkaError) as e:
            plog.append_as_leader(lying, 0, clock.now)
        assert e.value.error_code == ErrorCode.corrupt_message
    assert plog.size_in_bytes == size and plog.log_end_offset == 1


def test_record_list_too_large_for_a_segment(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=300, max_message_bytes=10_000))
    records = batch(1, size=200) + batch(1, size=200)
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(records, 0, clock.now)
    assert e.value.error_code == ErrorCode.record_list_too_large


def test_timestamp_bounds(open_log, clock):
    plog = open_log(
        LogConfig(message_timestamp_after_max_ms=1000, message_timestamp_before_max_ms=5000)
    )
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(batch(1, ts=clock.now + 2000), 0, clock.now)
    assert e.value.error_code == ErrorCode.invalid_timestamp
    # Only the second record is too old: found by decoding.
    old = build_batch(
        [Record(timestamp=clock.now, value=b"a"), Record(timestamp=clock.now - 9000, value=b"b")]
    )
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(old, 0, clock.now)
    assert e.value.error_code == ErrorCode.invalid_timestamp
    plog.append_as_leader(batch(1, ts=clock.now + 500), 0, clock.now)
    assert plog.log_end_offset == 1


def test_compacted_topics_require_keys(open_log, clock):
    plog = open_log(LogConfig(cleanup_policy="compact"))
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(batch(1, key=None), 0, clock.now)
    assert e.value.error_code == ErrorCode.invalid_record
    plog.append_as_leader(batch(1, key=b"x"), 0, clock.now)


def test_topic_compression_type_recompresses(open_log, clock):
    plog = open_log(LogConfig(compression_type="zstd"))
    plog.append_as_leader(batch(3), 0, clock.now)
    plog.append_as_leader(batch(2, tag=1, compression=Compression.GZIP), 0, clock.now)
    data = plog.read(0, 1 << 20, 100).read_bytes()
    assert [h.compression for _, h in iter_batch_headers(data, validate_crc=True)] == [
        Compression.ZSTD
    ] * 2
    assert [r.offset for r in plog.read_records(0)] == [0, 1, 2, 3, 4]


def test_read_bounds(open_log, clock):
    plog = open_log()
    for i in range(30):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    leo = plog.log_end_offset
    assert leo == 60
    with pytest.raises(KafkaError) as e:
        plog.read(61, 100, 100)
    assert e.value.error_code == ErrorCode.offset_out_of_range
    assert plog.read(60, 100, 100).length == 0
    # max_offset (high watermark) is exclusive and cuts at batch boundaries.
    data = plog.read(0, 1 << 20, 4).read_bytes()
    assert [h.base_offset for _, h in iter_batch_headers(data, validate_crc=True)] == [0, 2]
    assert plog.read(4, 100, 4).length == 0
    # Reading from an offset inside a batch returns that whole batch.
    data = plog.read(5, 1, 60).read_bytes()
    (h,) = [h for _, h in iter_batch_headers(data, validate_crc=True)]
    assert h.base_offset == 4
    # min_one_batch=False with a tiny max_bytes gives a partial batch, as Kafka does.
    assert plog.read(4, 10, 60, min_one_batch=False).length == 10
    # Reads span segments one at a time; every offset is reachable.
    assert len(plog.segments) > 2
    assert [o for o, _ in all_values(plog)] == list(range(60))
    for off in range(60):
        data = plog.read(off, 1, 60).read_bytes()
        first = parse_header(data)
        assert first.base_offset <= off <= first.last_offset


def test_slice_survives_segment_deletion(open_log, clock):
    plog = open_log()
    for i in range(30):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    sl = plog.read(0, 1 << 20, plog.log_end_offset)
    expected = sl.read_bytes()
    plog.delete_records_before(plog.segments[2].base_offset)
    clock.advance(10_000)
    assert plog.delete_expired_files(clock.now) >= 2
    assert not any(p.name.startswith("00000000000000000000") for p in plog.dir.iterdir())
    assert sl.read_bytes() == expected
    assert os.pread(sl.fileno(), sl.length, sl.position) == expected


def test_time_roll_compares_record_timestamps_as_kafka(open_log, clock):
    """Kafka's LogSegment.timeWaitedForRoll: the appended batch's largest timestamp against
    the segment's first batch's. Records with old CreateTimes (a backfill, a mirror) stay in
    one segment however old they are; the wall clock does not roll them one per append."""
    plog = open_log(LogConfig(segment_ms=1000))
    old = clock.now - 10 * 24 * 3600 * 1000
    for i in range(5):
        plog.append_as_leader(batch(1, ts=old + i, tag=i), 0, clock.now)
    assert len(plog.segments) == 1
    clock.advance(5000)
    plog.append_as_leader(batch(1, ts=old + 900, tag=5), 0, clock.now)
    assert len(plog.segments) == 1  # 900 ms after the first record: not yet
    plog.append_as_leader(batch(1, ts=old + 1500, tag=6), 0, clock.now)
    assert len(plog.segments) == 2  # more than segment.ms after it


def test_rolls_on_size_time_and_index(open_log, clock, tmp_path):
    plog = open_log(
        LogConfig(
            segment_bytes=400, segment_ms=1000, index_interval_bytes=1, segment_index_bytes=24
        )
    )
    for i in range(3):
        plog.append_as_leader(batch(1, tag=i), 0, clock.now)
    # index holds 3 entries max (24 bytes / 8): the 4th index entry forces a roll
    assert len(plog.segments) == 1
    plog.append_as_leader(batch(1, tag=3), 0, clock.now)
    plog.append_as_leader(batch(1, tag=4), 0, clock.now)
    n = len(plog.segments)
    assert n >= 2
    # Rolled segments' index files are trimmed to their entries.
    first = plog.segments[0]
    assert os.path.getsize(first.offset_index.path) == 8 * len(first.offset_index)
    clock.advance(2000)
    plog.append_as_leader(batch(1, ts=clock.now, tag=9), 0, clock.now)
    assert len(plog.segments) == n + 1
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log")
    assert names[0] == "00000000000000000000.log" and all(len(x) == 24 for x in names)


def test_offset_for_timestamp_and_list_offsets(open_log, clock):
    plog = open_log()
    for i in range(20):
        plog.append_as_leader(
            batch(3, ts=1000 + 10 * i, tag=i), leader_epoch=i // 5, now_ms=clock.now
        )
    assert plog.offset_for_timestamp(1000) == (0, 1000, 0)
    assert plog.offset_for_timestamp(1051) == (16, 1051, 1)
    assert plog.offset_for_timestamp(1053) == (18, 1060, 1)
    assert plog.offset_for_timestamp(5000) is None
    assert plog.offset_for_timestamp(-2) == (0, -1, 0)
    assert plog.offset_for_timestamp(-1) == (60, -1, 3)
    assert plog.max_timestamp_offset() == (59, 1192, 3)
    # Records out of timestamp order inside a batch: max is the middle one.
    plog.append_as_leader(
        build_batch(
            [
                Record(timestamp=1, value=b"a"),
                Record(timestamp=9999, value=b"b"),
                Record(timestamp=2, value=b"c"),
            ]
        ),
        3,
        clock.now,
    )
    assert plog.max_timestamp_offset() == (61, 9999, 3)
    assert plog.offset_for_timestamp(5000) == (61, 9999, 3)


def test_follower_append_keeps_offsets_and_epochs(open_log, clock):
    leader = open_log()
    for i in range(10):
        leader.append_as_leader(batch(2, tag=i), leader_epoch=1 + i // 4, now_ms=clock.now)
    data = leader.read(0, 1 << 20, leader.log_end_offset).read_bytes()
    import tempfile
    from pathlib import Path

    from broker.log import PartitionLog, TopicPartition

    with tempfile.TemporaryDirectory() as d:
        follower = PartitionLog(Path(d) / "t-0", TopicPartition("t", 0), LogConfig(), clock=clock)
        pos = 0
        while follower.log_end_offset < leader.log_end_offset:
            chunk = leader.read(
                follower.log_end_offset, 100, leader.log_end_offset, min_one_batch=False
            ).read_bytes()
            follower.append_as_follower(chunk)
            pos += 1
            assert pos < 100
        assert follower.read(0, 1 << 20, 100).read_bytes() == data
        assert (
            follower.epoch_cache.entries()
            == leader.epoch_cache.entries()
            == [(1, 0), (2, 8), (3, 16)]
        )
        # Out of order offsets are rejected.
        with pytest.raises(KafkaError):
            follower.append_as_follower(data)
        bad = bytearray(leader.read(18, 100, 100).read_bytes())
        bad[-1] ^= 0xFF
        follower.truncate_to(18)
        with pytest.raises(KafkaError) as e:
            follower.append_as_follower(bad)
        assert e.value.error_code == ErrorCode.corrupt_message
        assert follower.log_end_offset == 18
        follower.close()


def test_end_offset_for_epoch(open_log, clock):
    plog = open_log()
    for epoch, n in ((1, 3), (3, 2), (6, 4)):
        for _ in range(n):
            plog.append_as_leader(batch(1), epoch, clock.now)
    assert plog.end_offset_for_epoch(6) == (6, 9)
    assert plog.end_offset_for_epoch(3) == (3, 5)
    assert plog.end_offset_for_epoch(4) == (3, 5)
    assert plog.end_offset_for_epoch(1) == (1, 3)
    assert plog.end_offset_for_epoch(0) == (0, 0)
    assert plog.end_offset_for_epoch(7) == (-1, -1)


def test_truncate_to_and_reappend(open_log, clock):
    plog = open_log()
    for i in range(40):
        plog.append_as_leader(batch(2, tag=i), leader_epoch=i // 10, now_ms=clock.now)
    plog.truncate_to(31)  # inside batch 30-31: that batch goes whole
    assert plog.log_end_offset == 30
    assert [o for o, _ in all_values(plog)] == list(range(30))
    assert plog.epoch_cache.entries() == [(0, 0), (1, 20)]
    plog.truncate_to(20)
    assert plog.log_end_offset == 20 and plog.latest_epoch == 0
    plog.append_as_leader(batch(1, tag=99), leader_epoch=7, now_ms=clock.now)
    assert all_values(plog)[-1] == (20, b"99:0:xxxxx")
    assert plog.end_offset_for_epoch(0) == (0, 20)
    # Indexes equal a fresh rebuild after truncation (a rebuild also records the final
    # max timestamp, as Kafka's recovery does).
    for seg in plog.segments:
        offsets, times = seg.offset_index.entries(), seg.time_index.entries()
        seg.recover()
        assert seg.offset_index.entries() == offsets
        assert seg.time_index.entries()[: len(times)] == times
        assert len(seg.time_index.entries()) <= len(times) + 1


def test_truncate_fully_and_start_at(open_log, clock):
    plog = open_log()
    for i in range(20):
        plog.append_as_leader(batch(2, tag=i), 1, clock.now)
    plog.truncate_fully_and_start_at(500)
    assert (plog.log_start_offset, plog.log_end_offset, plog.latest_epoch) == (500, 500, -1)
    assert len(plog.segments) == 1 and plog.segments[0].base_offset == 500
    with pytest.raises(KafkaError):
        plog.read(0, 100, 1000)
    r = plog.append_as_leader(batch(1), 2, clock.now)
    assert r.base_offset == 500
    # Truncating fully to an offset that names an existing segment reuses the name safely.
    plog.truncate_fully_and_start_at(500)
    assert plog.log_end_offset == 500 and plog.read_records(500) == []


def test_delete_records_before(open_log, clock):
    plog = open_log()
    for i in range(40):
        plog.append_as_leader(batch(2, tag=i), i // 10, clock.now)
    with pytest.raises(KafkaError) as e:
        plog.delete_records_before(81)
    assert e.value.error_code == ErrorCode.offset_out_of_range
    plog.update_high_watermark(50)
    with pytest.raises(KafkaError):
        plog.delete_records_before(51)
    assert plog.delete_records_before(45) == 45
    assert plog.read_records(45)[0].offset == 45
    with pytest.raises(KafkaError):
        plog.read(44, 100, 80)
    assert plog.segments[0].base_offset <= 45 < plog.segments[1].base_offset
    assert plog.epoch_cache.entries()[0] == (2, 45)
    assert plog.offset_for_timestamp(-2)[0] == 45


def test_topic_id_is_written_as_kafka_does(open_log):
    tid = uuid.uuid4()
    plog = open_log(topic_id=tid)
    assert read_partition_metadata(plog.dir) == tid
    text = (plog.dir / "partition.metadata").read_text()
    assert text.startswith("version: 0\ntopic_id: ") and "=" not in text


def test_fsync_on_append_syncs_every_append_before_returning(open_log, clock, monkeypatch):
    plog = open_log(LogConfig(fsync_on_append=True, segment_bytes=1024))
    synced: list[int] = []  # inodes of the files synced
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def fake(fd, real=real):
            synced.append(os.fstat(fd).st_ino)
            return real(fd)

        monkeypatch.setattr(os, name, fake)
    for i in range(12):
        synced.clear()
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
        assert plog.recovery_point == plog.log_end_offset == 2 * (i + 1)
        assert plog.active_segment.log_path.stat().st_ino in synced
    assert len(plog.segments) > 1
    assert not any(s.unflushed for s in plog.segments)


def test_flush_messages_and_flush_ms(tmp_path, clock):
    from broker.log import PartitionLog, TopicPartition

    plog = PartitionLog(
        tmp_path / "a-0", TopicPartition("a", 0), LogConfig(flush_messages=3), clock=clock
    )
    plog.append_as_leader(batch(1), 0, clock.now)
    plog.append_as_leader(batch(1), 0, clock.now)
    assert plog.recovery_point == 0
    plog.append_as_leader(batch(1), 0, clock.now)
    assert plog.recovery_point == 3
    plog.close()
    plog = PartitionLog(
        tmp_path / "b-0", TopicPartition("b", 0), LogConfig(flush_ms=100), clock=clock
    )
    plog.append_as_leader(batch(1), 0, clock.now)
    assert not plog.maybe_flush(clock.now + 50)
    assert plog.maybe_flush(clock.now + 150) and plog.recovery_point == 1
    plog.close()


def test_decoded_reads_of_every_codec(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=1 << 20))
    for c in Compression:
        plog.append_as_leader(batch(4, compression=c, tag=int(c)), 0, clock.now)
    recs = plog.read_records(0)
    assert [r.offset for r in recs] == list(range(20))
    assert recs[7].value == b"1:3:xxxxxx"
    assert decode_records(plog.read(8, 1, 100).read_bytes())[0].offset == 8


def test_flush_does_not_vouch_for_data_truncated_meanwhile(open_log, clock, monkeypatch):
    plog = open_log()
    for i in range(10):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    real = os.fdatasync
    calls = []

    def fsync_then_truncate(fd):
        if not calls:
            plog.truncate_to(6)  # as a follower would, while the flush runs unlocked
            plog.append_as_leader(batch(2, tag=99), 1, clock.now)
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", fsync_then_truncate)
    plog.flush()
    assert calls
    assert plog.recovery_point == 0  # the re-appended offsets 6-7 were never fsynced
    plog.flush()
    assert plog.recovery_point == plog.log_end_offset == 8


def test_kafka_4_default_rejects_timestamps_over_an_hour_ahead(open_log, clock):
    plog = open_log(LogConfig())
    with pytest.raises(KafkaError) as e:
        plog.append_as_leader(batch(1, ts=clock.now + 3_600_001), 0, clock.now)
    assert e.value.error_code == ErrorCode.invalid_timestamp
    assert plog.append_as_leader(batch(1, ts=clock.now + 3_600_000), 0, clock.now).base_offset == 0


def test_inactive_segments_hold_one_descriptor_each(open_log, clock):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    plog = open_log(LogConfig(segment_bytes=300))
    for i in range(90):
        plog.append_as_leader(batch(1, tag=i), 0, clock.now)
    n = len(plog.segments)
    assert n >= 30
    # Log file of every segment, plus the active segment's two index files.
    assert open_fds() - before <= n + 2 + 1  # +1: leeway for a transient descriptor
    plog.flush()
    plog.truncate_to(3)
    assert [r.offset for r in plog.read_records(0)] == [0, 1, 2]
    # Truncated segments keep their log file open until their deletion is due (a reader
    # may hold a slice), then let it go.
    plog.delete_expired_files(clock.now, force=True)
    assert open_fds() - before <= len(plog.segments) + 2 + 1


def test_concurrent_appends_reads_and_deletes(open_log, clock):
    """A writer, a reader and DeleteRecords/retention at once: every read either fails
    with OFFSET_OUT_OF_RANGE (below the moving log start) or returns whole batches with
    good CRCs holding exactly the values appended at those offsets."""
    import random
    import threading
    import time

    plog = open_log(LogConfig(segment_bytes=2000, file_delete_delay_ms=0))
    values: dict[int, bytes] = {}
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(800):
                r = plog.append_as_leader(batch(2, tag=i), 0, clock.now)
                values[r.base_offset] = b"%d:0:" % i
                values[r.base_offset + 1] = b"%d:1:" % i
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    def reader() -> None:
        rng = random.Random(7)
        try:
            while not done.is_set():
                # Reads of recent batches do no IO, so a loop of them would hold the GIL
                # and starve the writer (a convoy, not what this test is about).
                time.sleep(0)
                end = plog.log_end_offset
                off = rng.randrange(0, end + 1)
                try:
                    data = plog.read(off, 4096, end).read_bytes()
                except KafkaError as e:
                    assert e.error_code == ErrorCode.offset_out_of_range
                    assert off < plog.log_start_offset or off > plog.log_end_offset
                    continue
                data = data[: whole_batches_length(data)]
                for pos, h in iter_batch_headers(data, validate_crc=True):
                    for rec in decode_records(data[pos : pos + h.size]):
                        assert rec.value is not None
                        assert rec.value.startswith(values[rec.offset])
        except BaseException as e:
            errors.append(e)

    def deleter() -> None:
        try:
            while True:  # once more after the writer is done: a fast writer may finish first
                finished = done.is_set()
                plog.delete_records_before(max(plog.log_end_offset - 300, 0))
                plog.delete_expired_files(clock.now + 10, force=True)
                if finished:
                    break
                time.sleep(0.001)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (writer, reader, reader, deleter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    assert plog.log_end_offset == 1600 and plog.log_start_offset > 0
    assert [r.offset for r in plog.read_records(plog.log_start_offset)] == list(
        range(plog.log_start_offset, 1600)
    )


def test_rolled_segments_are_flushed_by_the_next_tick(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500))
    for i in range(20):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    assert len(plog.segments) > 3 and plog.recovery_point == 0
    rolled_end = plog.segments[-2].next_offset
    assert any(s.unflushed for s in plog.segments[:-1])
    assert plog.maybe_flush(clock.now)
    # Everything below the active segment is durable; the active segment is not forced.
    assert plog.recovery_point == rolled_end == plog.active_segment.base_offset
    assert not any(s.unflushed for s in plog.segments[:-1])
    assert plog.active_segment.unflushed
    assert not plog.maybe_flush(clock.now)


def allocated(path):
    return os.stat(path).st_blocks * 512


def test_preallocate_reserves_blocks_ahead_without_changing_the_size(open_log, clock, tmp_path):
    from broker.log.files import reserve_space

    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT)
    supported = reserve_space(fd, 0, 4096)
    os.close(fd)
    if not supported:
        pytest.skip("this filesystem cannot fallocate with FALLOC_FL_KEEP_SIZE")
    plog = open_log(LogConfig(segment_bytes=1 << 20))
    data = batch(20, size=500)
    plog.append_as_leader(data, 0, clock.now)
    seg = plog.segments[-1]
    assert os.path.getsize(seg.log_path) == len(data) == seg.size
    assert allocated(seg.log_path) >= 2 * len(data)  # as much again reserved ahead
    for _ in range(5):
        plog.append_as_leader(data, 0, clock.now)
    assert os.path.getsize(seg.log_path) == 6 * len(data)
    assert len(all_values(plog)) == 120
    # A follower truncation gives the reserve back with the truncated bytes.
    plog.truncate_to(40)
    assert allocated(seg.log_path) <= 4096 * -(-seg.size // 4096)
    plog.append_as_leader(data, 0, clock.now)
    assert allocated(seg.log_path) > seg.size
    # Rolling gives it back, and so does close.
    plog.roll()
    assert allocated(seg.log_path) <= 4096 * -(-seg.size // 4096)
    plog.append_as_leader(data, 0, clock.now)
    active = plog.segments[-1]
    assert allocated(active.log_path) > active.size
    plog.close()
    assert allocated(active.log_path) <= 4096 * -(-active.size // 4096)


def test_a_crash_with_blocks_reserved_loses_nothing_and_reopens_with_the_data_size(
    open_log, clock
):
    from broker.log.files import reserve_space

    plog = open_log(LogConfig(segment_bytes=1 << 20))
    data = batch(20, size=500)
    for _ in range(3):
        plog.append_as_leader(data, 0, clock.now)
    before = all_values(plog)
    path = plog.segments[-1].log_path
    plog.close()
    # As after kill -9: a reserve left past the end of the file.
    fd = os.open(path, os.O_RDWR)
    reserved = reserve_space(fd, os.path.getsize(path), 1 << 20)
    os.close(fd)
    crashed = open_log(plog.config, clean_shutdown=False, recovery_point=0)
    assert all_values(crashed) == before
    seg = crashed.segments[-1]
    assert seg.size == os.path.getsize(seg.log_path) == 3 * len(data)
    if reserved:  # the leftover reserve was given back on the way up
        assert allocated(seg.log_path) <= 4096 * -(-seg.size // 4096)
    crashed.append_as_leader(data, 0, clock.now)
    assert crashed.log_end_offset == 80
    crashed.close()
    if reserved:
        assert allocated(seg.log_path) <= 4096 * -(-seg.size // 4096)


def test_preallocate_false_reserves_nothing(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=1 << 20, preallocate=False))
    data = batch(20, size=500)
    plog.append_as_leader(data, 0, clock.now)
    seg = plog.segments[-1]
    assert allocated(seg.log_path) <= 4096 * -(-seg.size // 4096)


def test_recent_batches_are_located_as_the_index_and_headers_would(open_log, clock):
    # More batches than a segment remembers (so its memory is trimmed), of varied sizes,
    # across a truncation and a reopen: `locate` must agree with translate_offset everywhere.
    from broker.log.segment import _RECENT_BATCHES

    plog = open_log(LogConfig(segment_bytes=1 << 30, index_interval_bytes=4096))

    def check() -> None:
        seg = plog.active_segment
        for offset in range(seg.base_offset, plog.log_end_offset + 3):
            found = seg.translate_offset(offset)
            expected = None if found is None else (found[0], found[1].size)
            assert seg.locate(offset) == expected, offset

    for i in range(2 * _RECENT_BATCHES + 40):
        plog.append_as_leader(batch(1 + i % 4, size=10 + i % 50, tag=i), 0, clock.now)
    check()
    plog.truncate_to(plog.log_end_offset - 100)
    check()
    for i in range(30):
        plog.append_as_leader(batch(2, tag=i), 1, clock.now)
    check()
    assert plog.read(plog.log_end_offset - 2, 1 << 20, plog.log_end_offset).length > 0


def test_new_empty_logs_hold_no_descriptor_until_used(open_log, clock):
    """A broker given tens of thousands of new partitions must not hold a descriptor for
    each (issue 17: 100,000 partitions on 3 brokers is ~33,000 logs each, past a 20,000
    RLIMIT_NOFILE): an empty segment opens its files when first written or read."""
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    logs = [open_log(LogConfig()) for _ in range(50)]
    assert open_fds() - before <= 1  # leeway for a transient descriptor
    assert list(logs[0].read_records(0)) == []  # reading an empty log opens nothing
    assert open_fds() - before <= 1
    logs[0].append_as_leader(batch(2), 0, clock.now)
    assert [r.offset for r in logs[0].read_records(0)] == [0, 1]
    assert open_fds() - before <= 1 + 1
    for plog in logs:
        plog.flush()
    assert open_fds() - before <= 1 + 1
    assert [r.offset for r in logs[0].read_records(0)] == [0, 1]
