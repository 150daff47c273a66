import collections
import uuid

import pytest
from kio.schema.errors import ErrorCode
from loghelpers import FakeClock, batch

from broker.errors import KafkaError
from broker.log import LogConfig, LogManager
from broker.log.checkpoints import (
    CheckpointError,
    read_offsets_checkpoint,
    verify_meta_properties,
    write_properties,
)

CFG = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=1000)


def manager(tmp_path, clock, dirs=("d1", "d2")):
    m = LogManager([tmp_path / d for d in dirs], CFG, clock)
    m.load()
    return m


def test_create_append_shutdown_reload(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock)
    logs = [m.get_or_create("orders", p, topic_id=uuid.UUID(int=7)) for p in range(4)]
    # Spread over the two dirs.
    assert {m.log_dir_of("orders", p) for p in range(4)} == {tmp_path / "d1", tmp_path / "d2"}
    for i in range(30):
        for plog in logs:
            plog.append_as_leader(batch(2, tag=i), 3, clock.now)
    assert m.get_or_create("orders", 0) is logs[0]
    assert m.get("nope", 0) is None
    m.shutdown()
    for d in ("d1", "d2"):
        assert (tmp_path / d / ".kafka_cleanshutdown").exists()
        rp = read_offsets_checkpoint(tmp_path / d / "recovery-point-offset-checkpoint")
        assert set(rp.values()) == {60}
    m2 = manager(tmp_path, clock)
    assert not (tmp_path / "d1" / ".kafka_cleanshutdown").exists()
    assert all(m2.had_clean_shutdown.values())
    assert sorted((p.topic_partition.partition, p.log_end_offset) for p in m2.all_logs()) == [
        (0, 60),
        (1, 60),
        (2, 60),
        (3, 60),
    ]
    plog = m2.get("orders", 2)
    assert plog is not None and plog.topic_id == uuid.UUID(int=7)
    assert [r.offset for r in plog.read_records(0)] == list(range(60))
    assert plog.latest_epoch == 3
    m2.shutdown()


def test_unclean_start_recovers_a_torn_tail(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    plog = m.get_or_create("t", 0)
    for i in range(10):
        plog.append_as_leader(batch(2, tag=i), 1, clock.now)
    active = plog.active_segment.log_path
    # Crash: no shutdown. The last batch is torn.
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size - 7)
    m2 = manager(tmp_path, clock, dirs=("d1",))
    assert m2.had_clean_shutdown[tmp_path / "d1"] is False
    p2 = m2.get("t", 0)
    assert p2 is not None and p2.log_end_offset == 18
    assert [r.offset for r in p2.read_records(0)] == list(range(18))
    m2.shutdown()
    del m


def test_delete_renames_then_removes(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    plog = m.get_or_create("gone", 1)
    plog.append_as_leader(batch(1), 0, clock.now)
    sl = plog.read(0, 1000, 1)
    data = sl.read_bytes()
    m.delete("gone", 1)
    assert m.get("gone", 1) is None
    leftovers = [p.name for p in (tmp_path / "d1").iterdir() if p.is_dir()]
    assert (
        len(leftovers) == 1
        and leftovers[0].startswith("gone-1.")
        and leftovers[0].endswith("-delete")
    )
    assert sl.read_bytes() == data
    clock.advance(2000)
    m.tick(clock.now)
    assert not [p for p in (tmp_path / "d1").iterdir() if p.is_dir()]
    # A restart removes leftover -delete dirs too, and does not load them.
    m.get_or_create("gone", 1)
    m.delete("gone", 1)
    m.shutdown()
    m2 = manager(tmp_path, clock, dirs=("d1",))
    assert m2.get("gone", 1) is None
    m2.tick(clock.now)
    assert not [p for p in (tmp_path / "d1").iterdir() if p.is_dir()]
    m2.shutdown()


def test_bad_topic_names(tmp_path):
    m = manager(tmp_path, FakeClock(), dirs=("d1",))
    for name in ("", "a/b", "..", "a b"):
        with pytest.raises(KafkaError) as e:
            m.get_or_create(name, 0)
        assert e.value.error_code == ErrorCode.invalid_topic_exception
    m.shutdown()


def test_topics_with_dashes_and_dots(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    m.get_or_create("my-topic.v2", 11).append_as_leader(batch(1), 0, clock.now)
    m.get_or_create("__consumer_offsets", 0, LogConfig(fsync_on_append=True))
    m.shutdown()
    m2 = manager(tmp_path, clock, dirs=("d1",))
    plog = m2.get("my-topic.v2", 11)
    assert plog is not None and plog.log_end_offset == 1
    assert m2.get("__consumer_offsets", 0) is not None
    m2.shutdown()


def test_background_runner_starts_and_stops(tmp_path):
    import time

    m = LogManager([tmp_path / "d"], CFG, lambda: time.time_ns() // 1_000_000)
    m.load()
    m.start(interval_s=0.01)
    time.sleep(0.05)
    m.shutdown()
    assert (tmp_path / "d" / ".kafka_cleanshutdown").exists()


def test_meta_properties_verification(tmp_path):
    d1, d2 = tmp_path / "a", tmp_path / "b"
    d1.mkdir()
    d2.mkdir()
    with pytest.raises(CheckpointError):
        verify_meta_properties([d1])
    write_properties(d1 / "meta.properties", {"version": "1", "cluster.id": "c1", "node.id": "1"})
    write_properties(d2 / "meta.properties", {"version": "1", "cluster.id": "c2", "node.id": "1"})
    assert verify_meta_properties([d1], node_id=1, cluster_id="c1")["cluster.id"] == "c1"
    with pytest.raises(CheckpointError):
        verify_meta_properties([d1, d2])
    with pytest.raises(CheckpointError):
        verify_meta_properties([d1], node_id=2)


def test_config_from_topic_configs():
    cfg = LogConfig.from_topic_configs(
        {
            "segment.bytes": "2048",
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.1",
            "unrelated.key": "x",
        }
    )
    assert cfg.segment_bytes == 2048 and cfg.compact and cfg.delete
    assert cfg.min_cleanable_dirty_ratio == 0.1
    d = LogConfig.from_topic_configs({})
    assert (
        d.segment_bytes,
        d.segment_ms,
        d.retention_ms,
        d.retention_bytes,
        d.max_message_bytes,
        d.segment_index_bytes,
        d.index_interval_bytes,
        d.file_delete_delay_ms,
    ) == (1 << 30, 604800000, 604800000, -1, 1048588, 10485760, 4096, 60000)
    for bad in (
        {"segment.bytes": "x"},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "Now"},
        {"segment.bytes": "1"},
    ):
        with pytest.raises(KafkaError) as e:
            LogConfig.from_topic_configs(bad)
        assert e.value.error_code == ErrorCode.invalid_config


def test_clean_shutdown_takes_the_fast_path_and_unclean_scans_after_the_recovery_point(
    tmp_path,
):
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    plog = m.get_or_create("t", 0)
    for i in range(40):
        plog.append_as_leader(batch(2, tag=i), 0, clock.now)
    m.shutdown()
    m2 = manager(tmp_path, clock, dirs=("d1",))
    p2 = m2.get("t", 0)
    assert p2 is not None and p2.recovered_segments == []  # clean: nothing re-scanned
    assert p2.recovery_point == 80  # all of it was flushed at shutdown
    for i in range(40):
        p2.append_as_leader(batch(2, tag=100 + i), 0, clock.now)
    p2.flush(up_to=120)
    m2.checkpoint_recovery_points()
    p2.append_as_leader(batch(2, tag=999), 0, clock.now)
    bases = [s.base_offset for s in p2.segments]
    # "Crash": no shutdown. Segments wholly below the recovery point are trusted; the
    # one holding it and all later ones are scanned.
    m3 = manager(tmp_path, clock, dirs=("d1",))
    first = max(b for b in bases if b <= 120)
    p3 = m3.get("t", 0)
    assert p3 is not None and p3.recovered_segments == [b for b in bases if b >= first]
    assert p3.log_end_offset == 162
    assert [r.offset for r in p3.read_records(0)] == list(range(162))
    m3.shutdown()


def test_a_log_of_an_earlier_topic_with_the_same_name_is_replaced(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    old = m.get_or_create("t", 0, topic_id=uuid.UUID(int=1))
    old.append_as_leader(batch(3), 0, clock.now)
    with pytest.raises(KafkaError) as e:
        old.set_topic_id(uuid.UUID(int=2))
    assert e.value.error_code == ErrorCode.inconsistent_topic_id
    m.shutdown()
    m2 = manager(tmp_path, clock, dirs=("d1",))
    assert m2.get_or_create("t", 0, topic_id=uuid.UUID(int=1)).log_end_offset == 3
    fresh = m2.get_or_create("t", 0, topic_id=uuid.UUID(int=2))
    assert fresh.log_end_offset == 0 and fresh.topic_id == uuid.UUID(int=2)
    assert any(p.name.endswith("-delete") for p in (tmp_path / "d1").iterdir())
    m2.shutdown()


def test_the_metadata_log_in_a_log_dir_is_left_to_raft(tmp_path):
    """Issue 17: under Kafka's default layout (metadata.log.dir unset) the metadata log
    lives in the first log.dirs entry. The partition manager must never open it, so
    retention (whose clock says every old segment expired), the cleaner, checkpoints and
    deletion cannot touch Raft's segments, however many times the node restarts."""
    from broker.metadata.log_store import MetadataLogStore

    d = tmp_path / "d1"
    store = MetadataLogStore(d, segment_bytes=1024)
    for i in range(40):
        store.append((b"r%03d" % i * 20,), epoch=1)
    store.close()
    files_before = sorted(p.name for p in (d / "__cluster_metadata-0").iterdir())
    assert len([f for f in files_before if f.endswith(".log")]) > 1  # several segments
    # a retention of 1 ms and a clock far in the future: every partition segment expires
    cfg = LogConfig(segment_bytes=1024, retention_ms=1, file_delete_delay_ms=0)
    clock = FakeClock()
    clock.now = 10**13
    for _restart in range(3):
        m = LogManager([d], cfg, clock, retention_check_interval_ms=1)
        m.load()
        assert m.get("__cluster_metadata", 0) is None
        assert m.all_logs() == []
        m.tick(clock.now)
        m.run_retention(clock.now)
        m.shutdown()
        clock.now += 10**9
    assert sorted(p.name for p in (d / "__cluster_metadata-0").iterdir()) == files_before
    assert read_offsets_checkpoint(d / "log-start-offset-checkpoint") == {}
    store = MetadataLogStore(d, segment_bytes=1024)
    assert (store.log_start_offset, store.end_offset) == (0, 40)
    store.close()
    m = LogManager([d], cfg, clock)
    m.load()
    with pytest.raises(KafkaError):
        m.get_or_create("__cluster_metadata", 0)
    m.shutdown()


def test_a_new_partition_syncs_its_log_dir_with_its_first_flush_not_at_creation(
        tmp_path, monkeypatch):
    """Creating 100,000 partitions fsynced the log dir once each, on the broker's event loop
    (issue 17); the directory entry is made durable by the partition's first flush instead,
    before its data."""
    import broker.log.log as log_mod
    import broker.log.manager as manager_mod

    synced: list[object] = []
    monkeypatch.setattr(manager_mod, "fsync_dir", lambda d: synced.append(d))
    monkeypatch.setattr(log_mod, "fsync_dir", lambda d: synced.append(d))
    clock = FakeClock()
    m = manager(tmp_path, clock, dirs=("d1",))
    logs = [m.get_or_create("t", i) for i in range(20)]
    assert synced == []
    logs[3].append_as_leader(batch(1), 0, clock.now)
    logs[3].flush()
    assert synced == [logs[3].dir.parent]
    logs[3].append_as_leader(batch(1), 0, clock.now)
    logs[3].flush()
    assert synced == [logs[3].dir.parent]  # once
    m.shutdown()


def test_partitions_spread_over_log_dirs(tmp_path):
    m = manager(tmp_path, FakeClock(), dirs=("a", "b", "c"))
    for i in range(7):
        m.get_or_create("t", i)
    counts = collections.Counter(m.log_dir_of("t", i).name for i in range(7))
    assert counts == {"a": 3, "b": 2, "c": 2}
    m.shutdown()


def test_workers_of_one_broker_share_its_log_dirs_each_with_its_own_files(tmp_path):
    """skiff.broker.workers (broker/node/shards.py): each worker loads only the partitions
    it owns from the same log dirs, and keeps its own checkpoints and clean-shutdown
    marker, so neither overwrites what the other wrote."""
    from broker.node.shards import ShardLayout

    clock = FakeClock()
    layouts = [ShardLayout(2, i) for i in range(2)]
    managers = [LogManager([tmp_path / "d1"], CFG, clock, owns=lay.owns,
                           file_suffix=lay.file_suffix) for lay in layouts]
    for m in managers:
        m.load()
    for p in range(6):
        owner = managers[layouts[0].owner("orders", p)]
        owner.get_or_create("orders", p).append_as_leader(batch(p + 1), 1, clock.now)
    for m in managers:
        m.shutdown()
    d = tmp_path / "d1"
    assert (d / ".kafka_cleanshutdown").exists()
    assert (d / ".kafka_cleanshutdown.worker-1").exists()
    for lay in layouts:
        points = read_offsets_checkpoint(d / ("recovery-point-offset-checkpoint"
                                              + lay.file_suffix))
        assert points == {("orders", p): p + 1 for p in range(6) if lay.owns("orders", p)}
    again = [LogManager([d], CFG, clock, owns=lay.owns, file_suffix=lay.file_suffix)
             for lay in layouts]
    for lay, m in zip(layouts, again, strict=True):
        m.load()
        assert all(m.had_clean_shutdown.values())
        assert sorted(p.topic_partition.partition for p in m.all_logs()) == [
            p for p in range(6) if lay.owns("orders", p)]
        m.shutdown()
