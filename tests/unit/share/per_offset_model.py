"""A reference model of broker/share/partition.py: the share-partition as it was written
first, one InFlight per offset in a dict. It is slow (each record costs several dict
operations per fetch, and every lock check walks every in-flight offset) but plain, so
test_share_partition.py runs random operation sequences on both and requires the same
answers and states from the span-based one.

The docstring of broker/share/partition.py describes the states and transitions both keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """What ShareFetch answers: AcquiredRecords (first, last inclusive, delivery count)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareLimits:
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


class SharePartition:
    """The in-flight records of one share-partition."""

    def __init__(self, start_offset: int, limits: ShareLimits) -> None:
        if start_offset < 0:
            raise ValueError("start offset must be >= 0")
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.limits = limits
        self.records: dict[int, InFlight] = {}
        # completed records the SPSO moved past since the last write (their final state)
        self.done: dict[int, tuple[RecordState, int]] = {}
        # records whose acquisition lock expired (Kafka's AcquisitionLockTimeoutPerSec)
        self.lock_timeouts = 0

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[tuple[int, int, int, int]],
                   limits: ShareLimits) -> SharePartition:
        """The share-partition a persisted state describes: (first, last, delivery state,
        delivery count) batches past `start_offset`; a persisted ACQUIRED (never written
        by Skiff) counts as AVAILABLE."""
        sp = cls(start_offset, limits)
        for first, last, state, count in batches:
            if last < sp.start_offset:
                continue
            try:
                kind = RecordState(state)
            except ValueError:
                kind = RecordState.AVAILABLE
            if kind is RecordState.ACQUIRED:
                kind = RecordState.AVAILABLE
            # offsets no batch names between the batches are AVAILABLE, never delivered
            for off in range(max(first, sp.start_offset), last + 1):
                sp.records[off] = InFlight(kind, max(0, count))
            sp.end_offset = max(sp.end_offset, last + 1)
        sp._advance()
        return sp

    def persisted_start(self) -> int:
        """The start offset the next write carries: the SPSO before the records done since
        the last write."""
        return min(self.done) if self.done else self.start_offset

    def persisted(self, upto: int) -> None:
        """A write built while the SPSO was `upto` was made: the records done before `upto`
        are in it and forgotten (ones done since stay for the next write)."""
        for off in [o for o in self.done if o < upto]:
            del self.done[off]

    def persisted_batches(self) -> list[tuple[int, int, int, int]]:
        """The state of [persisted_start, SPEO) as (first, last, delivery state, delivery
        count) batches of consecutive offsets with one state and count."""
        out: list[tuple[int, int, int, int]] = []
        for off in range(self.persisted_start(), self.end_offset):
            r = self.records.get(off)
            if off < self.start_offset:
                state, count = self.done.get(off, (RecordState.ACKNOWLEDGED, 1))
            else:
                state, count = ((RecordState.AVAILABLE, 0) if r is None
                                else (r.state, r.delivery_count))
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if out and out[-1][1] == off - 1 and out[-1][2:] == (int(state), count):
                out[-1] = (out[-1][0], off, int(state), count)
            else:
                out.append((off, off, int(state), count))
        return out

    # ---- reading -----------------------------------------------------------------------------

    def state_of(self, offset: int) -> InFlight:
        if offset < self.start_offset:
            return InFlight(RecordState.ACKNOWLEDGED)
        return self.records.get(offset) or InFlight(RecordState.AVAILABLE)

    def next_fetch_offset(self, now_ms: int) -> int:
        """The lowest offset that may be acquired: a redeliverable record in the window,
        else SPEO."""
        self.expire(now_ms)
        for off in range(self.start_offset, self.end_offset):
            r = self.records.get(off)
            if r is None or r.state is RecordState.AVAILABLE:
                return off
        return self.end_offset

    def can_acquire(self, now_ms: int) -> bool:
        return (self.next_fetch_offset(now_ms) < self.end_offset
                or self.end_offset - self.start_offset < self.limits.max_record_locks)

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, r in self.records.items()
                if r.state is RecordState.ACQUIRED and r.member_id == member_id]

    def acquired_by_anyone(self) -> bool:
        return any(r.state is RecordState.ACQUIRED for r in self.records.values())

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values()
                     if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # ---- transitions -------------------------------------------------------------------------

    def reset_start(self, offset: int) -> None:
        """The log's start moved past SPSO (retention, DeleteRecords): what is gone is gone."""
        if offset <= self.start_offset:
            return
        for off in range(self.start_offset, min(offset, self.end_offset)):
            self.records.pop(off, None)
        self.done.clear()
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)

    def skip(self, first: int, last: int) -> None:
        """Offsets never to deliver (a transaction marker's control batch): ARCHIVED, as far
        as they are new, with the offsets the log skipped before them."""
        for off in range(self.end_offset, last + 1):
            self.records[off] = InFlight(RecordState.ARCHIVED)
        self.end_offset = max(self.end_offset, last + 1)
        self._advance()

    def expire(self, now_ms: int) -> list[int]:
        """Locks whose deadline passed: back to AVAILABLE, or ARCHIVED at the limit."""
        expired = [o for o, r in self.records.items()
                   if r.state is RecordState.ACQUIRED and r.deadline_ms <= now_ms]
        for off in expired:
            self._unlock(self.records[off])
        if expired:
            self.lock_timeouts += len(expired)
            self._advance()
        return expired

    def in_flight_message_count(self) -> int:
        """Offsets in the in-flight window [SPSO, SPEO) (Kafka's InFlightMessageCount)."""
        return self.end_offset - self.start_offset

    def acquire(self, member_id: str, offsets: Iterable[tuple[int, int]], max_records: int,
                now_ms: int) -> list[AcquiredRange]:
        """Acquires the AVAILABLE offsets among `offsets` (the (first, last) ranges of the
        batches the log returned, in order) for `member_id`, at most `max_records` of them,
        new offsets only while the window has room. Returns the acquired ranges, runs of
        consecutive offsets with one delivery count."""
        self.expire(now_ms)
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        for first, last in offsets:
            self._take(member_id, first, last, max_records, now_ms, taken)
        self._advance()
        return _ranges(taken)

    def acquire_batches(self, member_id: str, batches: Iterable[tuple[int, int, bool]],
                        max_records: int, now_ms: int,
                        whole_batches: bool = False) -> list[AcquiredRange]:
        """Acquires from the log's batches in log order, each (first, last, deliverable). A
        batch that is not deliverable (a transaction marker; under read_committed an aborted
        transaction's data) is archived. The walk stops at the first batch the budget or the
        window cut short, so no batch after it is archived before the records ahead of it
        were offered. `whole_batches` (KIP-1206's batch-optimized mode, Kafka's default):
        the batch holding the `max_records`-th record is acquired to its end, as Kafka's
        SharePartition aligns an acquisition with batch boundaries."""
        self.expire(now_ms)
        taken: list[tuple[int, int]] = []
        for first, last, deliverable in batches:
            if not deliverable:
                self.skip(first, last)
                continue
            if whole_batches and len(taken) >= max_records:
                break
            limit = last - first + 1 + len(taken) if whole_batches else max_records
            self._take(member_id, first, last, limit, now_ms, taken)
            if self.end_offset <= last:
                break
        self._advance()
        return _ranges(taken)

    def _take(self, member_id: str, first: int, last: int, max_records: int, now_ms: int,
              taken: list[tuple[int, int]]) -> None:
        deadline = now_ms + self.limits.record_lock_duration_ms
        for off in range(max(first, self.start_offset), last + 1):
            if len(taken) >= max_records:
                break
            r = self.records.get(off)
            if off >= self.end_offset:
                if off - self.start_offset >= self.limits.max_record_locks:
                    break
                # offsets skipped between SPEO and `off` are not in the log (compacted
                # away or never written): nothing to deliver there
                for gap in range(self.end_offset, off):
                    self.records[gap] = InFlight(RecordState.ARCHIVED)
                r = InFlight(RecordState.AVAILABLE)
                self.records[off] = r
                self.end_offset = off + 1
            elif r is None:
                r = self.records[off] = InFlight(RecordState.AVAILABLE)
            if r.state is not RecordState.AVAILABLE:
                continue
            r.state = RecordState.ACQUIRED
            r.delivery_count += 1
            r.member_id = member_id
            r.deadline_ms = deadline
            taken.append((off, r.delivery_count))

    def acknowledge(self, member_id: str, first: int, last: int, types: Sequence[int],
                    now_ms: int) -> ErrorCode:
        """One AcknowledgementBatch: `types` holds one type for the whole range, or one per
        offset. All or nothing: INVALID_RECORD_STATE when an offset is not ACQUIRED by
        `member_id` (its lock expired, or it was never delivered to it), INVALID_REQUEST for
        a malformed batch."""
        if last < first or not types:
            return ErrorCode.invalid_request
        if len(types) != 1 and len(types) != last - first + 1:
            return ErrorCode.invalid_request
        try:
            kinds = [AcknowledgeType(t) for t in types]
        except ValueError:
            return ErrorCode.invalid_request
        self.expire(now_ms)
        for off in range(first, last + 1):
            r = self.records.get(off)
            if (r is None or off < self.start_offset or r.state is not RecordState.ACQUIRED
                    or r.member_id != member_id):
                return ErrorCode.invalid_record_state
        for i, off in enumerate(range(first, last + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            r = self.records[off]
            if kind is AcknowledgeType.ACCEPT:
                r.state, r.member_id = RecordState.ACKNOWLEDGED, None
            elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                r.state, r.member_id = RecordState.ARCHIVED, None
            elif kind is AcknowledgeType.RELEASE:
                self._unlock(r)
            else:  # RENEW
                r.deadline_ms = now_ms + self.limits.record_lock_duration_ms
        self._advance()
        return ErrorCode.none

    def release_member(self, member_id: str) -> int:
        """The member's share session closed: its acquired records go back (Kafka's
        releaseAcquiredRecords). How many were released."""
        mine = self.acquired_by(member_id)
        for off in mine:
            self._unlock(self.records[off])
        self._advance()
        return len(mine)

    # ---- internals ---------------------------------------------------------------------------

    def _unlock(self, r: InFlight) -> None:
        r.member_id = None
        r.deadline_ms = 0
        r.state = (RecordState.ARCHIVED if r.delivery_count >= self.limits.delivery_count_limit
                   else RecordState.AVAILABLE)

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            r = self.records.get(self.start_offset)
            if r is None or r.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[self.start_offset]
            self.done[self.start_offset] = (r.state, r.delivery_count)
            self.start_offset += 1


def _ranges(taken: list[tuple[int, int]]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for off, count in taken:
        if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == count:
            prev = out[-1]
            out[-1] = AcquiredRange(prev.first_offset, off, count)
        else:
            out.append(AcquiredRange(off, off, count))
    return out
