"""broker/metadata/log_store.py (the Raft log on broker.log) behaves exactly like
the in-memory LogStore the simulator verifies, operation for operation, and
keeps its state across reopen."""

from __future__ import annotations

import pathlib
from random import Random

import pytest

from broker.metadata.log_store import MetadataLogStore
from raft.messages import Batch, SnapshotId
from raft.store import MemoryLogStore


def observe(s: MemoryLogStore | MetadataLogStore) -> tuple[object, ...]:
    batches = s.read(s.log_start_offset, 1 << 30)
    # a store may hand out the whole batch holding the log start; readers skip below it
    records = [(b.base_offset + i, b.epoch, r, b.control)
               for b in batches for i, r in enumerate(b.records)
               if b.base_offset + i >= s.log_start_offset]
    # an epoch ending exactly at the log start may or may not be remembered: the core
    # answers that case from the snapshot id
    start = s.log_start_offset
    epochs = tuple(
        r if r[1] > start or start == 0 else (-1, -1)
        for r in (s.end_offset_for_epoch(e) for e in range(0, 8))
    )
    return (s.log_start_offset, s.end_offset, s.last_epoch(), records, epochs,
            s.latest_snapshot(), [s.epoch_at(o) for o in range(s.end_offset + 1)])


@pytest.mark.parametrize("seed", range(12))
def test_same_behaviour_as_memory_store(tmp_path: pathlib.Path, seed: int) -> None:
    rng = Random(seed)
    mem = MemoryLogStore()
    disk = MetadataLogStore(tmp_path / "d", segment_bytes=2048)
    epoch = 1
    for _step in range(60):
        op = rng.random()
        if op < 0.55:
            n = rng.randint(1, 4)
            recs = tuple(rng.randbytes(rng.randint(0, 40)) for _ in range(n))
            if rng.random() < 0.2:
                epoch += 1
            ctl = rng.random() < 0.1
            assert mem.append(recs, epoch, ctl) == disk.append(recs, epoch, ctl)
        elif op < 0.65:
            b = Batch(mem.end_offset, epoch, (b"f1", b"f2"))
            mem.append_batches((b,))
            disk.append_batches((b,))
        elif op < 0.75 and mem.end_offset > mem.log_start_offset:
            # truncate at a batch boundary, as Raft's diverging epochs and crashes do
            bounds = [b.base_offset for b in mem.read(mem.log_start_offset, 1 << 30)]
            cut = rng.choice(bounds)
            mem.truncate_to(cut)
            disk.truncate_to(cut)
        elif op < 0.85 and mem.end_offset > mem.log_start_offset:
            mem.flush()
            disk.flush()
            bounds = [b.next_offset for b in mem.read(mem.log_start_offset, 1 << 30)]
            end = rng.choice(bounds)
            sid = SnapshotId(end, mem.epoch_at(end - 1))
            mem.store_snapshot(sid, b"snap%d" % end)
            disk.store_snapshot(sid, b"snap%d" % end)
            assert disk.read_snapshot(sid, 0, 100) == b"snap%d" % end
        elif op < 0.9:
            end = mem.end_offset + rng.randint(1, 5)
            sid = SnapshotId(end, epoch)
            mem.store_snapshot(sid, b"far")
            disk.store_snapshot(sid, b"far")
        else:
            mem.flush()
            disk.flush()
        assert observe(mem) == observe(disk)
    disk.close()
    again = MetadataLogStore(tmp_path / "d", segment_bytes=2048)
    assert observe(again) == observe(mem)
    again.close()


def test_kafka_layout(tmp_path: pathlib.Path) -> None:
    s = MetadataLogStore(tmp_path)
    s.append((b"a",), 1, control=True)
    s.flush()
    s.store_snapshot(SnapshotId(1, 1), b"x")
    s.close()
    names = {p.name for p in (tmp_path / "__cluster_metadata-0").iterdir()}
    assert "00000000000000000000.log" in names
    assert "leader-epoch-checkpoint" in names
    assert "00000000000000000001-0000000001.checkpoint" in names


def test_tail_read_matches_the_segment(tmp_path: pathlib.Path) -> None:
    """The newest batch, served from memory right after append, equals what the
    segment holds, and no stale tail survives truncation or a follower append."""
    s = MetadataLogStore(tmp_path / "d")
    b1 = s.append((b"a" * 256, b"b"), 1)
    b2 = s.append((b"c",), 1, control=True)
    hot = s.read(b2.base_offset, 1 << 20)
    cold = MetadataLogStore(tmp_path / "d").read(b2.base_offset, 1 << 20)
    assert hot == cold and [b.raw for b in hot] == [b.raw for b in cold]
    assert hot[0].control and hot[0].records == (b"c",)
    s.truncate_to(b2.base_offset)
    assert s.read(b1.base_offset, 1 << 20) == [Batch(0, 1, (b"a" * 256, b"b"))]
    s.append_batches((Batch(b2.base_offset, 2, (b"d",)),))
    assert s.read(b2.base_offset, 1 << 20) == [Batch(b2.base_offset, 2, (b"d",))]
    b3 = s.append((b"e",), 2)
    assert s.read(b3.base_offset, 1 << 20) == [Batch(b3.base_offset, 2, (b"e",))]
    assert s.read(b1.base_offset, 1 << 20)[-1] == Batch(b3.base_offset, 2, (b"e",))
