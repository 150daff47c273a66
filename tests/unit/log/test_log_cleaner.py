import tempfile
import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from loghelpers import FakeClock

from broker.log import LogConfig, LogManager, PartitionLog, TopicPartition
from broker.log.cleaner import CleanStats, Throttler, _recopy, clean_log
from broker.protocol.records import (
    Record,
    build_batch,
    iter_batch_headers,
    whole_batches_length,
)

CCFG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=600,
    index_interval_bytes=64,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=10_000,
    file_delete_delay_ms=0,
)


def put(plog, clock, key, value, **kw):
    return plog.append_as_leader(
        build_batch([Record(timestamp=clock.now, key=key, value=value)], **kw), 0, clock.now
    ).base_offset


def contents(plog):
    return [(r.offset, r.key, r.value) for r in plog.read_records(plog.log_start_offset)]


def test_keeps_the_last_value_per_key_and_offsets(open_log, clock):
    plog = open_log(CCFG)
    latest = {}
    for i in range(60):
        k = b"k%d" % (i % 7)
        latest[k] = (put(plog, clock, k, b"v%d" % i), b"v%d" % i)
    before = contents(plog)
    leo = plog.log_end_offset
    new_dirty, stats = clean_log(plog, clock.now, 0)
    after = contents(plog)
    assert new_dirty == plog.active_segment.base_offset
    assert stats.records_kept < stats.records_read
    # Everything kept is unchanged (same offset, key, value); nothing kept is stale.
    assert set(after) <= set(before)
    cleaned_keys = [k for o, k, _ in after if o < new_dirty]
    assert len(cleaned_keys) == len(set(cleaned_keys)) < 60  # one record per key there
    assert {k: (o, v) for o, k, v in after} == latest
    assert plog.log_end_offset == leo
    # Offsets strictly increase and every offset reads back what it held.
    offs = [o for o, _, _ in after]
    assert offs == sorted(set(offs))
    # Indexes of cleaned segments are consistent with a rebuild.
    for seg in plog.segments[:-1]:
        ent = seg.offset_index.entries()
        seg.recover()
        assert seg.offset_index.entries() == ent


def test_tombstones_expire_after_delete_retention(open_log, clock):
    plog = open_log(CCFG)
    put(plog, clock, b"a", b"1")
    put(plog, clock, b"b", b"1")
    put(plog, clock, b"a", None)  # tombstone
    for i in range(30):
        put(plog, clock, b"x", b"%d" % i)
    clean_log(plog, clock.now, 0)
    keys = {(k, v) for _, k, v in contents(plog)}
    assert (b"a", None) in keys and (b"a", b"1") not in keys
    # Within delete.retention.ms the tombstone stays, after it goes.
    clock.advance(5_000)
    clean_log(plog, clock.now, plog.active_segment.base_offset)
    assert (b"a", None) in {(k, v) for _, k, v in contents(plog)}
    clock.advance(6_000)
    _, stats = clean_log(plog, clock.now, plog.active_segment.base_offset)
    assert stats.tombstones_dropped == 1
    assert b"a" not in {k for _, k, _ in contents(plog)}
    assert (b"b", b"1") in {(k, v) for _, k, v in contents(plog)}


def test_empty_batch_kept_for_producer_state(open_log, clock):
    plog = open_log(CCFG)
    put(plog, clock, b"p", b"old", producer_id=42, producer_epoch=0, base_sequence=0)
    put(plog, clock, b"q", b"1", producer_id=43, producer_epoch=0, base_sequence=0)
    put(plog, clock, b"q", b"2", producer_id=43, producer_epoch=0, base_sequence=1)
    for i in range(20):
        put(plog, clock, b"p", b"%d" % i)
    clean_log(plog, clock.now, 0)
    data = b"".join(plog.read(o, 1 << 20, plog.log_end_offset).read_bytes() for o in (0,))
    data = data[: whole_batches_length(data)]
    headers = [h for _, h in iter_batch_headers(data, validate_crc=True)]
    by_producer = {h.producer_id: h for h in headers if h.producer_id >= 0}
    # Producer 42's only batch lost its record but survives empty, sequence intact.
    assert by_producer[42].records_count == 0 and by_producer[42].base_sequence == 0
    # Producer 43's first batch was superseded and is not its last: gone entirely.
    assert by_producer[43].base_sequence == 1
    assert [h.base_offset for h in headers if h.producer_id == 43] == [2]


def test_min_compaction_lag_and_dirty_ratio(tmp_path):
    clock = FakeClock()
    cfg = LogConfig(
        cleanup_policy="compact",
        segment_bytes=600,
        min_compaction_lag_ms=60_000,
        min_cleanable_dirty_ratio=0.5,
        file_delete_delay_ms=0,
    )
    m = LogManager([tmp_path / "d"], cfg, clock)
    m.load()
    plog = m.get_or_create("c", 0)
    for i in range(50):
        put(plog, clock, b"k", b"%d" % i)
    assert m.cleaner.clean_once(clock.now) == 0  # everything younger than the lag
    clock.advance(120_000)
    assert m.cleaner.clean_once(clock.now) > 0
    assert m.cleaner_checkpoints[("c", 0)] == plog.active_segment.base_offset
    # Nothing dirty now: ratio 0 < 0.5.
    assert m.cleaner.clean_once(clock.now) == 0
    m.shutdown()
    m2 = LogManager([tmp_path / "d"], cfg, clock)
    m2.load()
    assert m2.cleaner_checkpoints[("c", 0)] == m.cleaner_checkpoints[("c", 0)]
    p2 = m2.get("c", 0)
    assert p2 is not None
    assert [v for _, k, v in contents(p2)][-1] == b"49"
    m2.shutdown()


def test_concurrent_readers_and_appends_see_a_consistent_log(open_log, clock):
    plog = open_log(CCFG)
    written = {}
    for i in range(200):
        o = put(plog, clock, b"k%d" % (i % 13), b"v%d" % i)
        written[o] = b"v%d" % i
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader():
        try:
            while not stop.is_set():
                time.sleep(0)  # let the writer have the GIL between reads
                seen = contents(plog)
                offs = [o for o, _, _ in seen]
                assert offs == sorted(set(offs))
                for o, _, v in seen:
                    assert written.get(o, v) == v
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for round_ in range(5):
            for i in range(20):
                o = put(plog, clock, b"k%d" % (i % 13), b"r%d-%d" % (round_, i))
                written[o] = b"r%d-%d" % (round_, i)
            clean_log(plog, clock.now, 0)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors, errors[0]
    final = contents(plog)
    assert {k for _, k, _ in final} == {b"k%d" % i for i in range(13)}
    plog.delete_expired_files(clock.now + 10**6, force=True)


def test_swap_is_abandoned_if_the_log_was_truncated(open_log, clock):
    plog = open_log(CCFG)
    for i in range(40):
        put(plog, clock, b"k", b"%d" % i)
    seg = plog.segments[0]
    new = plog.new_cleaned_segment(seg.base_offset)
    generation = plog.truncation_generation
    plog.truncate_to(2)
    assert plog.replace_segments([([seg], new)], generation) is False
    assert not any(p.name.endswith(".cleaned") for p in plog.dir.iterdir())
    assert [v for _, _, v in contents(plog)] == [b"0", b"1"]


def test_crash_during_swap_is_completed_or_undone(open_log, clock):
    plog = open_log(CCFG)
    for i in range(40):
        put(plog, clock, b"k%d" % (i % 3), b"%d" % i)
    before = contents(plog)
    plog.close()
    # A leftover .cleaned file (crash before the swap) is discarded at load.
    (plog.dir / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    p2 = open_log(CCFG, clean_shutdown=False)
    assert contents(p2) == before
    assert not any(p.name.endswith(".cleaned") for p in p2.dir.iterdir())
    # A complete .swap copy of a group of segments (crash after it was renamed, before
    # the originals were) replaces the originals it covers; later segments stay.
    group = list(p2.segments[:3])
    later = [(o, k, v) for o, k, v in before if o >= p2.segments[3].base_offset]
    cleaned = p2.new_cleaned_segment(group[0].base_offset)
    latest = {k: o for o, k, _ in before}
    for i, seg in enumerate(group):
        _recopy(seg, cleaned, latest, {}, clock.now, 0, CleanStats(), None, keep_last_batch=i == 2)
    assert cleaned.next_offset == group[-1].next_offset  # ends where the group ended
    cleaned.on_become_inactive()
    cleaned.flush()
    cleaned.change_suffix(".cleaned", ".swap")
    p2.close()
    p3 = open_log(CCFG, clean_shutdown=False)
    got = contents(p3)
    assert [x for x in got if x[0] >= p3.segments[1].base_offset] == later
    assert got[: len(got) - len(later)] == []  # every key's latest is past the group
    assert p3.segments[0].base_offset == 0 and len(p3.segments) == len(p2.segments) - 2
    assert p3.log_end_offset == 40


def test_small_segments_are_grouped(open_log, clock):
    plog = open_log(
        LogConfig(
            cleanup_policy="compact",
            segment_bytes=600,
            min_cleanable_dirty_ratio=0.01,
            file_delete_delay_ms=0,
        )
    )
    for i in range(80):
        put(plog, clock, b"k%d" % (i % 2), b"%d" % i)
    n = len(plog.segments)
    # Groups are formed from the originals' sizes (as Kafka does): full segments are
    # copied one to one, the small copies are grouped on the next pass.
    first_dirty, _ = clean_log(plog, clock.now, 0)
    assert len(plog.segments) == n
    clean_log(plog, clock.now, first_dirty)
    assert len(plog.segments) < n / 2
    assert {k: v for _, k, v in contents(plog)} == {b"k0": b"78", b"k1": b"79"}
    offs = [o for o, _, _ in contents(plog)]
    assert offs == sorted(set(offs)) and plog.log_end_offset == 80
    # The cleaned log reopens clean and unclean to the same content.
    want = contents(plog)
    plog.close()
    assert contents(open_log(plog.config, clean_shutdown=False)) == want


def test_throttler_sleeps_to_the_rate():
    slept = []
    now = [0.0]
    t = Throttler(1000.0, sleep=lambda s: slept.append(s), monotonic=lambda: now[0])
    t.maybe_throttle(500)
    assert slept == [0.5]
    now[0] = 2.0
    t.maybe_throttle(500)
    assert slept == [0.5]


_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 6), st.none() | st.binary(max_size=30)),
    st.tuples(st.just("clean"), st.integers(0, 20_000)),
    st.tuples(st.just("reopen"), st.booleans()),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, min_size=1, max_size=60))
def test_property_compaction_keeps_latest_per_key(ops):
    clock = FakeClock()
    cfg = LogConfig(
        cleanup_policy="compact",
        segment_bytes=400,
        index_interval_bytes=64,
        delete_retention_ms=5_000,
        file_delete_delay_ms=0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "c-0"

        def open_(clean):
            return PartitionLog(d, TopicPartition("c", 0), cfg, clock=clock, clean_shutdown=clean)

        plog = open_(True)
        appended = {}  # offset -> (key, value)
        first_dirty = 0
        for o in ops:
            if o[0] == "put":
                off = put(plog, clock, b"k%d" % o[1], o[2])
                appended[off] = (b"k%d" % o[1], o[2])
            elif o[0] == "clean":
                clock.advance(o[1])
                result = clean_log(plog, clock.now, first_dirty)
                assert result is not None
                first_dirty = result[0]
            else:
                if o[1]:
                    plog.close()
                else:
                    del plog
                plog = open_(o[1])
            got = contents(plog)
            # Offsets never change and nothing new appears.
            for off, k, v in got:
                assert appended[off] == (k, v)
            offs = [x[0] for x in got]
            assert offs == sorted(set(offs))
            # The latest record of every key survives, unless it is a tombstone
            # (which may expire).
            latest = {}
            for off in sorted(appended):
                latest[appended[off][0]] = off
            have = set(offs)
            for k, off in latest.items():
                if appended[off][1] is not None:
                    assert off in have, (k, off)
            # Below the cleaned point each key appears at most once.
            cleaned_keys = [k for off, k, _ in got if off < first_dirty]
            assert len(cleaned_keys) == len(set(cleaned_keys))
            assert plog.log_end_offset == (max(appended) + 1 if appended else 0)
        plog.close()
