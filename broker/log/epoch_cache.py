"""Leader-epoch cache: epoch -> start offset, persisted in `leader-epoch-checkpoint`.

Transitions (all here):
- assign(epoch, start): a new epoch later than the latest, starting at `start`.
  Entries with start >= `start` (an epoch earlier than the log claims) are dropped first.
- truncate_from_end(end): drop entries starting at or after `end` (log truncation).
- truncate_from_start(start): drop entries wholly before `start`, move the last one's
  start up to `start` (log start moved: retention, DeleteRecords).
- clear(): truncate fully.

Appends assign with persist=False: the entry is written (fsynced) by the log's next flush,
before the recovery point passes its start offset, so a crash before then re-scans the
batches that carry the epoch and assigns it again. This keeps an fsync per partition off
the first append of every new leader epoch (Kafka took leader-epoch-checkpoint fsyncs
out from under its log lock for the same reason, KAFKA-15046). Truncations still persist
at once, with fsync.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Final

from broker.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class LeaderEpochCache:
    def __init__(self, directory: Path | None, *, fsync: bool = True) -> None:
        self.path = None if directory is None else directory / LEADER_EPOCH_CHECKPOINT
        self.fsync = fsync
        self.epochs: list[int] = []
        self.starts: list[int] = []
        self.dirty = False
        if self.path is not None:
            try:
                entries = read_epoch_checkpoint(self.path)
            except (CheckpointError, OSError):
                entries = []  # rebuilt from the batches during recovery
            for e, o in entries:
                if (self.epochs and (e <= self.epochs[-1] or o < self.starts[-1])) or e < 0:
                    self.epochs, self.starts = [], []
                    break
                self.epochs.append(e)
                self.starts.append(o)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.epochs, self.starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def _persist(self) -> None:
        if self.path is not None:
            write_epoch_checkpoint(self.path, self.entries(), fsync=self.fsync)
        self.dirty = False

    def persist_if_dirty(self) -> None:
        """Write the entries assigned with persist=False; the log calls this before it
        moves its recovery point."""
        if self.dirty:
            self._persist()

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; return True if the cache changed."""
        if epoch < 0:
            return False
        if self.epochs and epoch <= self.epochs[-1]:
            if epoch == self.epochs[-1]:
                return False
            # An older epoch cannot start after a newer one: ignore (Kafka warns).
            return False
        while self.starts and self.starts[-1] >= start_offset:
            self.epochs.pop()
            self.starts.pop()
        self.epochs.append(epoch)
        self.starts.append(start_offset)
        if persist:
            self._persist()
        else:
            self.dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        i = bisect.bisect_left(self.starts, end_offset)
        if i < len(self.starts):
            del self.epochs[i:]
            del self.starts[i:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        i = bisect.bisect_right(self.starts, start_offset) - 1
        if i <= 0 and not (i == 0 and self.starts[0] < start_offset):
            return
        del self.epochs[:i]
        del self.starts[:i]
        self.starts[0] = start_offset
        self._persist()

    def clear(self) -> None:
        self.epochs, self.starts = [], []
        self._persist()

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, start offset of the next
        higher epoch) or (requested, LEO) for the latest epoch, as Kafka answers."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        hi = bisect.bisect_right(self.epochs, requested_epoch)
        if hi >= len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if hi == 0:
            return requested_epoch, self.starts[0]
        return self.epochs[hi - 1], self.starts[hi]
