"""Storage interfaces the core writes through, and in-memory versions of them.

The core calls these synchronously: when a core method returns, everything it
wrote is in the store, and what it asked to be flushed is flushed.  Messages it
returns may therefore be sent at once (votes are answered only after the
quorum state is durable; the leader counts only its flushed offset).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol

from raft.messages import Batch, SnapshotId


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What KRaft keeps in `quorum-state`: epoch, leader and vote."""

    epoch: int = 0
    leader_id: int = -1
    voted_for: int = -1


class QuorumStateStore(Protocol):
    def read(self) -> QuorumState: ...

    def write(self, state: QuorumState) -> None:
        """Durable and atomic when it returns."""


class LogStore(Protocol):
    """The replicated log: record batches, their epochs, and snapshots."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    def last_epoch(self) -> int:
        """Epoch of the last record, else of the latest snapshot, else 0."""

    def append(self, records: tuple[bytes, ...], epoch: int, control: bool = False,
               timestamp: int = 0, control_type: int = 2) -> Batch:
        """Leader append: assigns offsets from end_offset; `timestamp` is the append
        time (wall-clock ms) the batch carries; `control_type` the control records'
        type when `control`."""

    def append_batches(self, batches: tuple[Batch, ...]) -> None:
        """Follower append: the first batch starts at end_offset."""

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        """Whole batches from the one holding `from_offset`; at least one
        batch if any exist, then up to max_bytes."""

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or above `offset`."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, its end offset), or
        (-1, -1) if the log holds no such epoch."""

    def epoch_at(self, offset: int) -> int:
        """Epoch of the record at `offset` (-1 if absent)."""

    def flush(self) -> None:
        """Make everything appended durable (sync() then mark_flushed(end))."""

    def sync(self) -> None:
        """Make everything written so far durable; may run in another thread
        while the event loop appends (no bookkeeping here)."""

    def mark_flushed(self, offset: int) -> None:
        """Record that everything below `offset` is durable (after a sync)."""

    def latest_snapshot(self) -> SnapshotId | None: ...

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None: ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes: ...

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Keep a snapshot durably.  If the log agrees with it (holds the
        record before its end offset with its epoch) the log start moves up to
        its end offset; otherwise the whole log is replaced by it (and so is a log
        that lost its head, whose start no snapshot covers, even by an older one)."""


class MemoryQuorumStateStore:
    def __init__(self) -> None:
        self.state = QuorumState()
        self.writes = 0

    def read(self) -> QuorumState:
        return self.state

    def write(self, state: QuorumState) -> None:
        self.state = state
        self.writes += 1


class MemoryLogStore:
    """An in-memory log.  `crash()` drops what was not flushed, as a power
    loss would; snapshots and the quorum state are written durably."""

    def __init__(self) -> None:
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._start = 0
        self._flushed = 0
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._latest: SnapshotId | None = None
        # (epoch, start offset) like Kafka's leader-epoch-checkpoint
        self._epochs: list[tuple[int, int]] = []
        self.min_truncation: int | None = None

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self._start

    @property
    def flushed_offset(self) -> int:
        return min(self._flushed, self.end_offset)

    def last_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        if self._latest is not None:
            return self._latest.epoch
        return 0

    def _add(self, batch: Batch) -> None:
        if not self._epochs or self._epochs[-1][0] < batch.epoch:
            # An entry left with no records of its own (a log whose head was lost up to
            # its end keeps the epoch of its last record at its new start) would claim
            # this batch's offsets for an older epoch; Kafka's epoch cache drops it too.
            while self._epochs and self._epochs[-1][1] >= batch.base_offset:
                self._epochs.pop()
            self._epochs.append((batch.epoch, batch.base_offset))
        elif self._epochs[-1][0] > batch.epoch:
            raise ValueError(f"epoch {batch.epoch} below {self._epochs[-1][0]}")
        self._batches.append(batch)
        self._bases.append(batch.base_offset)

    def append(self, records: tuple[bytes, ...], epoch: int, control: bool = False,
               timestamp: int = 0, control_type: int = 2) -> Batch:
        if not records:
            raise ValueError("empty batch")
        batch = Batch(self.end_offset, epoch, tuple(records), control, timestamp=timestamp,
                      control_type=control_type)
        self._add(batch)
        return batch

    def append_batches(self, batches: tuple[Batch, ...]) -> None:
        for b in batches:
            if b.base_offset != self.end_offset:
                raise ValueError(f"batch at {b.base_offset}, log end {self.end_offset}")
            self._add(b)

    def _index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        if from_offset < self._start or from_offset >= self.end_offset:
            return []
        i = max(self._index(from_offset), 0)
        out: list[Batch] = []
        size = 0
        while i < len(self._batches):
            b = self._batches[i]
            if out and size + b.size_bytes > max_bytes:
                break
            out.append(b)
            size += b.size_bytes
            i += 1
        return out

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._start:
            raise ValueError(f"truncate to {offset} below log start {self._start}")
        self.min_truncation = (
            offset if self.min_truncation is None else min(self.min_truncation, offset)
        )
        i = self._index(offset)
        if i >= 0 and self._batches[i].base_offset < offset:
            b = self._batches[i]
            keep = offset - b.base_offset
            self._batches[i] = Batch(b.base_offset, b.epoch, b.records[:keep], b.control,
                                     control_type=b.control_type)
            i += 1
        del self._batches[max(i, 0) :]
        del self._bases[max(i, 0) :]
        self._epochs = [p for p in self._epochs if p[1] < offset]
        self._flushed = min(self._flushed, offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found = -1
        for i, (e, _start) in enumerate(self._epochs):
            if e > epoch:
                break
            found = i
        if found < 0:
            return (-1, -1)
        e = self._epochs[found][0]
        end = self._epochs[found + 1][1] if found + 1 < len(self._epochs) else self.end_offset
        return (e, end)

    def epoch_at(self, offset: int) -> int:
        if offset < self._start or offset >= self.end_offset:
            return -1
        return self._batches[self._index(offset)].epoch

    def flush(self) -> None:
        self._flushed = self.end_offset

    def sync(self) -> None:
        pass

    def mark_flushed(self, offset: int) -> None:
        self._flushed = max(self._flushed, min(offset, self.end_offset))

    def latest_snapshot(self) -> SnapshotId | None:
        return self._latest

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        data = self._snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self._snapshots[snapshot_id][position : position + max_bytes]

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots[snapshot_id] = data
        if self._latest is None or snapshot_id.end_offset > self._latest.end_offset:
            self._latest = snapshot_id
        end = snapshot_id.end_offset
        if end < self._start and not any(s.end_offset >= self._start for s in self._snapshots):
            # the log lost its head (nothing covers its start): this older snapshot and
            # the log cannot be joined, so the snapshot replaces the log
            self._replace_by(snapshot_id)
            return
        if end <= self._start:
            return
        agrees = (
            self.end_offset >= end
            and self.flushed_offset >= end
            and self.epoch_at(end - 1) == snapshot_id.epoch
        )
        if agrees:
            self._delete_before(end)
        else:
            self._replace_by(snapshot_id)
            return
        # keep the latest two: a follower part-way through the previous one can finish
        for sid in sorted(self._snapshots)[:-2]:
            del self._snapshots[sid]

    def _replace_by(self, snapshot_id: SnapshotId) -> None:
        end = snapshot_id.end_offset
        self._batches.clear()
        self._bases.clear()
        self._epochs.clear()
        self._start = end
        self._flushed = end
        self._snapshots = {snapshot_id: self._snapshots[snapshot_id]}
        self._latest = snapshot_id

    def _delete_before(self, offset: int) -> None:
        i = self._index(offset)
        if i >= 0 and self._batches[i].base_offset < offset:
            b = self._batches[i]
            cut = offset - b.base_offset
            self._batches[i] = Batch(offset, b.epoch, b.records[cut:], b.control,
                                     control_type=b.control_type)
            if not self._batches[i].records:
                i += 1
        del self._batches[: max(i, 0)]
        del self._bases[: max(i, 0)]
        self._bases = [b.base_offset for b in self._batches]
        keep = [p for p in self._epochs if p[1] <= offset]
        rest = [p for p in self._epochs if p[1] > offset]
        self._epochs = ([(keep[-1][0], offset)] if keep else []) + rest
        self._start = offset

    def crash(self) -> None:
        """Lose everything not flushed (for the simulator)."""
        if self._flushed < self.end_offset:
            saved = self.min_truncation
            self.truncate_to(max(self._flushed, self._start))
            self.min_truncation = saved

    def lose_head(self, offset: int) -> None:
        """Lose every record below `offset` with no snapshot to cover them, as a disk
        does when something else deletes the log's first segments (issue 17: the
        partition manager's retention on the metadata log).  For the simulator."""
        offset = min(max(offset, self._start), self.end_offset)
        if offset > self._start:
            self._delete_before(offset)
