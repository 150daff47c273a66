"""The active controller's view of the metadata log: committed image, working image, waiters.

Pure bookkeeping for the controller driver on the Raft leader. Transitions:

  append(records, last_offset, epoch, token) -> tokens done now
        the batch went to the Raft log at offsets ..last_offset: the working image
        includes it at once (the next request must see it); `token` (the caller's
        response or future) waits for its commit. With no records the token waits
        only for earlier writes (done at once when there are none).
  commit(high_watermark_offset) -> tokens
        every batch whose last offset is below the high watermark is committed:
        the committed image advances and their tokens are returned, in order.
  replay(records, last_offset, epoch)
        a batch written by someone else (a previous leader) committed while we follow:
        applied to both images.
  resign() -> tokens
        leadership lost: uncommitted batches may be truncated, so the working image
        falls back to the committed one and every waiting token is returned (answer
        them NOT_CONTROLLER).

The Controller's methods take `state.working`; the broker side serves `state.committed`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.metadata.delta import apply_records
from broker.metadata.image import MetadataImage


@dataclass
class PendingWrites:
    committed: MetadataImage
    working: MetadataImage = field(init=False)
    _waiting: deque[tuple[int, Any]] = field(default_factory=deque)
    _uncommitted: deque[tuple[int, int, list[Any]]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.working = self.committed

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def append(self, records: list[Any], last_offset: int = -1, epoch: int = 0,
               token: Any = None) -> list[Any]:
        """Record a batch appended at ..last_offset (or, with no records, just a waiter).
        Returns the tokens that are already complete (a waiter with nothing pending)."""
        if records:
            if last_offset <= self.working.offset:
                raise ValueError(f"offset {last_offset} does not follow {self.working.offset}")
            self.working = apply_records(self.working, records, last_offset, epoch)
            self._uncommitted.append((last_offset, epoch, records))
        elif not self._uncommitted and not self._waiting:
            return [token]
        # A token without records (validate-only, nothing to change) still waits for the
        # writes before it, so a client never fails to read what it was told exists.
        self._waiting.append((max(last_offset, self.working.offset), token))
        return []

    def commit(self, high_watermark: int) -> list[Any]:
        """Batches with last offset < high_watermark are committed; returns their tokens."""
        while self._uncommitted and self._uncommitted[0][0] < high_watermark:
            last, epoch, records = self._uncommitted.popleft()
            self.committed = apply_records(self.committed, records, last, epoch)
        if not self._uncommitted:
            self.working = self.committed
        done = []
        while self._waiting and self._waiting[0][0] < high_watermark:
            done.append(self._waiting.popleft()[1])
        return done

    def replay(self, records: Iterable[Any], last_offset: int, epoch: int) -> None:
        if self._uncommitted:
            raise RuntimeError("replay while this node has uncommitted writes of its own")
        self.committed = apply_records(self.committed, records, last_offset, epoch)
        self.working = self.committed

    def resign(self) -> list[Any]:
        self._uncommitted.clear()
        self.working = self.committed
        tokens = [t for _, t in self._waiting]
        self._waiting.clear()
        return tokens
