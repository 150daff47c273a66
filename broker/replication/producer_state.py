"""Idempotent and transactional producer state of one partition replica (Kafka's
ProducerStateManager). Pure.

Per producer id: its epoch and the metadata of its last 5 batches (first/last sequence,
first/last offset, max timestamp), enough to recognise a retried batch and to check
that the next one follows on; the coordinator epoch of its last transaction marker and
the first offset of its ongoing transaction, if any. The first offsets of ongoing
transactions, and of completed ones whose marker the high watermark has not passed yet,
bound the last stable offset (`first_unstable_offset`).

Transitions (all of them live here):

    start_verification(pid, seq, epoch, now_ms)
                                 leader, before a client's transactional append (KIP-890):
                                 None when the producer's transaction is already open
                                 here (nothing to verify); else the producer's
                                 VerificationGuard, made on first use, which the append
                                 must bring back after the coordinator confirmed the
                                 partition is in the transaction. Also keeps the lowest
                                 sequence seen while unverified.
    validate(batches, guard)     leader, before the append: DUPLICATE of a cached batch
                                 (answer its original offsets, append nothing), or raise
                                 INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER /
                                 INVALID_RECORD (no sequence; a retry mixed with other
                                 batches) / INVALID_TXN_STATE (a non-transactional batch
                                 of a producer whose transaction is open; with
                                 verification, a transactional batch that opens a
                                 transaction without the producer's current guard), or
                                 accept (None). Changes nothing.
    validate_marker(pid, epoch, coordinator epoch)
                                 leader, before writing an end-transaction marker:
                                 INVALID_PRODUCER_EPOCH for an older producer epoch,
                                 TRANSACTION_COORDINATOR_FENCED for an older coordinator
                                 epoch than the producer's last marker. Changes nothing.
    on_append(batches, markers)  any append, leader or follower, with offsets assigned:
                                 the producer's epoch becomes the batch's (a new epoch
                                 forgets the old batches) and the batch is cached; a
                                 transactional data batch opens the producer's transaction
                                 (first offset) unless one is open; an end-transaction
                                 marker closes it (returned as an AbortedTxn when aborted,
                                 for the .txnindex) and records the coordinator epoch.
                                 Any transactional batch or marker drops the producer's
                                 verification guard: from then on the open transaction
                                 (or its end) is what the log knows.
    first_unstable_offset(hw)    completed transactions whose marker is below `hw` stop
                                 holding the LSO back; answers the lowest first offset of
                                 the rest and of the ongoing ones.
    rebuild(items)               replica opened or log truncated: forget everything and
                                 replay the headers (and markers) the log still holds.
    expire(now_ms, max_age_ms)   producers idle for longer than producer.id.expiration.ms
                                 are forgotten (never one with an ongoing transaction);
                                 they may then start again at any sequence. Verification
                                 guards older than that go too.
    load_snapshot(data)          replica opened after a clean shutdown: the state as
                                 `snapshot(offset)` encoded it when the replica closed.

Rules (Kafka's ProducerAppendInfo, after KIP-360): an epoch older than the producer's is
INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0; the same epoch must go
on from the last sequence (Int32 max wraps to 0); a producer id the partition does not
know may start at any sequence, because its state may have been removed by retention,
DeleteRecords or expiration. Since Kafka 2.7 an older epoch is INVALID_PRODUCER_EPOCH for
Produce at every version (PRODUCER_FENCED is the coordinator's answer, not the log's).
KIP-890 (Kafka's VerificationStateEntry): with `transaction.partition.verification.enable`
the leader asks the transaction coordinator whether the partition is in the producer's
ongoing transaction before the first transactional append of that transaction; the guard
handed out before asking must still be the producer's guard when the append happens, so an
end marker written meanwhile (which drops the guard) makes a late write fail with
INVALID_TXN_STATE instead of opening a transaction nobody will end (a hanging transaction).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log.control import ControlMarker
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import BatchHeader

NUM_BATCHES_TO_RETAIN: Final = 5
INT32_MAX: Final = (1 << 31) - 1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1


# Snapshot file body (big-endian): version i16, crc u32 (CRC32C of what follows), log end
# offset i64, producer count i32, then per producer: id i64, epoch i16, last timestamp
# i64, [v2: coordinator epoch i32, ongoing transaction's first offset i64 (-1: none)],
# batch count i8, and per batch: first seq i32, last seq i32, first offset i64,
# last offset i64, timestamp i64. Kafka's own format keeps only the last batch.
SNAPSHOT_VERSION: Final = 2
_SNAP_HEAD: Final = struct.Struct(">hI")
_SNAP_BODY_HEAD: Final = struct.Struct(">qi")
_SNAP_PRODUCER_V1: Final = struct.Struct(">qhqb")
_SNAP_PRODUCER: Final = struct.Struct(">qhqiqb")
_SNAP_BATCH: Final = struct.Struct(">iiqqq")


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past Int32 max to 0 as Kafka's producers do."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def sequence_range(h: BatchHeader) -> tuple[int, int]:
    return h.base_sequence, increment_sequence(h.base_sequence, h.last_offset_delta)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, first_seq: int, last_seq: int, first_offset: int, last_offset: int, timestamp: int,
    ) -> None:
        object.__setattr__(self, "first_seq", first_seq)
        object.__setattr__(self, "last_seq", last_seq)
        object.__setattr__(self, "first_offset", first_offset)
        object.__setattr__(self, "last_offset", last_offset)
        object.__setattr__(self, "timestamp", timestamp)


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no ongoing transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class VerificationGuard:
    """Identity of one verification (Kafka's VerificationGuard): compared with `is`."""

    __slots__ = ()


class RemoteVerificationGuard:
    """A verification guard another worker process of this broker holds for its partition,
    named by a token (a broker of several workers, broker/node/shard_routing.py)."""

    __slots__ = ("owner", "token")

    def __init__(self, owner: int, token: int) -> None:
        self.owner = owner
        self.token = token


Guard = VerificationGuard | RemoteVerificationGuard


@dataclass(slots=True)
class VerificationEntry:
    """A producer's pending verification on this partition (Kafka's
    VerificationStateEntry): its guard, when it was made, and the lowest sequence (at the
    newest epoch) seen while verifying, so a higher sequence cannot slip in ahead of a
    lower one that is being retried."""

    guard: VerificationGuard
    timestamp_ms: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool = False  # transactions V2

    def update(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        elif epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


def _is_idempotent_data(h: BatchHeader) -> bool:
    return h.producer_id >= 0 and not h.is_control


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its transaction
        # (first offset, marker offset) of completed transactions, in marker order, until
        # the high watermark passes the marker.
        self._unreplicated: deque[tuple[int, int]] = deque()
        self._verifying: dict[int, VerificationEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        return self._producers

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its ongoing transaction."""
        return self._ongoing

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The lowest first offset of a transaction that is ongoing or whose marker is
        not below `high_watermark` yet; None when there is none."""
        unrep = self._unreplicated
        while unrep and unrep[0][1] < high_watermark:
            unrep.popleft()
        if not unrep and not self._ongoing:
            return None  # every fetch asks: no transaction, no allocation
        candidates = [*self._ongoing.values(), *(first for first, _ in unrep)]
        return min(candidates) if candidates else None

    def validate_marker(self, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int) -> None:
        """Before the leader writes an end-transaction marker; raises KafkaError."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"marker epoch {producer_epoch} of producer {producer_id} is older than its "
                f"current epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"coordinator epoch {coordinator_epoch} of the marker for producer "
                f"{producer_id} is older than {entry.coordinator_epoch}",
            )

    # ---- leader: transaction verification (KIP-890) -----------------------------------

    def has_ongoing_txn(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer's transaction at this epoch is open here (Kafka's
        UnifiedLog.hasOngoingTransaction). An open transaction at an older epoch does not
        count: with transactions V2 the epoch is bumped at every EndTxn, and the next
        transaction's first batch can reach the leader before the previous transaction's
        marker; it must be verified (the coordinator answers CONCURRENT_TRANSACTIONS until
        that transaction is complete) or the old marker would end it too."""
        entry = self._producers.get(producer_id)
        return producer_id in self._ongoing and entry is not None and entry.epoch == epoch

    def start_verification(self, producer_id: int, sequence: int, epoch: int,
                           now_ms: int, *, supports_epoch_bump: bool = False,
                           ) -> VerificationGuard | None:
        """None when the producer's transaction at this epoch is open here; else its guard
        (made on first use; an existing one is kept, with the lowest sequence updated).
        `supports_epoch_bump`: a transactions V2 producer (Produce v12+)."""
        if self.has_ongoing_txn(producer_id, epoch):
            return None
        entry = self._verifying.get(producer_id)
        if entry is None:
            entry = self._verifying[producer_id] = VerificationEntry(
                VerificationGuard(), now_ms, sequence, epoch, supports_epoch_bump)
        else:
            entry.update(sequence, epoch)
            entry.supports_epoch_bump = supports_epoch_bump
        return entry.guard

    def verification_entry(self, producer_id: int) -> VerificationEntry | None:
        return self._verifying.get(producer_id)

    # ---- leader: before the append -------------------------------------------------

    def validate(self, batches: Sequence[BatchHeader], *, verify: bool = False,
                 guard: VerificationGuard | None = None,
                 never_written: bool = False) -> BatchMetadata | None:
        """Check a client's batches against the state; raises KafkaError.

        Returns the cached metadata when a batch repeats one of the producer's last five:
        the whole append is then answered with that batch's offsets and nothing is
        written, as Kafka does. Batches of one append are checked in order, each against
        the state the earlier ones would leave. With `verify` (KIP-890), a transactional
        batch that would open a transaction must come with the producer's current
        verification `guard`. On a partition that `never_written` (its log has never held a
        record), a producer it has no state for must start at sequence 0: otherwise, of two
        requests in flight to a just-created partition, the second could be appended while
        the first was refused as the leader was not ready yet, and every retry of the first
        would then be out of order (KAFKA-15591; Kafka 4.5 refuses it too, 4.4 does not)."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq)
        for h in batches:
            if not _is_idempotent_data(h):
                continue
            pid = h.producer_id
            if h.base_sequence < 0:
                raise KafkaError(
                    ErrorCode.invalid_record,
                    f"invalid sequence number {h.base_sequence} in a batch of producer {pid}",
                )
            first, last = sequence_range(h)
            entry = self._producers.get(pid)
            if entry is not None and (dup := entry.find_duplicate(h.producer_epoch, first, last)):
                if len(batches) > 1:
                    # Clients send one batch per partition (Kafka refuses more from v3);
                    # answering a mixed append with the old batch's offsets would drop
                    # the others, and writing it would duplicate the retried one.
                    raise KafkaError(
                        ErrorCode.invalid_record,
                        f"batch {first}..{last} of producer {pid} is a retry; it must be sent "
                        f"on its own, not with {len(batches) - 1} other batches",
                    )
                return dup
            ventry = self._verifying.get(pid)
            if ventry is not None and first > ventry.lowest_sequence \
                    and h.producer_epoch == ventry.epoch:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid}: sequence {first} is above {ventry.lowest_sequence}, the "
                    f"earliest sequence still being verified",
                )
            if (verify and h.is_transactional
                    and not (pid in self._ongoing and entry is not None
                             and entry.epoch == h.producer_epoch)
                    and (ventry is None or guard is None or ventry.guard is not guard)):
                raise KafkaError(
                    ErrorCode.invalid_txn_state,
                    f"transactional batch of producer {pid} is not part of an ongoing "
                    f"transaction this partition verified with the transaction coordinator",
                )
            if pid in pending:
                epoch, last_seq = pending[pid]
            elif entry is not None:
                epoch, last_seq = entry.epoch, entry.last_seq
            else:
                epoch, last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if h.producer_epoch < epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"epoch {h.producer_epoch} of producer {pid} is older than its "
                    f"current epoch {epoch}",
                )
            if h.producer_epoch != epoch:
                if first != 0 and epoch == NO_PRODUCER_EPOCH and never_written:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"producer {pid} starts at sequence {first}, not 0, on a partition "
                        f"that has never held a record",
                    )
                if first != 0 and epoch != NO_PRODUCER_EPOCH:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"new epoch {h.producer_epoch} of producer {pid} starts at sequence "
                        f"{first}, not 0",
                    )
            elif not in_sequence(last_seq, first):
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid} epoch {epoch}: sequence {first} does not follow {last_seq}",
                )
            if not h.is_transactional and pid in self._ongoing:
                raise KafkaError(
                    ErrorCode.invalid_txn_state,
                    f"non-transactional batch of producer {pid}, whose transaction from "
                    f"offset {self._ongoing[pid]} is open",
                )
            pending[pid] = (h.producer_epoch, last)
        return None

    # ---- after an append (leader or follower) -------------------------------------

    def on_append(
        self, batches: Iterable[BatchHeader],
        markers: Mapping[int, ControlMarker] | None = None,
    ) -> list[AbortedTxn]:
        """Batches written to the log, offsets assigned, and the end-transaction markers
        among them by base offset. Followers take the leader's batches without
        validation, as Kafka's replication origin does. Returns the transactions the
        markers aborted, each with the last stable offset just after its marker."""
        aborted: list[AbortedTxn] = []
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            entry = self._producers.get(pid)
            if entry is None:
                entry = self._producers[pid] = ProducerEntry(pid)
            if h.producer_epoch != entry.epoch:
                entry.epoch = h.producer_epoch
                entry.batches.clear()
            if h.max_timestamp > entry.last_timestamp:
                entry.last_timestamp = h.max_timestamp
            if h.is_transactional:
                # the open transaction (or its end) is known from here on; but for a V2
                # producer a marker at the epoch being verified is the previous
                # transaction's (V2 markers carry the bumped epoch the next transaction
                # uses): that verification goes on, as in Kafka's UnifiedLog.updateProducers
                ventry = self._verifying.get(pid)
                if not (h.is_control and ventry is not None and ventry.supports_epoch_bump
                        and ventry.epoch == h.producer_epoch):
                    self._verifying.pop(pid, None)
            if h.is_control:
                marker = markers.get(h.base_offset) if markers else None
                if marker is not None:
                    self._end_txn(entry, h.base_offset, marker, aborted)
                continue
            if h.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = h.base_offset
                self._ongoing[pid] = h.base_offset
            first, last = sequence_range(h)
            entry.batches.append(
                BatchMetadata(first, last, h.base_offset, h.last_offset, h.max_timestamp)
            )

        return aborted

    def _end_txn(self, entry: ProducerEntry, marker_offset: int, marker: ControlMarker,
                 aborted: list[AbortedTxn]) -> None:
        first = entry.current_txn_first_offset
        if first >= 0:
            pid = entry.producer_id
            del self._ongoing[pid]
            if not marker.committed:
                # Kafka's lastStableOffset(completedTxn): the first offset of another
                # ongoing transaction, else just after this marker.
                lso = min(self._ongoing.values(), default=marker_offset + 1)
                aborted.append(AbortedTxn(pid, first, marker_offset, lso))
            self._unreplicated.append((first, marker_offset))
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch

    def rebuild(
        self, items: Iterable[tuple[BatchHeader, ControlMarker | None]],
    ) -> list[AbortedTxn]:
        """Replay (header, marker) pairs; returns the aborted transactions found."""
        self.clear()
        aborted: list[AbortedTxn] = []
        for h, marker in items:
            aborted += self.on_append((h,), {h.base_offset: marker} if marker else None)
        return aborted

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._verifying.clear()

    def snapshot(self, log_end_offset: int) -> bytes:
        body = bytearray(_SNAP_BODY_HEAD.pack(log_end_offset, len(self._producers)))
        for pid, e in self._producers.items():
            body += _SNAP_PRODUCER.pack(pid, e.epoch, e.last_timestamp, e.coordinator_epoch,
                                        e.current_txn_first_offset, len(e.batches))
            for b in e.batches:
                body += _SNAP_BATCH.pack(
                    b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp
                )
        return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)

    def load_snapshot(self, data: bytes) -> int:
        """Replace the state with a snapshot's; returns the log end offset it was taken
        at. Raises ValueError, leaving the state unchanged, for anything malformed."""
        if len(data) < _SNAP_HEAD.size + _SNAP_BODY_HEAD.size:
            raise ValueError(f"producer snapshot of {len(data)} bytes is too short")
        version, crc = _SNAP_HEAD.unpack_from(data, 0)
        if version not in (1, SNAPSHOT_VERSION):
            raise ValueError(f"producer snapshot version {version}")
        head = _SNAP_PRODUCER_V1 if version == 1 else _SNAP_PRODUCER
        body = memoryview(data)[_SNAP_HEAD.size :]
        if crc32c(body) != crc:
            raise ValueError("producer snapshot CRC mismatch")
        offset, count = _SNAP_BODY_HEAD.unpack_from(body, 0)
        pos = _SNAP_BODY_HEAD.size
        if count < 0 or count * head.size > len(body) - pos:
            raise ValueError(f"producer snapshot claims {count} producers")
        producers: dict[int, ProducerEntry] = {}
        for _ in range(count):
            if len(body) - pos < head.size:
                raise ValueError("producer snapshot cut short")
            if version == 1:
                pid, epoch, last_ts, n = head.unpack_from(body, pos)
                coordinator_epoch, txn_first = -1, -1
            else:
                pid, epoch, last_ts, coordinator_epoch, txn_first, n = head.unpack_from(
                    body, pos)
            pos += head.size
            if pid < 0 or not 0 <= n <= NUM_BATCHES_TO_RETAIN or pid in producers:
                raise ValueError(f"producer snapshot entry {pid} with {n} batches")
            if len(body) - pos < n * _SNAP_BATCH.size:
                raise ValueError("producer snapshot cut short")
            entry = ProducerEntry(pid, epoch, last_timestamp=last_ts,
                                  coordinator_epoch=coordinator_epoch,
                                  current_txn_first_offset=txn_first)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                pos += _SNAP_BATCH.size
            producers[pid] = entry
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} bytes after the producer snapshot")
        self._producers = producers
        self._ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                         if e.current_txn_first_offset >= 0}
        self._unreplicated.clear()
        return int(offset)

    def expire(self, now_ms: int, max_age_ms: int) -> list[int]:
        """Forget producers whose last batch timestamp is more than `max_age_ms` old.
        Producers whose batches carry no timestamp (-1) are kept: their age is unknown."""
        gone = [
            pid for pid, e in self._producers.items()
            if e.last_timestamp >= 0 and now_ms - e.last_timestamp > max_age_ms
            and e.current_txn_first_offset < 0
        ]
        for pid in gone:
            del self._producers[pid]
        stale = [pid for pid, v in self._verifying.items() if now_ms - v.timestamp_ms >= max_age_ms]
        for pid in stale:
            del self._verifying[pid]
        return gone
