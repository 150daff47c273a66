"""One share-partition (KIP-932): the in-flight records of a (share group, topic partition),
pure. No IO, no clock: every call that may expire a lock takes `now_ms`.

The share-partition start offset (SPSO) is the first offset not yet done with; the end
offset (SPEO) is one past the last offset ever acquired. Every offset in [SPSO, SPEO) has a
state; offsets at or past SPEO are AVAILABLE and were never delivered (delivery count 0).

States and transitions (Kafka's RecordState: AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2,
ARCHIVED 4):

    AVAILABLE    -> ACQUIRED      acquire: delivery count + 1, a lock until now +
                                  record.lock.duration.ms, owned by the member
    ACQUIRED     -> ACKNOWLEDGED  ACCEPT (1) by the owner
    ACQUIRED     -> AVAILABLE     RELEASE (2) by the owner, the lock expiring, or the owner
                                  leaving (its share session closed), while the delivery
                                  count is below delivery.count.limit
    ACQUIRED     -> ARCHIVED      the same three when the delivery count has reached the
                                  limit; REJECT (3) by the owner; GAP (0) by the owner (an
                                  offset the log does not hold)
    ACQUIRED     -> ACQUIRED      RENEW (4, KIP-1222) by the owner: a new lock from now
    ACKNOWLEDGED, ARCHIVED        final

Records a REJECT or the delivery count limit archives are kept as dead runs (`take_dead`)
for the group's dead-letter queue (broker/share/dlq.py).

The window is held as spans: runs of consecutive offsets with one state, delivery count,
owner and lock deadline, as Kafka's SharePartition keeps an in-flight batch whole until an
acknowledgement or a lock treats its offsets apart. A transition on part of a span splits it
there; neighbours that end up alike are merged again. A fetch of whole batches acknowledged
as wholes so costs per batch, not per record.

Persisted (broker/share/coordinator.py, in __share_group_state): the SPSO and the states of
[SPSO, SPEO) as state batches, an ACQUIRED record as AVAILABLE with its delivery count (its
lock does not outlive the leader); `from_state` rebuilds a share-partition from them. As
Kafka's SharePartition does, a write carries the SPSO as it was before the acknowledgements
it records (the records they completed are written ACKNOWLEDGED/ARCHIVED from there), and
the SPSO they moved to is written with the next one: the records done since the last write
are kept (`done`) until `persisted` says it was written.

For Kafka's SharePartitionMetrics, the share-partition also keeps its in-flight batches as
Kafka's cache has them: the new offsets one acquisition added to the window (SPEO before to
SPEO after, offsets it archived on the way included), and the batches of a loaded state; a
batch is forgotten once the SPSO is past its last offset (InFlightBatchCount), and the size
of each new one is kept until `take_new_batches` (InFlightBatchMessageCount). They are
counted only: the states are the spans'.

The SPSO moves forward over ACKNOWLEDGED and ARCHIVED records (they are then forgotten). New
records are acquired only while fewer than partition.max.record.locks offsets are in flight
(SPEO - SPSO), Kafka's bound on the in-flight window. An acknowledgement of an offset that
is not ACQUIRED by the acknowledging member is refused as INVALID_RECORD_STATE and changes
nothing of that batch.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


FINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlight:
    """The state of one offset, as `state_of` answers it."""

    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(slots=True)
class Span:
    """Offsets first..last (inclusive) in one state, with one delivery count, owner and
    lock deadline."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def alike(self, other: Span) -> bool:
        return (self.state is other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.deadline_ms == other.deadline_ms)


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """What ShareFetch answers: AcquiredRecords (first, last inclusive, delivery count)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class DeadRun:
    """Offsets first..last archived at once with one delivery count, a dead letter each when
    the group has a dead-letter queue (broker/share/dlq.py); `rejected`: by a REJECT (else
    the delivery count limit)."""

    first: int
    last: int
    delivery_count: int
    rejected: bool


@dataclass(frozen=True, slots=True)
class ShareLimits:
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


def _first(span: Span) -> int:
    return span.first


class SharePartition:
    """The in-flight records of one share-partition."""

    def __init__(self, start_offset: int, limits: ShareLimits) -> None:
        if start_offset < 0:
            raise ValueError("start offset must be >= 0")
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.limits = limits
        # [SPSO, SPEO) exactly, in order, without gaps
        self.spans: list[Span] = []
        # completed records the SPSO moved past since the last write, (first, last, final
        # state, delivery count) runs ending at the SPSO
        self.done: list[tuple[int, int, RecordState, int]] = []
        # records whose acquisition lock expired (Kafka's AcquisitionLockTimeoutPerSec)
        self.lock_timeouts = 0
        # records a REJECT or the delivery count limit archived since `take_dead`
        self.dead: list[DeadRun] = []
        # in-flight batches (first, last), in order, and the sizes of those made since
        # `take_new_batches`
        self.batches: deque[tuple[int, int]] = deque()
        self.new_batches: list[int] = []

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[tuple[int, int, int, int]],
                   limits: ShareLimits) -> SharePartition:
        """The share-partition a persisted state describes: (first, last, delivery state,
        delivery count) batches past `start_offset`, a later batch over an earlier one
        where they overlap; a persisted ACQUIRED (never written by Skiff) counts as
        AVAILABLE."""
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
            first = max(first, sp.start_offset)
            # offsets no batch names between the batches are AVAILABLE, never delivered
            sp._extend_to(first)
            if first < sp.end_offset:
                for span in sp._isolate(first, min(last, sp.end_offset - 1)):
                    span.state, span.delivery_count = kind, max(0, count)
                    span.member_id, span.deadline_ms = None, 0
            if last >= sp.end_offset:
                sp.spans.append(Span(sp.end_offset, last, kind, max(0, count)))
                sp.end_offset = last + 1
            if not sp.batches or first > sp.batches[-1][1]:
                sp._new_batch(first, last)
        sp._merge()
        sp._advance()
        return sp

    def persisted_start(self) -> int:
        """The start offset the next write carries: the SPSO before the records done since
        the last write."""
        return self.done[0][0] if self.done else self.start_offset

    def persisted(self, upto: int) -> None:
        """A write built while the SPSO was `upto` was made: the records done before `upto`
        are in it and forgotten (ones done since stay for the next write)."""
        kept: list[tuple[int, int, RecordState, int]] = []
        for first, last, state, count in self.done:
            if last >= upto:
                kept.append((max(first, upto), last, state, count))
        self.done = kept

    def persisted_batches(self) -> list[tuple[int, int, int, int]]:
        """The state of [persisted_start, SPEO) as (first, last, delivery state, delivery
        count) batches of consecutive offsets with one state and count."""
        out: list[tuple[int, int, int, int]] = []
        runs = [*self.done, *((s.first, s.last, s.state, s.delivery_count) for s in self.spans)]
        for first, last, state, count in runs:
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if out and out[-1][1] == first - 1 and out[-1][2:] == (int(state), count):
                out[-1] = (out[-1][0], last, int(state), count)
            else:
                out.append((first, last, int(state), count))
        return out

    # ---- reading -----------------------------------------------------------------------------

    def state_of(self, offset: int) -> InFlight:
        if offset < self.start_offset:
            return InFlight(RecordState.ACKNOWLEDGED)
        if offset >= self.end_offset:
            return InFlight(RecordState.AVAILABLE)
        s = self.spans[self._index(offset)]
        return InFlight(s.state, s.delivery_count, s.member_id, s.deadline_ms)

    def in_flight(self) -> dict[int, InFlight]:
        """Every offset of [SPSO, SPEO) with its state (for tests and debugging: it costs
        one entry per offset)."""
        return {off: InFlight(s.state, s.delivery_count, s.member_id, s.deadline_ms)
                for s in self.spans for off in range(s.first, s.last + 1)}

    def next_fetch_offset(self, now_ms: int) -> int:
        """The lowest offset that may be acquired: a redeliverable record in the window,
        else SPEO."""
        self.expire(now_ms)
        for s in self.spans:
            if s.state is RecordState.AVAILABLE:
                return s.first
        return self.end_offset

    def can_acquire(self, now_ms: int) -> bool:
        return (self.next_fetch_offset(now_ms) < self.end_offset
                or self.end_offset - self.start_offset < self.limits.max_record_locks)

    def acquired_by(self, member_id: str) -> list[int]:
        return [off for s in self.spans
                if s.state is RecordState.ACQUIRED and s.member_id == member_id
                for off in range(s.first, s.last + 1)]

    def held_by(self, member_id: str, first: int, last: int, now_ms: int) -> bool:
        """Whether every offset of first..last is ACQUIRED by `member_id` (locks that
        expired by `now_ms` first released), as an acknowledgement needs them."""
        self.expire(now_ms)
        if last < first or first < self.start_offset or last >= self.end_offset:
            return False
        i = self._index(first)
        while i < len(self.spans) and self.spans[i].first <= last:
            s = self.spans[i]
            if s.state is not RecordState.ACQUIRED or s.member_id != member_id:
                return False
            i += 1
        return True

    def acquired_by_anyone(self) -> bool:
        return any(s.state is RecordState.ACQUIRED for s in self.spans)

    def next_deadline(self) -> int | None:
        deadlines = [s.deadline_ms for s in self.spans if s.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def take_dead(self) -> list[DeadRun]:
        """The records archived by a REJECT or the delivery count limit since the last call,
        in the order they were archived."""
        dead, self.dead = self.dead, []
        return dead

    def in_flight_message_count(self) -> int:
        """Offsets in the in-flight window [SPSO, SPEO) (Kafka's InFlightMessageCount)."""
        return self.end_offset - self.start_offset

    def in_flight_batch_count(self) -> int:
        """In-flight batches not yet wholly behind the SPSO (Kafka's InFlightBatchCount)."""
        return len(self.batches)

    def take_new_batches(self) -> list[int]:
        """The sizes of the in-flight batches made since the last call (Kafka's
        InFlightBatchMessageCount observations)."""
        sizes, self.new_batches = self.new_batches, []
        return sizes

    # ---- transitions -------------------------------------------------------------------------

    def reset_start(self, offset: int) -> None:
        """The log's start moved past SPSO (retention, DeleteRecords): what is gone is gone."""
        if offset <= self.start_offset:
            return
        if offset < self.end_offset:
            self.spans = self.spans[self._split(offset):]
        else:
            self.spans = []
        self.done.clear()
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._drop_batches()

    def skip(self, first: int, last: int) -> None:
        """Offsets never to deliver (a transaction marker's control batch): ARCHIVED, as far
        as they are new, with the offsets the log skipped before them."""
        if last >= self.end_offset:
            self.spans.append(Span(self.end_offset, last, RecordState.ARCHIVED))
            self.end_offset = last + 1
        self._settle()

    def expire(self, now_ms: int) -> list[int]:
        """Locks whose deadline passed: back to AVAILABLE, or ARCHIVED at the limit."""
        expired: list[int] = []
        for s in self.spans:
            if s.state is RecordState.ACQUIRED and s.deadline_ms <= now_ms:
                expired.extend(range(s.first, s.last + 1))
                self._unlock(s)
        if expired:
            self.lock_timeouts += len(expired)
            self._settle()
        return expired

    def acquire(self, member_id: str, offsets: Iterable[tuple[int, int]], max_records: int,
                now_ms: int) -> list[AcquiredRange]:
        """Acquires the AVAILABLE offsets among `offsets` (the (first, last) ranges of the
        batches the log returned, in order) for `member_id`, at most `max_records` of them,
        new offsets only while the window has room. Returns the acquired ranges, runs of
        consecutive offsets with one delivery count."""
        self.expire(now_ms)
        end = self.end_offset
        taken: list[AcquiredRange] = []
        count = 0
        for first, last in offsets:
            count += self._take(member_id, first, last, max_records - count, now_ms, taken)
        self._grew(end)
        return merged_ranges(taken)

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
        end = self.end_offset
        taken: list[AcquiredRange] = []
        count = 0
        for first, last, deliverable in batches:
            if not deliverable:
                self.skip(first, last)
                continue
            if whole_batches and count >= max_records:
                break
            budget = last - first + 1 if whole_batches else max_records - count
            count += self._take(member_id, first, last, budget, now_ms, taken)
            if self.end_offset <= last:
                break
        self._grew(end)
        return merged_ranges(taken)

    def _take(self, member_id: str, first: int, last: int, budget: int, now_ms: int,
              taken: list[AcquiredRange]) -> int:
        """Acquires at most `budget` AVAILABLE offsets of first..last, in order; how many."""
        deadline = now_ms + self.limits.record_lock_duration_ms
        window_last = self.start_offset + self.limits.max_record_locks - 1
        off, count = max(first, self.start_offset), 0
        while off <= last and count < budget:
            if off >= self.end_offset:
                if off > window_last:
                    break
                if off > self.end_offset:
                    # offsets skipped between SPEO and `off` are not in the log (compacted
                    # away or never written): nothing to deliver there
                    self.spans.append(Span(self.end_offset, off - 1, RecordState.ARCHIVED))
                hi = min(last, off + budget - count - 1, window_last)
                self.spans.append(Span(off, hi, RecordState.ACQUIRED, 1, member_id, deadline))
                self.end_offset = hi + 1
                taken.append(AcquiredRange(off, hi, 1))
                count += hi - off + 1
                off = hi + 1
                continue
            s = self.spans[self._index(off)]
            if s.state is not RecordState.AVAILABLE:
                off = s.last + 1
                continue
            hi = min(s.last, last, off + budget - count - 1)
            for span in self._isolate(off, hi):
                span.state = RecordState.ACQUIRED
                span.delivery_count += 1
                span.member_id = member_id
                span.deadline_ms = deadline
                taken.append(AcquiredRange(span.first, span.last, span.delivery_count))
            count += hi - off + 1
            off = hi + 1
        return count

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
        if not self.held_by(member_id, first, last, now_ms):
            return ErrorCode.invalid_record_state
        for run_first, run_last, kind in _runs(first, last, kinds):
            for s in self._isolate(run_first, run_last):
                if kind is AcknowledgeType.ACCEPT:
                    s.state, s.member_id = RecordState.ACKNOWLEDGED, None
                elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                    s.state, s.member_id = RecordState.ARCHIVED, None
                    if kind is AcknowledgeType.REJECT:
                        self.dead.append(DeadRun(s.first, s.last, s.delivery_count, True))
                elif kind is AcknowledgeType.RELEASE:
                    self._unlock(s)
                else:  # RENEW
                    s.deadline_ms = now_ms + self.limits.record_lock_duration_ms
        self._settle()
        return ErrorCode.none

    def release_member(self, member_id: str) -> int:
        """The member's share session closed: its acquired records go back (Kafka's
        releaseAcquiredRecords). How many were released."""
        released = 0
        for s in self.spans:
            if s.state is RecordState.ACQUIRED and s.member_id == member_id:
                released += s.size
                self._unlock(s)
        self._settle()
        return released

    # ---- internals ---------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the span holding `offset`, which must be in [SPSO, SPEO)."""
        return bisect_right(self.spans, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Makes `offset` (in [SPSO, SPEO]) the first of a span; that span's index."""
        if offset >= self.end_offset:
            return len(self.spans)
        i = self._index(offset)
        s = self.spans[i]
        if s.first == offset:
            return i
        self.spans.insert(i + 1, Span(offset, s.last, s.state, s.delivery_count, s.member_id,
                                      s.deadline_ms))
        s.last = offset - 1
        return i + 1

    def _isolate(self, first: int, last: int) -> list[Span]:
        """The spans exactly covering first..last (inside [SPSO, SPEO)), split to fit."""
        i = self._split(first)
        j = self._split(last + 1)
        return self.spans[i:j]

    def _extend_to(self, offset: int) -> None:
        """SPEO up to `offset`, the offsets between AVAILABLE and never delivered."""
        if offset > self.end_offset:
            self.spans.append(Span(self.end_offset, offset - 1, RecordState.AVAILABLE))
            self.end_offset = offset

    def _grew(self, end: int) -> None:
        """After an acquisition that found SPEO at `end`: its new offsets are a batch."""
        if self.end_offset > end:
            self._new_batch(end, self.end_offset - 1)
        self._settle()

    def _new_batch(self, first: int, last: int) -> None:
        self.batches.append((first, last))
        self.new_batches.append(last - first + 1)

    def _drop_batches(self) -> None:
        while self.batches and self.batches[0][1] < self.start_offset:
            self.batches.popleft()

    def _settle(self) -> None:
        """After a transition: alike neighbours merged, the SPSO past the final ones."""
        self._merge()
        self._advance()

    def _merge(self) -> None:
        merged: list[Span] = []
        for s in self.spans:
            if merged and merged[-1].alike(s):
                merged[-1].last = s.last
            else:
                merged.append(s)
        self.spans = merged

    def _unlock(self, s: Span) -> None:
        s.member_id = None
        s.deadline_ms = 0
        if s.delivery_count >= self.limits.delivery_count_limit:
            s.state = RecordState.ARCHIVED
            self.dead.append(DeadRun(s.first, s.last, s.delivery_count, False))
        else:
            s.state = RecordState.AVAILABLE

    def _advance(self) -> None:
        gone = 0
        for s in self.spans:
            if s.state not in FINAL_STATES:
                break
            gone += 1
            if (self.done and self.done[-1][1] == s.first - 1
                    and self.done[-1][2:] == (s.state, s.delivery_count)):
                self.done[-1] = (self.done[-1][0], s.last, s.state, s.delivery_count)
            else:
                self.done.append((s.first, s.last, s.state, s.delivery_count))
            self.start_offset = s.last + 1
        if gone:
            del self.spans[:gone]
            self._drop_batches()


def _runs(first: int, last: int, kinds: Sequence[AcknowledgeType]
          ) -> list[tuple[int, int, AcknowledgeType]]:
    """(first, last, type) runs of consecutive offsets with one type: the whole batch when
    it carries a single type."""
    if len(kinds) == 1:
        return [(first, last, kinds[0])]
    runs: list[tuple[int, int, AcknowledgeType]] = []
    for off, kind in enumerate(kinds, start=first):
        if runs and runs[-1][2] is kind:
            runs[-1] = (runs[-1][0], off, kind)
        else:
            runs.append((off, off, kind))
    return runs


def merged_ranges(taken: list[AcquiredRange]) -> list[AcquiredRange]:
    """Adjacent ranges with one delivery count joined."""
    out: list[AcquiredRange] = []
    for r in taken:
        if out and out[-1].last_offset == r.first_offset - 1 \
                and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRange(out[-1].first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out
