"""FutureLog copy passes (broker/log/move.py): a segment that grew gets its new bytes only,
a replaced file (new inode) is copied whole, a deleted one goes, the newest segment's indexes
are left for recovery to rebuild; and LogManager's swap puts the copy in place with every
record, the old directory renamed for deletion."""

from __future__ import annotations

import os
import time
from pathlib import Path

from broker.log import LogConfig, LogManager
from broker.log.move import FutureLog
from broker.protocol.records import Record, build_batch, decode_records


def clock() -> int:
    return int(time.time() * 1000)


def test_copy_passes(tmp_path: Path) -> None:
    src, dst = tmp_path / "t-0", tmp_path / "dest" / "t-0.x-future"
    src.mkdir()
    dst.mkdir(parents=True)
    old, new = f"{0:020d}", f"{100:020d}"
    (src / f"{old}.log").write_bytes(b"a" * 1000)
    (src / f"{old}.index").write_bytes(b"i" * 8)
    (src / f"{new}.log").write_bytes(b"b" * 10)
    (src / f"{new}.index").write_bytes(b"j" * 80)  # the newest segment's: not copied
    (src / "leader-epoch-checkpoint").write_text("0\n0\n")
    (src / f"{old}.log.deleted").write_bytes(b"gone")
    fut = FutureLog("t", 0, dst.parent, dst, src)
    assert fut.copy_pass(5) == 1010
    assert sorted(p.name for p in dst.iterdir()) == sorted(
        [f"{old}.log", f"{old}.index", f"{new}.log", "leader-epoch-checkpoint"])
    assert fut.copy_pass(5) == 0  # nothing changed
    with open(src / f"{new}.log", "ab") as f:
        f.write(b"c" * 5)
    assert fut.copy_pass(6) == 5
    assert (dst / f"{new}.log").read_bytes() == b"b" * 10 + b"c" * 5
    # replaced by a same-sized file, as the cleaner swaps one in: copied whole
    os.replace(src / f"{old}.log", src / "tmp")
    (src / f"{old}.log").write_bytes(b"z" * 1000)
    (src / "tmp").unlink()
    assert fut.copy_pass(6) == 1000
    assert (dst / f"{old}.log").read_bytes() == b"z" * 1000
    (src / "leader-epoch-checkpoint").unlink()
    fut.copy_pass(6)
    assert not (dst / "leader-epoch-checkpoint").exists()
    assert fut.size_in_bytes() == 1015 and fut.copied_end_offset == 6
    fut.current_end_offset = 9
    assert fut.offset_lag() == 3


def test_swap_keeps_every_record(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b], LogConfig(segment_bytes=4096), clock)
    logs.load()
    plog = logs.get_or_create("t", 0)
    assert logs.log_dir_of("t", 0) == a
    for i in range(100):
        plog.append_as_leader(build_batch([Record(timestamp=1, key=None, value=b"%04d" % i)]),
                              leader_epoch=0, now_ms=clock())
    assert len(plog.segments) > 1
    fut = logs.create_future("t", 0, b)
    fut.copy_pass(plog.log_end_offset)
    for i in range(100, 120):
        plog.append_as_leader(build_batch([Record(timestamp=1, key=None, value=b"%04d" % i)]),
                              leader_epoch=0, now_ms=clock())
    new = logs.complete_future(fut)
    assert logs.get("t", 0) is new and logs.log_dir_of("t", 0) == b
    assert new.dir == b / "t-0" and new.log_end_offset == 120
    assert not (a / "t-0").exists() and any(p.name.endswith("-delete") for p in a.iterdir())
    assert not any(p.name.endswith("-future") for p in b.iterdir())
    assert new.size_in_bytes == plog.size_in_bytes
    values: list[bytes] = []
    while len(values) < 120:
        chunk = new.read(len(values), 1 << 20, 120)
        got = [r.value or b"" for r in decode_records(chunk.read_bytes())]
        assert got, len(values)
        values += got  # one record per batch: reads start where the last ended
    assert values == [b"%04d" % i for i in range(120)]
    logs.shutdown()


def test_a_move_cut_short_by_a_restart_is_kept_and_starts_over(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b], LogConfig(segment_bytes=4096), clock)
    logs.load()
    plog = logs.get_or_create("t.x", 0)  # a dot in the topic name, as Kafka allows
    for i in range(50):
        plog.append_as_leader(build_batch([Record(timestamp=1, key=None, value=b"%04d" % i)]),
                              leader_epoch=0, now_ms=clock())
    fut = logs.create_future("t.x", 0, b)
    fut.copy_pass(plog.log_end_offset)
    (fut.path / f"{99999:020d}.log").write_bytes(b"stale")  # must not survive the restart
    gone = b / "gone-0.0123456789abcdef-future"  # a partition no longer here
    gone.mkdir()
    same = a / "t.x-0.fedcba9876543210-future"  # a copy in the log's own dir
    same.mkdir()
    logs.shutdown()

    logs = LogManager([a, b], LogConfig(segment_bytes=4096), clock)
    logs.load()
    resumed = logs.future_of("t.x", 0)
    assert resumed is not None and resumed.path == fut.path and resumed.log_dir == b
    assert list(resumed.path.iterdir()) == [] and resumed.copied == {}
    assert [f.path for f in logs.future_logs()] == [fut.path]
    plog = logs.get("t.x", 0)
    assert plog is not None
    resumed.copy_pass(plog.log_end_offset)
    new = logs.complete_future(resumed)
    assert logs.log_dir_of("t.x", 0) == b and new.log_end_offset == 50
    assert [r.value for r in new.read_records(0)] == [b"%04d" % i for i in range(50)]
    assert not (b / f"t.x-0/{99999:020d}.log").exists()
    logs._delete_pending_dirs(0, force=True)
    assert not gone.exists() and not same.exists()
    logs.shutdown()


def test_an_io_error_on_the_log_a_move_swapped_out_takes_no_dir_offline(tmp_path: Path) -> None:
    """The periodic flush runs on its own thread over a snapshot of the logs: it may flush
    the old log after the swap renamed its directory away. That write fails (its path is
    gone) and must not take the source dir offline, which is the metadata log's dir in a
    default setup, where it halted the node (a CI failure of tests/integration/test_jbod)."""
    a, b = tmp_path / "a", tmp_path / "b"
    failed: list[Path] = []
    logs = LogManager([a, b], LogConfig(segment_bytes=4096), clock)
    logs.dir_failure_listeners.append(failed.append)
    logs.load()
    old = logs.get_or_create("t", 0)
    for i in range(20):
        old.append_as_leader(build_batch([Record(timestamp=1, key=None, value=b"%04d" % i)]),
                             leader_epoch=0, now_ms=clock())
    fut = logs.create_future("t", 0, b)
    fut.copy_pass(old.log_end_offset)
    new = logs.complete_future(fut)
    old.epoch_cache.assign(1, old.log_end_offset, persist=False)  # as a new epoch leaves it
    try:
        old.flush()
    except OSError as exc:
        logs.fail_log(old, exc)
    else:
        raise AssertionError("the swapped-out log's directory is gone: its flush must fail")
    assert failed == [] and logs.offline_dirs == set() and logs.get("t", 0) is new
    logs.fail_log(new, OSError("a real fault in b"))
    assert failed == [b] and logs.offline_dirs == {b}
    logs.shutdown()
