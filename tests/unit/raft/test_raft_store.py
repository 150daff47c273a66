"""The in-memory LogStore and the LeaderChange control record codec."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.control import decode_leader_change, encode_leader_change
from raft.messages import Batch, SnapshotId
from raft.store import MemoryLogStore


def filled() -> MemoryLogStore:
    log = MemoryLogStore()
    log.append((b"a", b"b"), 1)  # 0-1
    log.append((b"c",), 1)  # 2
    log.append((b"d", b"e", b"f"), 3)  # 3-5
    log.append((b"g",), 4)  # 6
    return log


def test_end_offset_for_epoch_like_leader_epoch_cache() -> None:
    log = filled()
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(9) == (4, 7)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    assert [log.epoch_at(o) for o in range(8)] == [1, 1, 1, 3, 3, 3, 4, -1]


def test_truncate_mid_batch_and_epochs_follow() -> None:
    log = filled()
    log.truncate_to(4)
    assert log.end_offset == 4
    assert [r for b in log.read(0, 1 << 20) for r in b.records] == [b"a", b"b", b"c", b"d"]
    assert log.end_offset_for_epoch(4) == (3, 4)
    log.truncate_to(3)
    assert log.last_epoch() == 1 and log.end_offset_for_epoch(9) == (1, 3)


def test_an_epoch_with_no_records_left_does_not_claim_the_next_epochs_offsets() -> None:
    # sim seed 1796552298188: a log that lost its head up to its end kept its last
    # epoch (3) at its new start; a leader whose log then grew in epoch 4 from there
    # validated a follower's stale epoch-3 suffix as if it matched, and the follower
    # committed a record the quorum had replaced
    log = filled()
    log.lose_head(7)
    assert log.log_start_offset == 7 and log.end_offset == 7
    log.append((b"h",), 5)  # 7
    assert log.end_offset_for_epoch(4) == (-1, -1)
    assert log.end_offset_for_epoch(5) == (5, 8)
    assert log.epoch_at(7) == 5


def test_crash_loses_only_unflushed() -> None:
    log = filled()
    log.flush()
    log.append((b"h",), 4)
    assert log.flushed_offset == 7 and log.end_offset == 8
    log.crash()
    assert log.end_offset == 7


def test_follower_append_must_continue_the_log() -> None:
    log = filled()
    with pytest.raises(ValueError):
        log.append_batches((Batch(9, 4, (b"x",)),))
    log.append_batches((Batch(7, 5, (b"x",)),))
    assert log.end_offset == 8


def test_read_respects_max_bytes_but_returns_one_batch() -> None:
    log = filled()
    assert len(log.read(0, 1)) == 1
    assert [b.base_offset for b in log.read(2, 1 << 20)] == [2, 3, 6]
    assert log.read(7, 100) == []


def test_snapshot_that_agrees_moves_log_start() -> None:
    log = filled()
    log.flush()
    log.store_snapshot(SnapshotId(4, 3), b"snap")
    assert log.log_start_offset == 4
    assert [b.base_offset for b in log.read(4, 1 << 20)] == [4, 6]
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.latest_snapshot() == SnapshotId(4, 3)


def test_snapshot_that_disagrees_replaces_the_log() -> None:
    log = filled()
    log.flush()
    log.store_snapshot(SnapshotId(5, 2), b"other")
    assert (log.log_start_offset, log.end_offset, log.last_epoch()) == (5, 5, 2)
    assert log.read(0, 100) == []


def test_leader_change_record_round_trip() -> None:
    v = encode_leader_change(2, (1, 2, 3), (2, 3))
    assert decode_leader_change(v) == (2, (1, 2, 3), (2, 3))


@given(st.binary(max_size=64))
def test_leader_change_decoder_rejects_garbage_cleanly(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        decode_leader_change(data)


def test_leader_change_decoder_caps_lengths() -> None:
    huge = b"\x00\x00\x00\x00\x00\x01" + b"\xff\xff\xff\x7f"
    with pytest.raises(ValueError):
        decode_leader_change(huge)
