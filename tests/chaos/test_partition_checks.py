"""The pure parts of the partition harness: the leader-epoch checks catch what they are
for, and the schedules are reproducible and cover every kind with every extra fault."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.chaos.checker import encode_value
from tests.chaos.epochs import (
    Batch,
    LeaderClaims,
    check_acked_positions,
    check_epochs_monotonic,
    compare_epoch_checkpoints,
    compare_replicas,
    read_batches,
    read_epoch_checkpoint,
    renumbered_by_client,
)
from tests.chaos.netns import cut_between
from tests.chaos.schedules import EXTRAS, KINDS, generate, one


def test_claims_flag_two_leaders_in_one_epoch_only() -> None:
    claims = LeaderClaims()
    claims.observe("raft", 3, 1, observer=1, at=0.1)
    claims.observe("raft", 3, 1, observer=2, at=0.2)
    claims.observe("raft", 4, 2, observer=2, at=0.3)   # a new epoch, a new leader: fine
    claims.observe("t-0", 5, -1, observer=4, at=0.3)   # no leader known: no claim
    assert claims.violations() == []
    claims.observe("raft", 4, 3, observer=3, at=0.4)
    (violation,) = claims.violations()
    assert "raft epoch 4" in violation and "2 (said by node 2" in violation


def test_acked_positions_find_an_acknowledged_record_overwritten() -> None:
    records = {0: [(0, 1, encode_value("a", 0)), (1, 1, encode_value("a", 1)),
                   (2, 2, encode_value("b", 7))]}
    ok = check_acked_positions({0: {("a", 0): 0, ("a", 1): 1}}, records)
    assert ok.misplaced == [] and ok.checked == 2
    assert ok.epoch_of_ack == {(0, ("a", 0)): 1, (0, ("a", 1)): 1}
    # acknowledged at offset 2 by one leader; another leader's record holds offset 2 now
    bad = check_acked_positions({0: {("a", 2): 2, ("a", 3): 9}}, records)
    assert [(m[1], m[3]) for m in bad.misplaced] == [
        (("a", 2), "holds ('b', 7)"), (("a", 3), "no record there")]


def test_epochs_must_not_go_down_along_the_log() -> None:
    up = {0: [(0, 1, b"a:0"), (1, 1, b"a:1"), (2, 3, b"a:2")]}
    assert check_epochs_monotonic(up) == []
    down = {0: [(0, 3, b"a:0"), (1, 2, b"a:1")]}
    assert check_epochs_monotonic(down) == ["partition 0: offset 1 has epoch 2 after epoch 3"]


def segment(batches: list[tuple[int, int, int, int]], torn: bool = False,
            producer: tuple[int, int] = (-1, -1)) -> bytes:
    """Batches (base, last, epoch, crc); with `producer` (id, epoch), each batch's base
    sequence is its base offset."""
    out = b""
    pid, producer_epoch = producer
    for base, last, epoch, crc in batches:
        header = struct.pack(">qiiBIhiqqqhi", base, 49, epoch, 2, crc, 0, last - base, 0, 0,
                             pid, producer_epoch, base if pid >= 0 else -1)
        out += header + bytes(12 + 49 - len(header))
    return out + (b"\x00" * 20 if torn else b"")


def test_read_batches_parses_segments_and_ignores_a_torn_tail(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(segment([(0, 4, 0, 11), (5, 5, 1, 12)]))
    (tmp_path / "00000000000000000006.log").write_bytes(
        segment([(6, 9, 1, 13)], torn=True, producer=(7, 2)))
    assert read_batches(tmp_path) == [Batch(0, 4, 0, 11), Batch(5, 5, 1, 12),
                                      Batch(6, 9, 1, 13, producer_id=7, producer_epoch=2,
                                            base_sequence=6)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 5\n")
    assert read_epoch_checkpoint(tmp_path) == [(0, 0), (1, 5)]


def test_replicas_compared_where_they_overlap() -> None:
    a = [Batch(0, 4, 0, 11), Batch(5, 5, 1, 12), Batch(6, 9, 1, 13)]
    assert compare_replicas({4: a, 5: a[1:], 6: a[:2]}) == []  # other starts and ends: fine
    same_epoch = [Batch(0, 4, 0, 11), Batch(5, 5, 1, 99)]
    (finding,) = compare_replicas({4: a, 5: same_epoch})
    assert "two leaders wrote in one epoch" in finding
    other_epoch = [Batch(0, 4, 0, 11), Batch(5, 5, 2, 12)]
    (finding,) = compare_replicas({4: a, 5: other_epoch})
    assert "not repaired" in finding
    split = [Batch(0, 4, 0, 11), Batch(5, 7, 1, 12)]
    assert compare_replicas({4: a, 5: split})  # other boundaries


def test_epoch_checkpoints_agree_above_the_log_starts() -> None:
    assert compare_epoch_checkpoints({4: [(0, 0), (1, 5)], 5: [(1, 5), (2, 9)]}, {}) == []
    assert compare_epoch_checkpoints({4: [(1, 5)], 5: [(1, 6)]}, {}) == [
        "epoch 1 starts at 5 on replica 4 but at 6 on replica 5"]
    # a replica whose log starts later has the epoch's start moved up: not a conflict
    assert compare_epoch_checkpoints({4: [(1, 5)], 5: [(1, 8)]}, {5: 8}) == []


def test_schedules_replay_and_cover_every_kind_with_every_extra() -> None:
    first = generate(1234, 18)
    assert first == generate(1234, 18)
    assert generate(1234, 3, first=7) == first[7:10]
    assert one(1234, 7) == first[7]
    assert {(s.kind, s.extra) for s in first} == {(k, e) for k in KINDS for e in EXTRAS}
    assert generate(1235, 18) != first
    for s in generate(99, 200):
        assert 2.5 <= s.duration_s <= 5.0
        assert 0 <= s.extra_at_s <= s.duration_s / 2
        assert sum(s.flap_phases) >= s.duration_s


def test_cut_between_blocks_both_directions_across_groups_only() -> None:
    assert cut_between([{"a"}, {"b", "c"}]) == {
        ("a", "b"), ("b", "a"), ("a", "c"), ("c", "a")}
    assert cut_between([{"a"}]) == set()


def test_a_record_sent_again_under_a_bumped_epoch_is_the_clients_duplicate() -> None:
    first = Batch(4203, 4203, 3, 1, producer_id=7, producer_epoch=0, base_sequence=2101)
    bumped = Batch(4206, 4206, 4, 2, producer_id=7, producer_epoch=1, base_sequence=0)
    new_id = Batch(4206, 4206, 4, 2, producer_id=9, producer_epoch=0, base_sequence=0)
    same = Batch(4206, 4206, 4, 2, producer_id=7, producer_epoch=0, base_sequence=2101)
    assert renumbered_by_client([first, bumped]) and renumbered_by_client([first, new_id])
    assert not renumbered_by_client([first, same])  # the broker appended a retry again
    assert not renumbered_by_client([first, bumped, same])
    plain = Batch(4206, 4206, 4, 2)  # no producer id: nothing says who sent it twice
    assert not renumbered_by_client([plain, Batch(4207, 4207, 4, 3)])
