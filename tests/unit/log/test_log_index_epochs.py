import os

from loghelpers import batch

from broker.log import LogConfig
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.index import OffsetIndex, TimeIndex


def test_offset_index_lookup_truncate_and_presize(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 80)
    assert idx.lookup(150) == (100, 0)
    for off, pos in ((105, 0), (110, 500), (130, 900)):
        idx.append(off, pos)
    assert os.path.getsize(idx.path) == 0  # appends do not touch the file
    idx.flush()
    assert os.path.getsize(idx.path) == 80  # pre-sized like Kafka's active index
    assert idx.lookup(104) == (100, 0)
    assert idx.lookup(110) == (110, 500) and idx.lookup(129) == (110, 500)
    assert idx.lookup(10**9) == (130, 900)
    idx.truncate_to(110)
    assert idx.entries() == [(105, 0)]
    idx.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == b"\0\0\0\x05\0\0\0\0"


def test_time_index_only_grows(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 0, 120)
    ti.maybe_append(50, 3)
    ti.maybe_append(40, 4)  # not larger: ignored
    ti.maybe_append(60, 9)
    assert ti.entries() == [(50, 3), (60, 9)]
    assert ti.lookup(55) == 3 and ti.lookup(10) == 0 and ti.lookup(99) == 9
    ti.truncate_to(9)
    assert ti.entries() == [(50, 3)]
    ti.close()


def test_garbage_index_on_clean_load_is_rebuilt(open_log, clock):
    plog = open_log()
    for i in range(20):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    entries = [(s.offset_index.entries(), s.time_index.entries()) for s in plog.segments]
    first = plog.segments[0]
    plog.close()
    first.offset_index.path.write_bytes(b"\xff" * 24)
    first.time_index.path.write_bytes(b"\x00" * 7)
    plog2 = open_log(clean_shutdown=True)
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in plog2.segments] == entries
    assert [r.offset for r in plog2.read_records(0)] == list(range(40))


def test_epoch_cache_rules(tmp_path):
    c = LeaderEpochCache(tmp_path)
    assert c.end_offset_for(0, 10) == (-1, -1)
    c.assign(1, 0)
    c.assign(1, 5)  # same epoch: no change
    c.assign(3, 10)
    c.assign(2, 12)  # older epoch after a newer one: ignored
    c.assign(5, 20)
    assert c.entries() == [(1, 0), (3, 10), (5, 20)]
    assert c.end_offset_for(5, 33) == (5, 33)
    assert c.end_offset_for(4, 33) == (3, 20)
    assert c.end_offset_for(1, 33) == (1, 10)
    assert c.end_offset_for(0, 33) == (0, 0)
    assert c.end_offset_for(9, 33) == (-1, -1)
    assert c.epoch_for_offset(15) == 3
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 10\n5 20\n"
    c.truncate_from_start(12)
    assert c.entries() == [(3, 12), (5, 20)]
    c.truncate_from_end(20)
    assert c.entries() == [(3, 12)]
    assert LeaderEpochCache(tmp_path).entries() == [(3, 12)]
    # An epoch starting at or before an existing start replaces the later entries.
    c.assign(7, 12)
    assert c.entries() == [(7, 12)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n5\n1 0\n")
    assert LeaderEpochCache(tmp_path).entries() == []


def test_active_segment_tail_is_found_after_clean_restart(open_log, clock):
    cfg = LogConfig(segment_bytes=10_000, index_interval_bytes=100)
    plog = open_log(cfg)
    for i in range(25):
        plog.append_as_leader(batch(3, tag=i, ts=1000 + i), 2, clock.now)
    plog.close()
    plog2 = open_log(cfg)
    assert plog2.log_end_offset == 75
    assert plog2.max_timestamp_offset() == (74, 1026, 2)
    assert plog2.append_as_leader(batch(1), 2, clock.now).base_offset == 75


def test_a_new_epoch_reaches_the_checkpoint_before_the_recovery_point_passes_it(
    open_log, clock, tmp_path
):
    """The first append of an epoch does not fsync the checkpoint (KAFKA-15046's cost);
    flush writes it before moving the recovery point, and a crash before that re-assigns
    the epoch from the batches recovery re-scans."""
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    plog = open_log()
    plog.append_as_leader(batch(2), 1, clock())
    plog.flush()
    assert checkpoint.read_text() == "0\n1\n1 0\n"
    plog.append_as_leader(batch(2), 4, clock())
    assert checkpoint.read_text() == "0\n1\n1 0\n"  # not yet: no fsync on the append path
    assert plog.recovery_point == 2
    # A crash now: the file lacks epoch 4, the recovery point is below its start.
    crashed = open_log(plog.config, clean_shutdown=False, recovery_point=plog.recovery_point)
    assert crashed.epoch_cache.entries() == [(1, 0), (4, 2)]
    crashed.flush()
    assert checkpoint.read_text() == "0\n2\n1 0\n4 2\n"
    plog.close()


def test_fsync_on_append_persists_a_new_epoch_with_the_append(open_log, clock, tmp_path):
    plog = open_log(LogConfig(fsync_on_append=True))
    plog.append_as_leader(batch(2), 3, clock())
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    assert plog.recovery_point == 2


def test_close_persists_a_new_epoch(open_log, clock, tmp_path):
    plog = open_log()
    plog.append_as_leader(batch(2), 2, clock())
    plog.close()
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"
