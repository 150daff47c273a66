"""The share coordinator (KIP-932), pure: the persisted state of the share-partitions whose
keys hash to one __share_group_state partition (Kafka's ShareCoordinatorShard). No IO, no
clock: the runtime (broker/coordinator/runtime.py) replays the partition into it, hands it
the requests with a token and `now_ms`, appends the records it emits and tells it when each
append is replicated.

A share-partition's state (Kafka's ShareGroupOffset): snapshot epoch, state epoch, leader
epoch, start offset (SPSO) and the state batches of the offsets past it (first, last,
delivery state 0 AVAILABLE / 2 ACKNOWLEDGED / 4 ARCHIVED, delivery count).

Operations and what they write (a write is applied once its record is replicated; the
share-partition's next write waits until then, so they land in order):

    Initialize(state epoch, start offset)   FENCED_STATE_EPOCH unless the state epoch is
                                            above the current one; a ShareSnapshot (snapshot
                                            epoch + 1) with no batches
    Write(state epoch, leader epoch, start offset (-1: unchanged), batches)
                                            FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH below
                                            the recorded epochs; the first write of a key, and
                                            every snapshot.update.records.per.snapshot-th
                                            write, is a ShareSnapshot of the merged state, the
                                            others a ShareUpdate of the merged batches
    Delete                                  a tombstone (nothing when there is no state)
    Read(leader epoch)                      FENCED_LEADER_EPOCH below the recorded leader
                                            epoch, which it raises; start offset -1 and state
                                            epoch 0 when nothing was written
    ReadSummary                             the start offset, state and leader epochs

Batches merge as Kafka's PersisterStateBatchCombiner: the newer batch wins where two overlap,
nothing before the start offset is kept, and adjacent batches with one state and delivery
count are joined.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.core import CoordinatorCore, Reply
from broker.share.records import (
    SHARE_SNAPSHOT_KEY_TYPE,
    SHARE_UPDATE_KEY_TYPE,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    ShareValue,
    StateBatch,
)

Token = int
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class StateResult:
    """The answer for one share-partition (Read: batches too)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class Write:
    write_id: int
    record_type: int
    key: SharePartitionKey
    value: ShareValue | None  # None: tombstone


@dataclass(slots=True)
class Effects:
    replies: list[Reply] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    snapshot_update_records_per_snapshot: int = 500


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch],
            start_offset: int) -> tuple[StateBatch, ...]:
    """Kafka's PersisterStateBatchCombiner: `new` over `so_far`, pruned below
    `start_offset`, sorted, without overlaps, with equal neighbours joined."""
    spans: list[StateBatch] = []
    for b in so_far:
        spans.append(b)
    for b in new:
        if b.last_offset < b.first_offset:
            continue
        cut: list[StateBatch] = []
        for s in spans:
            if s.last_offset < b.first_offset or s.first_offset > b.last_offset:
                cut.append(s)
                continue
            if s.first_offset < b.first_offset:
                cut.append(StateBatch(s.first_offset, b.first_offset - 1, s.delivery_state,
                                      s.delivery_count))
            if s.last_offset > b.last_offset:
                cut.append(StateBatch(b.last_offset + 1, s.last_offset, s.delivery_state,
                                      s.delivery_count))
        cut.append(b)
        spans = cut
    pruned = []
    for s in spans:
        if s.last_offset < start_offset:
            continue
        if s.first_offset < start_offset:
            s = StateBatch(start_offset, s.last_offset, s.delivery_state, s.delivery_count)
        pruned.append(s)
    pruned.sort(key=lambda s: s.first_offset)
    out: list[StateBatch] = []
    for s in pruned:
        if out and out[-1].last_offset + 1 == s.first_offset \
                and (out[-1].delivery_state, out[-1].delivery_count) \
                == (s.delivery_state, s.delivery_count):
            out[-1] = StateBatch(out[-1].first_offset, s.last_offset, s.delivery_state,
                                 s.delivery_count)
        else:
            out.append(s)
    return tuple(out)


class ShareCoordinator(CoordinatorCore[Effects]):
    """The share-partition states of one __share_group_state partition."""

    def __init__(self, config: ShareCoordinatorConfig, now_ms: int) -> None:
        super().__init__(Effects)
        self.config = config
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.updates_since_snapshot: dict[SharePartitionKey, int] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self._write_keys: dict[int, SharePartitionKey] = {}  # the writes in flight
        self._queued: dict[SharePartitionKey, deque[tuple[Token, Callable[[], None]]]] = {}

    # ---- loading ------------------------------------------------------------------------

    def replay(self, record_type: int, key: SharePartitionKey, value: ShareValue | None) -> None:
        """Applies one record of the partition's log (also each record this core wrote,
        once replicated)."""
        if value is None:
            if record_type == SHARE_SNAPSHOT_KEY_TYPE:
                self.states.pop(key, None)
                self.updates_since_snapshot.pop(key, None)
                self.leader_epochs.pop(key, None)
            return
        if isinstance(value, ShareSnapshotValue):
            self.states[key] = ShareGroupOffset(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                value.start_offset, value.state_batches, value.create_timestamp,
                value.write_timestamp, value.delivery_complete_count)
            self.updates_since_snapshot[key] = 0
        else:
            so_far = self.states.get(key)
            if so_far is None:  # an update without its snapshot (compacted away): dropped
                return
            start = so_far.start_offset if value.start_offset == -1 else value.start_offset
            leader = so_far.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
            self.states[key] = ShareGroupOffset(
                so_far.snapshot_epoch, so_far.state_epoch, leader, start,
                combine(so_far.state_batches, value.state_batches, start),
                so_far.create_timestamp, so_far.write_timestamp,
                value.delivery_complete_count)
            self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1
        state = self.states[key]
        if state.leader_epoch >= 0:
            self.leader_epochs[key] = max(self.leader_epochs.get(key, -1), state.leader_epoch)

    # ---- the runtime's calls ------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        return self._take()

    def write_completed(self, write_id: int, error: ErrorCode, now_ms: int) -> Effects:
        key = self._write_keys.pop(write_id, None)
        self._finish_write(write_id, error, now_ms)
        if key is not None:
            queue = self._queued.get(key)
            while queue and not self._busy(key):
                queue.popleft()[1]()
            if queue is not None and not queue:
                self._queued.pop(key, None)
        return self._take()

    def unload(self) -> Effects:
        """No longer this broker's: every waiting request is answered NOT_COORDINATOR."""
        self._fail_writes(ErrorCode.not_coordinator, 0)
        self._write_keys.clear()
        for queue in self._queued.values():
            for token, _op in queue:
                self._reply(token, StateResult(ErrorCode.not_coordinator))
        self._queued.clear()
        fx = self._take()
        fx.writes.clear()
        return fx

    # ---- the APIs -----------------------------------------------------------------------

    def read(self, token: Token, key: SharePartitionKey, leader_epoch: int) -> Effects:
        recorded = self.leader_epochs.get(key)
        if recorded is not None and recorded > leader_epoch:
            return self._reply_now(token, StateResult(ErrorCode.fenced_leader_epoch,
                                                      "The leader epoch is older than the "
                                                      "last recorded one."))
        if leader_epoch >= 0:
            self.leader_epochs[key] = leader_epoch
        state = self.states.get(key)
        if state is None:
            return self._reply_now(token, StateResult())
        return self._reply_now(token, StateResult(
            state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, state_batches=state.state_batches,
            delivery_complete_count=state.delivery_complete_count))

    def read_summary(self, token: Token, key: SharePartitionKey) -> Effects:
        state = self.states.get(key)
        if state is None:
            return self._reply_now(token, StateResult())
        return self._reply_now(token, StateResult(
            state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count))

    def write(self, token: Token, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
              start_offset: int, batches: Iterable[StateBatch], now_ms: int,
              delivery_complete_count: int = -1) -> Effects:
        new = tuple(batches)
        self._serialized(key, token, lambda: self._write(token, key, state_epoch, leader_epoch,
                                                  start_offset, new, now_ms,
                                                  delivery_complete_count))
        return self._take()

    def initialize(self, token: Token, key: SharePartitionKey, state_epoch: int,
                   start_offset: int, now_ms: int) -> Effects:
        self._serialized(key, token, lambda: self._initialize(token, key, state_epoch, start_offset,
                                                       now_ms))
        return self._take()

    def delete(self, token: Token, key: SharePartitionKey, now_ms: int) -> Effects:
        self._serialized(key, token, lambda: self._delete(token, key))
        return self._take()

    # ---- internals ----------------------------------------------------------------------

    def _write(self, token: Token, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
               start_offset: int, new: tuple[StateBatch, ...], now_ms: int,
               delivery_complete_count: int) -> None:
        recorded_leader = self.leader_epochs.get(key)
        current = self.states.get(key)
        if recorded_leader is not None and recorded_leader > leader_epoch:
            self._reply(token, StateResult(ErrorCode.fenced_leader_epoch,
                                           "The leader epoch is older than the last "
                                           "recorded one."))
            return
        if current is not None and current.state_epoch > state_epoch:
            self._reply(token, StateResult(ErrorCode.fenced_state_epoch,
                                           "The state epoch is older than the last "
                                           "recorded one."))
            return
        if current is None:
            start = start_offset
            record_type = SHARE_SNAPSHOT_KEY_TYPE
            value: ShareValue = ShareSnapshotValue(
                0, state_epoch, leader_epoch, start, now_ms, now_ms,
                combine((), new, start), delivery_complete_count)
        elif self.updates_since_snapshot.get(key, 0) >= \
                self.config.snapshot_update_records_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            record_type = SHARE_SNAPSHOT_KEY_TYPE
            value = ShareSnapshotValue(
                current.snapshot_epoch + 1,
                current.state_epoch if state_epoch == -1 else state_epoch,
                current.leader_epoch if leader_epoch == -1 else leader_epoch, start,
                current.create_timestamp, now_ms,
                combine(current.state_batches, new, start), delivery_complete_count)
        else:
            start = current.start_offset if start_offset == -1 else start_offset
            record_type = SHARE_UPDATE_KEY_TYPE
            value = ShareUpdateValue(current.snapshot_epoch, leader_epoch, start_offset,
                                     combine((), new, start), delivery_complete_count)
        self._store(token, key, record_type, value)

    def _initialize(self, token: Token, key: SharePartitionKey, state_epoch: int,
                    start_offset: int, now_ms: int) -> None:
        current = self.states.get(key)
        if current is not None and current.state_epoch >= state_epoch:
            self._reply(token, StateResult(ErrorCode.fenced_state_epoch,
                                           "The state epoch is not above the current one."))
            return
        snapshot_epoch = 0 if current is None else current.snapshot_epoch + 1
        created = now_ms if current is None else current.create_timestamp
        self._store(token, key, SHARE_SNAPSHOT_KEY_TYPE, ShareSnapshotValue(
            snapshot_epoch, state_epoch, DEFAULT_LEADER_EPOCH, start_offset, created, now_ms,
            (), 0))

    def _delete(self, token: Token, key: SharePartitionKey) -> None:
        if key not in self.states:
            self._reply(token, StateResult())
            return
        self._store(token, key, SHARE_SNAPSHOT_KEY_TYPE, None)

    def _store(self, token: Token, key: SharePartitionKey, record_type: int,
               value: ShareValue | None) -> None:
        def done(error: ErrorCode, now_ms: int) -> None:
            if error is ErrorCode.none:
                self.replay(record_type, key, value)
                self._reply(token, StateResult())
            else:
                self._reply(token, StateResult(
                    ErrorCode.coordinator_not_available
                    if error in (ErrorCode.not_leader_or_follower,
                                 ErrorCode.not_enough_replicas,
                                 ErrorCode.not_enough_replicas_after_append,
                                 ErrorCode.request_timed_out,
                                 ErrorCode.kafka_storage_error)
                    else error, f"The write of the share-partition state failed: "
                                f"{error.name}."))

        write_id = self._emit(lambda write_id: Write(write_id, record_type, key, value), done)
        self._write_keys[write_id] = key

    def _busy(self, key: SharePartitionKey) -> bool:
        return key in self._write_keys.values()

    def _serialized(self, key: SharePartitionKey, token: Token,
                    op: Callable[[], None]) -> None:
        """Runs `op` now, or after the key's pending write (and the ops queued before it)."""
        if self._busy(key) or self._queued.get(key):
            self._queued.setdefault(key, deque()).append((token, op))
        else:
            op()

    def _reply_now(self, token: Token, result: StateResult) -> Effects:
        self._reply(token, result)
        return self._take()
