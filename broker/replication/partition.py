"""One partition replica on this broker: its log, its role, the high watermark, and waiters.

Role transitions (all of them live here):

    (new)    --become_leader(epoch)-->   Leader
    (new)    --become_follower(epoch)--> Follower
    Leader   --become_follower(epoch)--> Follower   (epoch must not go back)
    Follower --become_leader(epoch)-->   Leader     (epoch must not go back)
    any      --close()-->                Offline

ISR changes, on the leader only (Kafka's PendingExpandIsr / PendingShrinkIsr):

    Committed --maybe_expand_isr / maybe_shrink_isr--> Pending(new ISR, partition epoch)
    Pending   --apply_isr_result(ok)-->                Committed(new ISR, new epoch)
    Pending   --apply_isr_result(error)-->             Committed(old), retry after backoff
    Pending   --metadata (become_leader), newer
                partition epoch or new leader epoch--> Committed(metadata's ISR)

At most one change is in flight. While one is, the high watermark is computed over the
maximal ISR (old members plus proposed ones): a replica being added can only hold the
high watermark back, and one being removed still bounds it until the change commits.
min.insync.replicas is always checked against the committed ISR.

A follower is caught up (Kafka's rule) when it fetches at or past the leader's log end
offset of that moment, or at or past the leader's log end offset at its previous fetch;
it then counts as caught up as of that previous fetch. A replica joins the ISR once its
log end offset reaches the high watermark and the start of the leader's epoch, and
leaves it when it has not been caught up for replica.lag.time.max.ms.

The high watermark is the smallest log end offset among the in-sync replicas, and it
only advances while |ISR| >= min.insync.replicas (KIP-966 strict min-ISR). It never
goes back on the leader. A follower takes the leader's, capped by its own log end.

Idempotent producers: the leader checks each append against `producer_state` first (a
retried batch is answered with its original offsets and not written again); the log's
producer-state hook then records every batch written, leader or follower, and a
truncation rebuilds the state from the batch headers the log still holds. `close()`
writes the state to `<log end offset>.snapshot` in the log directory; the next open uses
it (once) if the log still ends there, and otherwise scans a bounded tail of the log.

Transactions: a transactional batch opens its producer's transaction; `write_marker`
(the coordinator's WriteTxnMarkers) appends the end-transaction control batch that
closes it. `last_stable_offset` is min(first offset of an ongoing transaction, or of a
completed one whose marker the high watermark has not passed, high watermark); read
committed fetches stop there. A scan of the log (replica opened without a snapshot,
truncation) re-indexes the aborted transactions it meets in the segments' `.txnindex`
(recovery drops the indexes of the segments it re-reads). An ongoing transaction whose
first batch lies before the scanned window (PRODUCER_STATE_SCAN_BYTES, or the recovered
segments when they reach further) is taken to start at its first batch inside it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from uuid import UUID

from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterPartitionItem
from broker.errors import KafkaError
from broker.log import AppendResult, FileSlice, PartitionLog, ProducerStateHook
from broker.log.control import ControlMarker, encode_marker_batch, read_marker
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import (
    BatchHeader,
    HeaderFields,
)
from broker.replication.producer_state import (
    BatchMetadata,
    ProducerStateManager,
    VerificationGuard,
)
from broker.util.files import atomic_write

# A replica opened without producer snapshots rebuilds its producer state from the batch
# headers of at most this many bytes at the end of its log. A producer whose last batch
# lies before that window is unknown, and an unknown producer may start at any sequence,
# so the bound costs only duplicate detection for retries older than the window.
PRODUCER_STATE_SCAN_BYTES = 64 << 20
PRODUCER_ID_EXPIRATION_CHECK_MS: Final = 600_000  # Kafka's producer.id.expiration.check.interval.ms
MAX_PRODUCER_SNAPSHOT_BYTES: Final = 256 << 20
_SNAPSHOT_FILE: Final = re.compile(r"^(\d{20})\.snapshot$")

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest)
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP: Final = -6


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


@dataclass
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_ms: int = 0
    broker_epoch: int = -1  # from Fetch v15+ ReplicaState; -1 when the follower sent none


@dataclass(frozen=True, slots=True)
class PendingIsrChange:
    """An AlterPartition this leader sent and has no answer for yet."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int  # the partition epoch the change was proposed against
    expand: bool

    def item(self, index: int, broker_epochs: dict[int, int]) -> AlterPartitionItem:
        return AlterPartitionItem(
            partition_index=index, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=[(b, broker_epochs.get(b, -1)) for b in self.new_isr],
        )


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: UUID | None
    log: PartitionLog
    clock: Callable[[], int]
    node_id: int
    role: Role = Role.OFFLINE
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    min_insync_replicas: int = 1
    high_watermark: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    producer_id_expiration_ms: int = 86_400_000
    producer_state: ProducerStateManager = field(default_factory=ProducerStateManager)
    leader_epoch_start_offset: int = -1
    pending_isr: PendingIsrChange | None = None
    isr_retry_after_ms: int = 0
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _log_end_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _next_producer_expiry_ms: int = 0

    def __post_init__(self) -> None:
        self.log.producer_state_hook = _ProducerStateSync(self)
        if not self._load_producer_snapshot() or self.log.txn_index_rebuild_from is not None:
            self.rebuild_producer_state()

    # ---- transitions -------------------------------------------------------------

    def become_leader(
        self, *, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
        isr: tuple[int, ...], min_insync_replicas: int,
    ) -> None:
        self._check_epoch(leader_epoch)
        now = self.clock()
        new_epoch = self.role is not Role.LEADER or leader_epoch != self.leader_epoch
        if not new_epoch and partition_epoch < self.partition_epoch:
            return  # older than an AlterPartition answer already applied
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.min_insync_replicas = min_insync_replicas
        end = self.log.log_end_offset
        if new_epoch:
            # Kafka's resetReplicaState for a new leader: in-sync followers count as caught
            # up now, the others never were; their log end offsets are unknown until they
            # fetch. The epoch starts at the log end (see end_offset_for_epoch).
            self.leader_epoch_start_offset = end
            self.pending_isr = None
            self.isr_retry_after_ms = 0
            self.followers = {
                r: FollowerState(
                    last_caught_up_ms=now if r in isr else 0,
                    last_fetch_leader_log_end_offset=end,
                    last_fetch_ms=now if r in isr else 0,
                )
                for r in replicas if r != self.node_id
            }
        else:
            if self.pending_isr is not None and partition_epoch > self.pending_isr.partition_epoch:
                self.pending_isr = None  # the metadata already holds the outcome
            self.followers = {
                r: self.followers.get(r, FollowerState(last_fetch_leader_log_end_offset=end))
                for r in replicas if r != self.node_id
            }
        self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
        self.high_watermark = min(self.high_watermark, end)
        self._maybe_advance_high_watermark()
        self._wake_waiters()

    def become_follower(
        self, *, leader_id: int, leader_epoch: int, partition_epoch: int,
        replicas: tuple[int, ...], isr: tuple[int, ...],
    ) -> None:
        self._check_epoch(leader_epoch)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.followers = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = -1
        self._wake_waiters()

    def replace_log(self, new: PartitionLog) -> None:
        """The same replica's log, moved to another log dir (AlterReplicaLogDirs)."""
        self.log = new
        new.producer_state_hook = _ProducerStateSync(self)
        new.update_high_watermark(self.high_watermark)
        self._wake_waiters()

    def close(self) -> None:
        if len(self.producer_state) and not self.log.closed:
            with contextlib.suppress(OSError):  # without it the next open scans the log
                atomic_write(
                    self.log.dir / f"{self.log.log_end_offset:020d}.snapshot",
                    self.producer_state.snapshot(self.log.log_end_offset), fsync=False,
                )
        self.role = Role.OFFLINE
        self._wake_waiters()

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.leader_epoch:
            raise KafkaError(
                ErrorCode.fenced_leader_epoch,
                f"{self.topic}-{self.index}: epoch {epoch} < current {self.leader_epoch}",
            )

    # ---- leader data path --------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset) as Kafka's leader answers it, counting
        this leader's own epoch from where it started even before a batch of it is
        written. (Kafka writes that start into the epoch cache when it becomes leader; an
        fsync per partition on every leader change is too dear here, and the first append
        of the epoch records it anyway.) Without it a follower that wrote past this log
        in an epoch this leader never had would get no usable DivergingEpoch."""
        latest = self.log.latest_epoch
        start = self.leader_epoch_start_offset
        if self.role is Role.LEADER and start >= 0 and latest < self.leader_epoch:
            if epoch == self.leader_epoch:
                return epoch, self.log.log_end_offset
            if latest < epoch < self.leader_epoch:
                return (latest if latest >= 0 else epoch), start
        return self.log.end_offset_for_epoch(epoch)

    def require_leader(self, current_leader_epoch: int = -1) -> None:
        self.require_readable(current_leader_epoch, leader_only=True)

    def require_readable(self, current_leader_epoch: int = -1, *, leader_only: bool) -> None:
        """A consumer may read from a follower (KIP-392) when not `leader_only`."""
        if not (self.role is Role.LEADER or (not leader_only and self.role is Role.FOLLOWER)):
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self.topic}-{self.index}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch, f"{self.topic}-{self.index}")
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch, f"{self.topic}-{self.index}")

    def append_as_leader(self, records: bytes | memoryview, required_acks: int, *,
                         verify: bool = False,
                         guard: VerificationGuard | None = None) -> AppendResult:
        """A client's append. `verify` (KIP-890): a transactional batch that opens a
        transaction needs `guard`, the producer's verification guard from
        `start_verification`, still current."""
        self.require_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR {list(self.isr)} is below min.insync.replicas={self.min_insync_replicas}",
            )
        now = self.clock()
        log = self.log
        # The log's checks first (framing, CRC, sizes, timestamps), then producer state
        # against the headers they read, as Kafka's UnifiedLog.append orders them.
        mv, raw, has_control = log.validator.validate(records, now)
        duplicate = self._check_producers(raw, now, verify, guard)
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset, duplicate.last_offset,
                duplicate.timestamp if log.config.log_append_time else -1,
                log.log_start_offset, 0, duplicate.timestamp,
            )
        result = log.append_validated(mv, raw, has_control, self.leader_epoch, now)
        self._maybe_advance_high_watermark()
        _wake(self._log_end_waiters)  # followers long-polling for new data
        return result

    def write_marker(self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     committed: bool) -> AppendResult:
        """Append an end-transaction marker as leader (the WriteTxnMarkers path). Raises
        KafkaError: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (ISR below
        min.insync.replicas: markers are written with acks=all), INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED."""
        self.require_leader()
        if len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR {list(self.isr)} is below min.insync.replicas={self.min_insync_replicas}",
            )
        self.producer_state.validate_marker(producer_id, producer_epoch, coordinator_epoch)
        now = self.clock()
        batch = encode_marker_batch(
            producer_id=producer_id, producer_epoch=producer_epoch, committed=committed,
            coordinator_epoch=coordinator_epoch, timestamp_ms=now,
        )
        result = self.log.append_as_leader(batch, self.leader_epoch, now, allow_control=True)
        self._maybe_advance_high_watermark()
        _wake(self._log_end_waiters)
        return result

    def start_verification(self, producer_id: int, sequence: int, epoch: int, *,
                           supports_epoch_bump: bool = False) -> VerificationGuard | None:
        """Leader only (raises KafkaError otherwise): see ProducerStateManager."""
        self.require_leader()
        return self.producer_state.start_verification(
            producer_id, sequence, epoch, self.clock(), supports_epoch_bump=supports_epoch_bump)

    def _check_producers(self, raw: list[tuple[int, HeaderFields]], now_ms: int,
                         verify: bool = False, guard: VerificationGuard | None = None
                         ) -> BatchMetadata | None:
        """The validated batches (headers as the log's validation read them) against the
        producers' state: raises KafkaError, or returns the batch a retry repeats."""
        if now_ms >= self._next_producer_expiry_ms:
            self.producer_state.expire(now_ms, self.producer_id_expiration_ms)
            self._next_producer_expiry_ms = now_ms + PRODUCER_ID_EXPIRATION_CHECK_MS
        for _, t in raw:
            if t[9] >= 0:  # a producer id: only then is a header object worth building
                return self.producer_state.validate(
                    [BatchHeader(*t) for _, t in raw], verify=verify, guard=guard,
                    never_written=self.log.log_end_offset == 0)
        return None

    def rebuild_producer_state(self) -> None:
        """Replay the tail of the log (reaching back to the first segment recovery
        re-read, if further); the aborted transactions met go to the `.txnindex` files
        that miss them."""
        aborted = self.producer_state.rebuild(_tail_headers(
            self.log, PRODUCER_STATE_SCAN_BYTES, from_offset=self.log.txn_index_rebuild_from))
        self.log.ensure_aborted_txns(aborted)

    def _load_producer_snapshot(self) -> bool:
        """Take the snapshot `close()` left at the current log end, if any. Every snapshot
        file is removed here, used or not, so a later crash never reads a stale one."""
        loaded = False
        end = self.log.log_end_offset
        for path in _snapshot_files(self.log):
            if not loaded and int(path.name[:20]) == end:
                try:
                    with path.open("rb") as f:
                        data = f.read(MAX_PRODUCER_SNAPSHOT_BYTES + 1)
                    if len(data) <= MAX_PRODUCER_SNAPSHOT_BYTES:
                        loaded = self.producer_state.load_snapshot(data) == end
                except (OSError, ValueError):
                    loaded = False
                if not loaded:
                    self.producer_state.clear()
            with contextlib.suppress(OSError):
                path.unlink()
        return loaded

    def update_follower(
        self, replica_id: int, fetch_offset: int, *, broker_epoch: int = -1,
    ) -> None:
        """A follower fetched at `fetch_offset`: it holds everything before it."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        now = self.clock()
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_ms = now
        state.log_end_offset = fetch_offset
        if broker_epoch >= 0:
            state.broker_epoch = broker_epoch
        self._maybe_advance_high_watermark()

    # ---- ISR changes (leader) ------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr.new_isr)))

    def _may_propose(self, now_ms: int) -> bool:
        return (
            self.role is Role.LEADER and self.pending_isr is None
            and now_ms >= self.isr_retry_after_ms
        )

    def maybe_expand_isr(self, replica_id: int, now_ms: int) -> PendingIsrChange | None:
        """Propose adding `replica_id` if it caught up (the caller sends it)."""
        state = self.followers.get(replica_id)
        if state is None or replica_id in self.isr or not self._may_propose(now_ms):
            return None
        if not (
            state.log_end_offset >= self.high_watermark
            and 0 <= self.leader_epoch_start_offset <= state.log_end_offset
        ):
            return None
        return self._propose((*self.isr, replica_id), expand=True)

    def out_of_sync_replicas(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        out = []
        for r in self.isr:
            state = self.followers.get(r)
            if state is not None and now_ms - state.last_caught_up_ms > lag_time_max_ms:
                out.append(r)
        return out

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> PendingIsrChange | None:
        if not self._may_propose(now_ms):
            return None
        lagging = self.out_of_sync_replicas(now_ms, lag_time_max_ms)
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging), expand=False)

    def _propose(self, new_isr: tuple[int, ...], *, expand: bool) -> PendingIsrChange:
        # Kafka 4.4's leader keeps its ISR in a hash set and sends it in that set's order
        # (Partition.prepareIsrExpand / prepareIsrShrink), ascending for broker ids below the
        # set's table size: the ISR a user then sees (kafka-topics --describe) is ascending,
        # whatever the order the replicas caught up in
        self.pending_isr = PendingIsrChange(
            new_isr=tuple(sorted(new_isr)), leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch, expand=expand,
        )
        return self.pending_isr

    def follower_broker_epochs(self, own_broker_epoch: int) -> dict[int, int]:
        epochs = {r: s.broker_epoch for r, s in self.followers.items()}
        epochs[self.node_id] = own_broker_epoch
        return epochs

    def apply_isr_result(
        self, pending: PendingIsrChange, *, error: ErrorCode, isr: tuple[int, ...] = (),
        leader_epoch: int = -1, partition_epoch: int = -1, retry_after_ms: int = 0,
    ) -> bool:
        """The controller's answer to `pending`; True if the committed ISR changed."""
        if self.pending_isr is not pending:
            return False  # superseded by metadata or a new leadership
        self.pending_isr = None
        if error is not ErrorCode.none:
            self.isr_retry_after_ms = retry_after_ms
            return False
        if leader_epoch != self.leader_epoch or partition_epoch <= self.partition_epoch:
            return False  # the metadata got here first
        self.isr = isr
        self.partition_epoch = partition_epoch
        self._maybe_advance_high_watermark()
        self._wake_waiters()
        return True

    def _maybe_advance_high_watermark(self) -> None:
        if self.role is not Role.LEADER or len(self.isr) < self.min_insync_replicas:
            return
        new_hw = self.log.log_end_offset
        followers = self.followers
        for replica in self.maximal_isr:
            if replica != self.node_id:
                state = followers.get(replica)
                # A member this leader has no state for yet holds nothing it knows of.
                end = state.log_end_offset if state is not None else 0
                if end < new_hw:
                    new_hw = end
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            # Retention and DeleteRecords never go past what the ISR holds.
            self.log.update_high_watermark(new_hw)
            _wake(self._waiters)

    # ---- follower data path ------------------------------------------------------------

    def append_as_follower(self, records: bytes | memoryview) -> AppendResult:
        if self.role is not Role.FOLLOWER:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self.topic}-{self.index}")
        result = self.log.append_as_follower(records)
        if result.records_count:
            self._wake_waiters()
        return result

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = max(min(leader_high_watermark, self.log.log_end_offset), 0)
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            self.log.update_high_watermark(new_hw)
            _wake(self._waiters)

    def truncate_to(self, offset: int) -> None:
        """Follower truncation to `offset` (from DivergingEpoch)."""
        self.log.truncate_to(offset)
        # An epoch that starts at the log end holds no batch (a leadership that appended
        # nothing): it must not be sent as the last fetched epoch, or the leader would
        # keep answering the same divergence.
        self.log.epoch_cache.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def read(
        self, fetch_offset: int, max_bytes: int, *, for_replica: bool, min_one_batch: bool,
        read_committed: bool = False,
    ) -> FileSlice:
        if for_replica:
            upper = self.log.log_end_offset
        else:
            upper = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, upper, min_one_batch)

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first = self.producer_state.first_unstable_offset(hw)
        if first is None:
            return hw
        # Retention or DeleteRecords may pass an open transaction's start (Kafka's
        # updateFirstUnstableOffset): the log start bounds it from below.
        return min(max(first, self.log.log_start_offset), hw)

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: moves the log start up to `offset` (-1: the high watermark), which
        must not pass the high watermark; returns the new log start (the low watermark)."""
        self.require_leader()
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"{offset} is outside [0, high watermark {self.high_watermark}]")
        return self.log.delete_records_before(offset)

    def fetch_offset_for_timestamp(self, timestamp: int, *, replica_id: int = -1,
                                   isolation_level: int = 0) -> tuple[int, int, int]:
        """(timestamp, offset, leader epoch) as Kafka's leader answers ListOffsets for
        `timestamp` (one of the special timestamps above, or milliseconds): a consumer
        (`replica_id` < 0) sees up to the high watermark, or the last stable offset at
        READ_COMMITTED (`isolation_level` 1), a replica up to the log end; (-1, -1, -1) when
        no record at or after the timestamp is visible. Skiff has no tiered storage, so it
        answers as Kafka's UnifiedLog does without remote storage: earliest local is the log
        start, latest tiered and earliest pending upload are nothing."""
        plog = self.log
        if replica_id >= 0:
            fetchable = plog.log_end_offset
        elif isolation_level == 1:
            fetchable = self.last_stable_offset
        else:
            fetchable = self.high_watermark
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, plog.log_start_offset, plog.epoch_cache.epoch_for_offset(
                plog.log_start_offset)
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return -1, -1, -1
        if replica_id < 0 and self.high_watermark < self.leader_epoch_start_offset:
            # A new leader's high watermark is stale until its followers fetch up to where
            # its epoch began: Kafka (KIP-207) answers OFFSET_NOT_AVAILABLE, which clients
            # retry, rather than an end offset below data already acknowledged.
            raise KafkaError(ErrorCode.offset_not_available,
                             f"high watermark {self.high_watermark} is behind the leader "
                             f"epoch's start offset {self.leader_epoch_start_offset}")
        if timestamp == LATEST_TIMESTAMP:
            return -1, fetchable, plog.epoch_cache.epoch_for_offset(fetchable)
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
        elif timestamp < 0:
            raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= fetchable:
            return -1, -1, -1
        offset, ts, epoch = found
        return ts, offset, epoch

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.log.collect_aborted_txns(fetch_offset, upper_bound)

    # ---- waiting (acks=all, fetch long polls) ---------------------------------------

    def new_waiter(self, *, for_log_end: bool = False) -> asyncio.Future[None]:
        """A future done when the high watermark moves (consumers, acks=all) or, with
        `for_log_end`, when the leader's log end moves (followers' fetches: a high
        watermark that a follower's own fetch moved must not wake the other followers,
        whose next data round carries it anyway). Role changes wake both."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.add_waiter(future, for_log_end=for_log_end)
        return future

    def add_waiter(self, future: asyncio.Future[None], *, for_log_end: bool = False) -> None:
        """`future` done as new_waiter's is; one future may wait on many partitions (an
        incremental fetch session's long poll), each completing it at most once."""
        waiters = self._log_end_waiters if for_log_end else self._waiters
        if len(waiters) >= 64:  # long polls that timed out leave cancelled futures behind
            waiters[:] = [w for w in waiters if not w.done()]
        waiters.append(future)

    def _wake_waiters(self) -> None:
        _wake(self._waiters)
        _wake(self._log_end_waiters)


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    pending = waiters[:]
    waiters.clear()
    for future in pending:
        if not future.done():
            future.set_result(None)


class _ProducerStateSync(ProducerStateHook):
    """Keeps the partition's producer state in step with its log, whoever writes to it
    (the leader path, a replica fetcher)."""

    def __init__(self, partition: Partition) -> None:
        self._partition = partition

    def on_append(
        self, batches: Sequence[BatchHeader], markers: Mapping[int, ControlMarker],
    ) -> Sequence[AbortedTxn]:
        return self._partition.producer_state.on_append(batches, markers)

    def first_ongoing_txn_offset(self) -> int | None:
        return min(self._partition.producer_state.ongoing_txns.values(), default=None)

    def on_truncate(self, log_end_offset: int, log_start_offset: int) -> None:
        for path in _snapshot_files(self._partition.log):
            with contextlib.suppress(OSError):
                path.unlink()
        self._partition.rebuild_producer_state()


def _snapshot_files(plog: PartitionLog) -> list[Path]:
    try:
        return sorted(p for p in plog.dir.iterdir() if _SNAPSHOT_FILE.match(p.name))
    except OSError:
        return []


def _tail_headers(
    plog: PartitionLog, max_bytes: int, from_offset: int | None = None,
) -> Iterator[tuple[BatchHeader, ControlMarker | None]]:
    """Headers of the batches in about the last `max_bytes` of the log (and at least from
    the segment holding `from_offset`), oldest first, each with the marker it holds if it
    is an end-transaction control batch; no other record is decoded. The window starts at
    a batch boundary the offset index knows, so a large segment is entered near its end,
    not read whole."""
    segments = plog.segments
    start = len(segments)
    budget = max_bytes
    while start > 0 and (
        budget > 0 or (from_offset is not None and segments[start - 1].next_offset > from_offset)
    ):
        start -= 1
        budget -= segments[start].size
    if (from_offset is not None and start < len(segments)
            and segments[start].base_offset <= from_offset < segments[start].next_offset):
        budget = 0  # the segment holding from_offset is read whole
    for i in range(start, len(segments)):
        seg = segments[i]
        position = 0
        if i == start and budget < 0:
            positions = seg.offset_index.positions
            if positions:
                k = bisect.bisect_left(positions, -budget)
                position = positions[min(k, len(positions) - 1)]
        for pos, h in seg.iter_headers(position):
            marker = None
            if h.is_control and h.is_transactional and h.producer_id >= 0:
                marker = read_marker(seg.read_batch(pos, h), h)
            yield h, marker

