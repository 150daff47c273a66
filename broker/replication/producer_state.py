"""Idempotent-producer state of one partition replica (Kafka's ProducerStateManager). Pure.

Per producer id: its epoch and the metadata of its last 5 batches (first/last sequence,
first/last offset, max timestamp), enough to recognise a retried batch and to check
that the next one follows on.

Transitions (all of them live here):

    validate(batches)            leader, before the append: DUPLICATE of a cached batch
                                 (answer its original offsets, append nothing), or raise
                                 INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER /
                                 INVALID_RECORD (no sequence; a retry mixed with other
                                 batches), or accept (None). Changes nothing.
    on_append(batches)           any append, leader or follower, with offsets assigned:
                                 the producer's epoch becomes the batch's (a new epoch
                                 forgets the old batches) and the batch is cached.
    rebuild(batches)             replica opened or log truncated: forget everything and
                                 replay the headers the log still holds.
    expire(now_ms, max_age_ms)   producers idle for longer than producer.id.expiration.ms
                                 are forgotten; they may then start again at any sequence.
    load_snapshot(data)          replica opened after a clean shutdown: the state as
                                 `snapshot(offset)` encoded it when the replica closed.

Rules (Kafka's ProducerAppendInfo, after KIP-360): an epoch older than the producer's is
INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0; the same epoch must go
on from the last sequence (Int32 max wraps to 0); a producer id the partition does not
know may start at any sequence, because its state may have been removed by retention,
DeleteRecords or expiration.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1


# Snapshot file body (big-endian): version i16, crc u32 (CRC32C of what follows), log end
# offset i64, producer count i32, then per producer: id i64, epoch i16, last timestamp
# i64, batch count i8, and per batch: first seq i32, last seq i32, first offset i64,
# last offset i64, timestamp i64. Kafka's own format keeps only the last batch.
SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hI")
_SNAP_BODY_HEAD = struct.Struct(">qi")
_SNAP_PRODUCER = struct.Struct(">qhqb")
_SNAP_BATCH = struct.Struct(">iiqqq")


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


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1

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


def _is_idempotent_data(h: BatchHeader) -> bool:
    return h.producer_id >= 0 and not h.is_control


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        return self._producers

    # ---- leader: before the append -------------------------------------------------

    def validate(self, batches: Sequence[BatchHeader]) -> BatchMetadata | None:
        """Check a client's batches against the state; raises KafkaError.

        Returns the cached metadata when a batch repeats one of the producer's last five:
        the whole append is then answered with that batch's offsets and nothing is
        written, as Kafka does. Batches of one append are checked in order, each against
        the state the earlier ones would leave."""
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
            pending[pid] = (h.producer_epoch, last)
        return None

    # ---- after an append (leader or follower) -------------------------------------

    def on_append(self, batches: Iterable[BatchHeader]) -> None:
        """Batches written to the log, offsets assigned. Followers take the leader's
        batches without validation, as Kafka's replication origin does."""
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
            if h.is_control:
                continue
            first, last = sequence_range(h)
            entry.batches.append(
                BatchMetadata(first, last, h.base_offset, h.last_offset, h.max_timestamp)
            )

    def rebuild(self, batches: Iterable[BatchHeader]) -> None:
        self._producers.clear()
        self.on_append(batches)

    def clear(self) -> None:
        self._producers.clear()

    def snapshot(self, log_end_offset: int) -> bytes:
        body = bytearray(_SNAP_BODY_HEAD.pack(log_end_offset, len(self._producers)))
        for pid, e in self._producers.items():
            body += _SNAP_PRODUCER.pack(pid, e.epoch, e.last_timestamp, len(e.batches))
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
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"producer snapshot version {version}")
        body = memoryview(data)[_SNAP_HEAD.size :]
        if crc32c(body) != crc:
            raise ValueError("producer snapshot CRC mismatch")
        offset, count = _SNAP_BODY_HEAD.unpack_from(body, 0)
        pos = _SNAP_BODY_HEAD.size
        if count < 0 or count * _SNAP_PRODUCER.size > len(body) - pos:
            raise ValueError(f"producer snapshot claims {count} producers")
        producers: dict[int, ProducerEntry] = {}
        for _ in range(count):
            if len(body) - pos < _SNAP_PRODUCER.size:
                raise ValueError("producer snapshot cut short")
            pid, epoch, last_ts, n = _SNAP_PRODUCER.unpack_from(body, pos)
            pos += _SNAP_PRODUCER.size
            if pid < 0 or not 0 <= n <= NUM_BATCHES_TO_RETAIN or pid in producers:
                raise ValueError(f"producer snapshot entry {pid} with {n} batches")
            if len(body) - pos < n * _SNAP_BATCH.size:
                raise ValueError("producer snapshot cut short")
            entry = ProducerEntry(pid, epoch, last_timestamp=last_ts)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                pos += _SNAP_BATCH.size
            producers[pid] = entry
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} bytes after the producer snapshot")
        self._producers = producers
        return int(offset)

    def expire(self, now_ms: int, max_age_ms: int) -> list[int]:
        """Forget producers whose last batch timestamp is more than `max_age_ms` old.
        Producers whose batches carry no timestamp (-1) are kept: their age is unknown."""
        gone = [
            pid for pid, e in self._producers.items()
            if e.last_timestamp >= 0 and now_ms - e.last_timestamp > max_age_ms
        ]
        for pid in gone:
            del self._producers[pid]
        return gone
