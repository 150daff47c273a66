import os

from loghelpers import FakeClock, batch

from broker.log import LogConfig, LogManager
from broker.log.checkpoints import read_offsets_checkpoint


def fill(plog, clock, n, *, ts_step=1000):
    for i in range(n):
        plog.append_as_leader(batch(2, ts=clock.now, tag=i), 0, clock.now)
        clock.advance(ts_step)


def test_retention_ms_deletes_old_segments_by_largest_timestamp(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500, retention_ms=10_000, file_delete_delay_ms=100))
    fill(plog, clock, 30)
    n = len(plog.segments)
    assert n > 4
    # Nothing is old enough yet relative to the newest segments, but the first ones are.
    deleted = plog.delete_old_segments(clock.now)
    assert 0 < deleted < n
    for seg in plog.segments[:-1]:
        assert clock.now - seg.max_timestamp <= 10_000
    assert plog.log_start_offset == plog.segments[0].base_offset
    # Files are renamed first, removed after file.delete.delay.ms.
    assert any(p.name.endswith(".deleted") for p in plog.dir.iterdir())
    assert plog.delete_expired_files(clock.now) == 0
    clock.advance(200)
    assert plog.delete_expired_files(clock.now) == deleted
    assert not any(p.name.endswith(".deleted") for p in plog.dir.iterdir())


def test_retention_can_empty_the_log_but_keeps_its_end(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500, retention_ms=1000))
    fill(plog, clock, 10)
    clock.advance(100_000)
    plog.delete_old_segments(clock.now)
    assert plog.log_start_offset == plog.log_end_offset == 20
    assert len(plog.segments) == 1 and plog.segments[0].size == 0
    assert plog.append_as_leader(batch(1), 0, clock.now).base_offset == 20


def test_retention_bytes(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500, retention_bytes=1200, retention_ms=-1))
    fill(plog, clock, 40)
    before = plog.size_in_bytes
    plog.delete_old_segments(clock.now)
    assert plog.size_in_bytes >= 1200 - 500
    assert plog.size_in_bytes < before
    # Removing one more segment would go below retention.bytes.
    assert plog.size_in_bytes - plog.segments[0].size < 1200


def test_retention_never_passes_the_high_watermark(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500, retention_ms=1))
    fill(plog, clock, 30)
    hw = plog.segments[3].base_offset
    plog.update_high_watermark(hw)
    clock.advance(10**9)
    assert plog.delete_old_segments(clock.now) == 3
    assert plog.log_start_offset == hw == plog.segments[0].base_offset


def test_compact_only_topics_are_not_deleted_by_time(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=500, retention_ms=1, cleanup_policy="compact"))
    fill(plog, clock, 30)
    clock.advance(10**9)
    assert plog.delete_old_segments(clock.now) == 0


def test_manager_tick_runs_retention_and_checkpoints_log_start(tmp_path):
    clock = FakeClock()
    cfg = LogConfig(segment_bytes=500, retention_ms=5000, file_delete_delay_ms=0)
    m = LogManager(
        [tmp_path / "d"],
        cfg,
        clock,
        retention_check_interval_ms=1000,
        flush_start_offset_checkpoint_interval_ms=1000,
    )
    m.load()
    plog = m.get_or_create("t", 0)
    fill(plog, clock, 30)
    plog.delete_records_before(7)
    clock.advance(2000)
    m.tick(clock.now)
    start = plog.log_start_offset
    assert start > 7
    assert read_offsets_checkpoint(tmp_path / "d" / "log-start-offset-checkpoint") == {
        ("t", 0): start
    }
    m.tick(clock.now + 1)
    assert not any(p.name.endswith(".deleted") for p in plog.dir.iterdir())
    # An unclean restart keeps the checkpointed log start.
    m.checkpoint_recovery_points()
    m2 = LogManager([tmp_path / "d"], cfg, clock)
    m2.load()
    p2 = m2.get("t", 0)
    assert p2 is not None and p2.log_start_offset == start
    m2.shutdown()
    del m


def test_deleted_files_left_by_a_crash_are_removed_at_load(open_log, clock, tmp_path):
    plog = open_log(LogConfig(segment_bytes=500, retention_ms=1000, file_delete_delay_ms=10**9))
    fill(plog, clock, 20)
    clock.advance(10**6)
    plog.delete_old_segments(clock.now)
    assert any(p.name.endswith(".deleted") for p in plog.dir.iterdir())
    plog2 = open_log(LogConfig(segment_bytes=500), clean_shutdown=False)
    assert not any(p.name.endswith(".deleted") for p in plog2.dir.iterdir())
    assert plog2.log_end_offset == 40
    assert os.listdir(plog2.dir)
