"""The metadata log `__cluster_metadata-0` on the partition log engine.

Implements raft.store.LogStore over broker.log.PartitionLog, so the Raft log is
stored in Kafka's own segment format (`<base offset>.log`, `.index`,
`.timeindex`, `leader-epoch-checkpoint`) like every partition.  Snapshots are
KRaft's `<end offset 20>-<epoch 10>.checkpoint` files in the same directory,
written atomically.  Lives in broker/ because it is built on the partition log engine;
raft/ defines the LogStore it implements and imports only broker's protocol and file
helpers (floor 1), never the log engine.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import replace
from pathlib import Path

from broker.log.config import LONG_MAX, LogConfig
from broker.log.log import PartitionLog, TopicPartition
from raft.kafka_messages import decode_batches, encode_batch, encode_batches
from raft.messages import Batch, SnapshotId
from raft.stores.file import MAX_SNAPSHOT_BYTES, PARTITION_DIR, atomic_write

METADATA_PARTITION = TopicPartition("__cluster_metadata", 0)
KEEP_SNAPSHOTS = 2


class MetadataLogStore:
    def __init__(self, log_dir: str | Path, *, segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.dir = Path(log_dir) / PARTITION_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self._snapshots: dict[SnapshotId, Path] = {}
        for p in self.dir.glob("*.checkpoint"):
            off, _, ep = p.stem.partition("-")
            if off.isdigit() and ep.isdigit():
                self._snapshots[SnapshotId(int(off), int(ep))] = p
        for p in self.dir.glob("*.checkpoint.tmp"):
            p.unlink()
        latest = self.latest_snapshot()
        start = latest.end_offset if latest else 0
        self.plog = PartitionLog(
            self.dir, METADATA_PARTITION,
            # Raft owns this log's length: segments roll by size only, and nothing is
            # deleted by time (retention_ms=-1) -- only snapshots move the log start
            LogConfig(segment_bytes=segment_bytes, segment_ms=LONG_MAX, file_delete_delay_ms=0,
                      max_message_bytes=8 * 1024 * 1024, retention_ms=-1),
            recovery_point=0, log_start_offset=start, clean_shutdown=False,
        )
        if latest is not None and self.plog.log_end_offset < latest.end_offset:
            # the log is behind its own snapshot: the snapshot is the log now
            self.plog.truncate_fully_and_start_at(latest.end_offset)
        self._flushed = self.plog.log_end_offset
        # the batch this store appended last, as long as it is the log's tail: a leader
        # reads it back for every Fetch answer and commit, so skip the read and decode
        self._tail: Batch | None = None

    # --------------------------------------------------------------- positions

    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def flushed_offset(self) -> int:
        return min(self._flushed, self.plog.log_end_offset)

    def last_epoch(self) -> int:
        if self.end_offset > self.log_start_offset:
            return self.epoch_at(self.end_offset - 1)
        snap = self.latest_snapshot()
        return snap.epoch if snap is not None else 0

    def _epochs(self) -> list[tuple[int, int]]:
        return [(e, s) for e, s in self.plog.epoch_cache.entries() if s <= self.end_offset]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        # raft's contract (largest epoch <= requested, its end), not OffsetForLeaderEpoch's
        entries = self._epochs()
        i = bisect.bisect_right([e for e, _ in entries], epoch) - 1
        if i < 0:
            return (-1, -1)
        end = entries[i + 1][1] if i + 1 < len(entries) else self.end_offset
        return (entries[i][0], end)

    def epoch_at(self, offset: int) -> int:
        if offset < self.log_start_offset or offset >= self.end_offset:
            return -1
        return self.plog.epoch_cache.epoch_for_offset(offset)

    # ------------------------------------------------------------------- log

    def append(self, records: tuple[bytes, ...], epoch: int, control: bool = False,
               timestamp: int = 0, control_type: int = 2) -> Batch:
        if not records:
            raise ValueError("empty batch")
        batch = Batch(self.end_offset, epoch, tuple(records), control, timestamp=timestamp,
                      control_type=control_type)
        raw = encode_batch(batch)
        self._tail = None
        self.plog.append_as_follower(raw)
        self._tail = replace(batch, raw=raw)
        return batch

    def append_batches(self, batches: tuple[Batch, ...]) -> None:
        if batches and batches[0].base_offset != self.end_offset:
            raise ValueError(f"batch at {batches[0].base_offset}, log end {self.end_offset}")
        self._tail = None
        self.plog.append_as_follower(encode_batches(batches))

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        end = self.end_offset
        if from_offset < self.log_start_offset or from_offset >= end:
            return []
        tail = self._tail
        if tail is not None and tail.base_offset == from_offset and tail.next_offset == end:
            return [tail]
        out: list[Batch] = []
        size = 0
        pos = from_offset
        while pos < end and (not out or size < max_bytes):
            data = self.plog.read(pos, max_bytes - size if out else max_bytes, end).read_bytes()
            got = decode_batches(data)
            if not got:
                break
            out += got
            size += len(data)
            pos = got[-1].next_offset
        return out

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.log_start_offset:
            raise ValueError(f"truncate to {offset} below log start {self.log_start_offset}")
        self._tail = None
        self.plog.truncate_to(offset)
        self._flushed = min(self._flushed, self.end_offset)

    def flush(self) -> None:
        end = self.end_offset
        self.sync()
        self._flushed = end

    def sync(self) -> None:
        # Only the active segment's .log needs the fsync: a rolled segment is flushed
        # on roll, and this store always recovers on open, rebuilding the indexes, so
        # their fsyncs (two more per commit) buy nothing here.
        os.fsync(self.plog.active_segment.fd)

    def mark_flushed(self, offset: int) -> None:
        self._flushed = max(self._flushed, min(offset, self.end_offset))

    # ------------------------------------------------------------- snapshots

    def latest_snapshot(self) -> SnapshotId | None:
        return max(self._snapshots, default=None)

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        p = self._snapshots.get(snapshot_id)
        return None if p is None else p.stat().st_size

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        with open(self._snapshots[snapshot_id], "rb") as f:
            f.seek(position)
            return f.read(min(max_bytes, MAX_SNAPSHOT_BYTES))

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.flush()
        path = self.dir / f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}.checkpoint"
        atomic_write(path, data)
        self._snapshots[snapshot_id] = path
        end = snapshot_id.end_offset
        start = self.log_start_offset
        if end < start and not any(s.end_offset >= start for s in self._snapshots):
            # the log lost its head (no snapshot covers its start): this older snapshot
            # cannot be joined to it, so it replaces the log, and the other snapshots go
            self._tail = None
            self.plog.truncate_fully_and_start_at(end)
            self._flushed = end
            for sid in [s for s in self._snapshots if s != snapshot_id]:
                self._snapshots.pop(sid).unlink(missing_ok=True)
            return
        if end > start:
            agrees = self.end_offset >= end and self.epoch_at(end - 1) == snapshot_id.epoch
            if agrees:
                self.plog.update_high_watermark(end)
                self.plog.delete_records_before(end)
            else:
                self._tail = None
                self.plog.truncate_fully_and_start_at(end)
                self._flushed = end
        for sid in sorted(self._snapshots)[:-KEEP_SNAPSHOTS]:
            self._snapshots.pop(sid).unlink(missing_ok=True)

    def close(self) -> None:
        self.flush()
        self.plog.close()
