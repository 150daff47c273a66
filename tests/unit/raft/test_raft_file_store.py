"""The durable file store: recovery, atomic quorum state, snapshots across reopen."""

from __future__ import annotations

import json
import pathlib

from raft.messages import SnapshotId
from raft.store import QuorumState
from raft.stores.file import FileLogStore, FileQuorumStateStore


def test_quorum_state_round_trip_and_no_temp_left(tmp_path: pathlib.Path) -> None:
    qs = FileQuorumStateStore(tmp_path)
    assert qs.read() == QuorumState()
    qs.write(QuorumState(5, 2, 3))
    assert FileQuorumStateStore(tmp_path).read() == QuorumState(5, 2, 3)
    doc = json.loads((tmp_path / "quorum-state").read_text())
    assert (doc["leaderEpoch"], doc["leaderId"], doc["votedId"]) == (5, 2, 3)
    assert not list(tmp_path.glob("*.tmp"))


def test_log_survives_reopen(tmp_path: pathlib.Path) -> None:
    log = FileLogStore(tmp_path)
    log.append((b"a", b"b"), 1, control=True)
    log.append((b"c",), 2)
    log.flush()
    log.close()
    again = FileLogStore(tmp_path)
    assert again.end_offset == 3 and again.flushed_offset == 3
    batches = again.read(0, 1 << 20)
    assert [(b.base_offset, b.epoch, b.records, b.control) for b in batches] == [
        (0, 1, (b"a", b"b"), True), (2, 2, (b"c",), False)]


def test_torn_tail_is_cut_on_open(tmp_path: pathlib.Path) -> None:
    log = FileLogStore(tmp_path)
    log.append((b"a",), 1)
    log.append((b"b" * 100,), 1)
    log.flush()
    log.close()
    f = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    data = f.read_bytes()
    f.write_bytes(data[:-30])  # a write cut short by a crash
    again = FileLogStore(tmp_path)
    assert again.end_offset == 1
    again.append((b"c",), 2)
    again.flush()
    again.close()
    assert FileLogStore(tmp_path).end_offset == 2


def test_truncate_and_snapshot_survive_reopen(tmp_path: pathlib.Path) -> None:
    log = FileLogStore(tmp_path)
    for i in range(6):
        log.append((f"r{i}".encode(),), 1 if i < 3 else 2)
    log.flush()
    log.truncate_to(5)
    log.store_snapshot(SnapshotId(3, 1), b"state")
    assert (log.log_start_offset, log.end_offset) == (3, 5)
    log.close()
    again = FileLogStore(tmp_path)
    assert again.latest_snapshot() == SnapshotId(3, 1)
    assert again.read_snapshot(SnapshotId(3, 1), 0, 100) == b"state"
    assert (again.log_start_offset, again.end_offset) == (3, 5)
    assert [r for b in again.read(3, 1 << 20) for r in b.records] == [b"r3", b"r4"]
    assert again.end_offset_for_epoch(2) == (2, 5)
    assert again.end_offset_for_epoch(1) == log.end_offset_for_epoch(1)


def test_snapshot_newer_than_the_log_replaces_it(tmp_path: pathlib.Path) -> None:
    log = FileLogStore(tmp_path)
    log.append((b"a",), 1)
    log.flush()
    log.store_snapshot(SnapshotId(10, 3), b"s")
    log.close()
    again = FileLogStore(tmp_path)
    assert (again.log_start_offset, again.end_offset, again.last_epoch()) == (10, 10, 3)
