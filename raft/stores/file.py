"""A simple durable store for the metadata log: a stepping stone until the
partition log engine (broker.log) carries it through broker/metadata/log_store.py.

Layout under `metadata.log.dir`, named as KRaft names them:
  quorum-state                                  JSON, replaced atomically
  __cluster_metadata-0/00000000000000000000.log v2 record batches
  __cluster_metadata-0/<offset 20>-<epoch 10>.checkpoint   snapshots

The whole log is also held in memory (MemoryLogStore): the metadata log is
small and snapshots bound it.  On open, a torn tail (short or bad-CRC batch)
is cut off, as Kafka's log recovery does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from broker.util.files import atomic_write as atomic_write
from broker.util.files import fsync_dir as fsync_dir
from raft.kafka_messages import CorruptBatch, batch_length_at, decode_batches, encode_batch
from raft.messages import Batch, SnapshotId
from raft.store import MemoryLogStore, QuorumState

PARTITION_DIR = "__cluster_metadata-0"
LOG_FILE = "00000000000000000000.log"
MAX_QUORUM_STATE_BYTES = 64 * 1024
MAX_SNAPSHOT_BYTES = 1 << 31


class FileQuorumStateStore:
    """`quorum-state`, in the JSON shape KRaft writes."""

    def __init__(self, log_dir: str | Path) -> None:
        self.path = Path(log_dir) / "quorum-state"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def read(self) -> QuorumState:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return QuorumState()
        if len(raw) > MAX_QUORUM_STATE_BYTES:
            raise ValueError(f"{self.path}: {len(raw)} bytes, more than a quorum state holds")
        d = json.loads(raw)
        return QuorumState(int(d["leaderEpoch"]), int(d["leaderId"]), int(d["votedId"]))

    def write(self, state: QuorumState) -> None:
        doc = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.epoch,
               "votedId": state.voted_for, "appliedOffset": 0, "currentVoters": [],
               "data_version": 0}
        atomic_write(self.path, json.dumps(doc).encode())


class FileLogStore(MemoryLogStore):
    def __init__(self, log_dir: str | Path) -> None:
        super().__init__()
        self.dir = Path(log_dir) / PARTITION_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / LOG_FILE
        self._load_snapshots()
        self._recover_log()
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    # ----------------------------------------------------------------- opening

    def _snapshot_path(self, sid: SnapshotId) -> Path:
        return self.dir / f"{sid.end_offset:020d}-{sid.epoch:010d}.checkpoint"

    def _load_snapshots(self) -> None:
        for p in sorted(self.dir.glob("*.checkpoint")):
            off, _, ep = p.stem.partition("-")
            if not (off.isdigit() and ep.isdigit()):
                continue
            if p.stat().st_size > MAX_SNAPSHOT_BYTES:
                raise ValueError(f"{p}: snapshot larger than {MAX_SNAPSHOT_BYTES} bytes")
            sid = SnapshotId(int(off), int(ep))
            self._snapshots[sid] = p.read_bytes()
            if self._latest is None or sid.end_offset > self._latest.end_offset:
                self._latest = sid
        for p in self.dir.glob("*.tmp"):
            p.unlink()
        if self._latest is not None:
            self._start = self._flushed = self._latest.end_offset

    def _recover_log(self) -> None:
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            data = b""
        pos = 0
        good: list[Batch] = []
        while True:
            n = batch_length_at(data, pos)
            if n is None:
                break
            try:
                batches = decode_batches(data[pos : pos + n])
            except CorruptBatch:
                break
            good.extend(batches)
            pos += n
        if pos != len(data):
            with open(self.log_path, "r+b") as f:
                f.truncate(pos)
                os.fsync(f.fileno())
        snap = self._latest
        changed = pos != len(data)
        for b in good:
            if snap is not None and b.base_offset < snap.end_offset:
                changed = True  # already in the snapshot (a crash before the rewrite)
                if b.next_offset <= snap.end_offset:
                    continue
                cut = snap.end_offset - b.base_offset
                b = Batch(snap.end_offset, b.epoch, b.records[cut:], b.control,
                          control_type=b.control_type)
            if not self._batches and snap is None:
                self._start = b.base_offset
            if b.base_offset != self.end_offset:
                changed = True  # a gap: what follows cannot be trusted
                break
            self._add(b)
        self._flushed = self.end_offset
        if changed:
            self._rewrite()

    def _rewrite(self) -> None:
        atomic_write(self.log_path, b"".join(encode_batch(b) for b in self._batches))
        if hasattr(self, "_fd"):
            os.close(self._fd)
            self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    # ------------------------------------------------------------------ writes

    def append(self, records: tuple[bytes, ...], epoch: int, control: bool = False,
               timestamp: int = 0, control_type: int = 2) -> Batch:
        batch = super().append(records, epoch, control, timestamp, control_type)
        self._write(encode_batch(batch))
        return batch

    def append_batches(self, batches: tuple[Batch, ...]) -> None:
        super().append_batches(batches)
        self._write(b"".join(encode_batch(b) for b in batches))

    def sync(self) -> None:
        # writes go straight to the OS (no user-space buffer), so one fsync covers
        # everything written before it started, whichever thread runs it
        os.fsync(self._fd)

    def flush(self) -> None:
        if self.flushed_offset < self.end_offset:
            self.sync()
        super().flush()

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        super().truncate_to(offset)
        self._rewrite()
        self._flushed = self.end_offset

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.flush()
        atomic_write(self._snapshot_path(snapshot_id), data)
        super().store_snapshot(snapshot_id, data)
        for p in self.dir.glob("*.checkpoint"):
            off, _, ep = p.stem.partition("-")
            if off.isdigit() and ep.isdigit() and SnapshotId(int(off), int(ep)) not in (
                self._snapshots
            ):
                p.unlink()
        self._rewrite()

    def close(self) -> None:
        self.flush()
        os.close(self._fd)
