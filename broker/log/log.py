"""PartitionLog: one topic-partition's segments, the API replicas and the Raft store use.

Concurrency: one lock serialises writers (append, truncate, roll, retention, cleaner
swap). Readers take the current segment tuple (replaced, never mutated: copy-on-write)
and never block; a deleted segment's file stays readable through slices already handed
out.
"""

from __future__ import annotations

import bisect
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log.checkpoints import (
    CheckpointError,
    read_partition_metadata,
    write_partition_metadata,
)
from broker.log.config import LogConfig
from broker.log.control import ControlMarker, read_marker
from broker.log.drop_behind import DROP_STEP_BYTES
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
)
from broker.log.segment import EMPTY_SLICE, INT32_MAX, BatchEntry, FileSlice, LogSegment
from broker.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, collect_aborted
from broker.log.validator import LogValidator
from broker.metrics.stats import LOG_FLUSH_TIME
from broker.protocol.records import (
    CONTROL_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    HeaderFields,
    RawHeader,
    Record,
    TimestampType,
    decode_records,
    iter_batch_headers,
    iter_raw_batch_headers,
    whole_batches_length,
)
from broker.util.files import fsync_dir

# The end-transaction markers of an append without any (nearly all of them), shared.
_NO_MARKERS: Final[Mapping[int, ControlMarker]] = MappingProxyType({})
_SEGMENT_FILE: Final = re.compile(r"^(\d{20})\.(log|index|timeindex)((?:\.\w+)?)$")


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @staticmethod
    def parse_dir_name(name: str) -> TopicPartition | None:
        topic, sep, part = name.rpartition("-")
        if not sep or not topic or not part.isdigit():
            return None
        return TopicPartition(topic, int(part))


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    records_count: int
    max_timestamp: int

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, base_offset: int, last_offset: int, log_append_time_ms: int, log_start_offset: int,
        records_count: int, max_timestamp: int,
    ) -> None:
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.records_count = records_count
        self.max_timestamp = max_timestamp


class ProducerStateHook:
    """Called under the log lock; subclass to keep producer state in step with the log."""

    def on_append(
        self, batches: Sequence[BatchHeader], markers: Mapping[int, ControlMarker],
    ) -> Sequence[AbortedTxn]:
        """Batches just written (offsets assigned) and the end-transaction markers among
        them (by base offset). Returns the transactions the markers aborted, which the
        log records in the active segment's `.txnindex`."""
        return ()

    def first_ongoing_txn_offset(self) -> int | None:
        """The lowest first offset of an ongoing transaction (called under the log
        lock, where appends change it); None when none is open."""
        return None

    def on_roll(self, new_segment_base: int) -> None:
        """A segment starts at this offset: Kafka snapshots producer state here."""

    def on_truncate(self, log_end_offset: int, log_start_offset: int) -> None:
        """The log was truncated; rebuild from a snapshot at or below the new end."""


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        *,
        clock: Callable[[], int] = _wall_clock_ms,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
        topic_id: uuid.UUID | None = None,
    ) -> None:
        """Open (or create) the log in `directory`, recovering after `recovery_point`
        unless `clean_shutdown`."""
        self.dir = directory
        # set by LogManager for a directory it just created (see flush)
        self.parent_dir_unsynced = False
        self.topic_partition = topic_partition
        self.config = config
        self.validator = LogValidator(config)
        self.clock = clock
        self._lock = threading.RLock()
        self.producer_state_hook: ProducerStateHook | None = None
        self._high_watermark: int | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        # Bumped by every truncation: a cleaner that started before one must not swap.
        self.truncation_generation = 0
        directory.mkdir(parents=True, exist_ok=True)
        self.epoch_cache = LeaderEpochCache(directory, fsync=True)
        self.recovered_bytes_truncated = 0
        self.recovered_segments: list[int] = []  # base offsets of the segments scanned at load
        # Segments and their base offsets, replaced together as one tuple (copy-on-write).
        self._view: tuple[tuple[LogSegment, ...], list[int]] = ((), [])
        self._load(recovery_point, log_start_offset, clean_shutdown)
        if topic_id is not None:
            self.set_topic_id(topic_id)

    # ------------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def high_watermark(self) -> int:
        return self._log_end_offset if self._high_watermark is None else self._high_watermark

    def update_high_watermark(self, hw: int) -> None:
        """Retention and DeleteRecords never go past the HW the replication layer sets."""
        self._high_watermark = min(max(hw, self._log_start_offset), self._log_end_offset)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def topic_id(self) -> uuid.UUID | None:
        try:
            return read_partition_metadata(self.dir)
        except (CheckpointError, OSError):
            return None

    def set_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id in `partition.metadata`; a different id already there
        means this directory belongs to an earlier topic of the same name:
        INCONSISTENT_TOPIC_ID, as Kafka answers (the caller deletes the stale log)."""
        try:
            existing = read_partition_metadata(self.dir)
        except CheckpointError:
            existing = None  # unreadable: rewrite it
        if existing == topic_id:
            return
        if existing is not None:
            raise KafkaError(
                ErrorCode.inconsistent_topic_id,
                f"{self.dir.name} holds topic id {existing}, not {topic_id}",
            )
        # Not fsynced (Kafka defers this flush too): the id is in the metadata log, and
        # every apply of the partition after a restart calls this again, rewriting a file
        # a crash lost. Two fsyncs per new partition made creating thousands of them block
        # a broker for seconds.
        write_partition_metadata(self.dir, topic_id, fsync=False)

    # ------------------------------------------------------------------ loading

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self.clock(),
            suffix=suffix,
            preallocate=self.config.preallocate and not suffix,
        )

    def _set_segments(self, segs: Sequence[LogSegment]) -> None:
        self._view = (tuple(segs), [s.base_offset for s in segs])

    @property
    def _segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        self._cleanup_leftovers()
        bases = sorted(
            int(p.name[:20])
            for p in self.dir.iterdir()
            if (m := _SEGMENT_FILE.match(p.name)) and m.group(2) == "log" and not m.group(3)
        )
        segs: list[LogSegment] = []
        truncated_at: int | None = None
        for i, base in enumerate(bases):
            seg = self._new_segment(base)
            if truncated_at is not None:
                seg.rename_to_deleted()
                seg.delete_files()
                continue
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            needs_recovery = not clean_shutdown and (
                next_base is None or next_base > recovery_point
            )
            if needs_recovery:
                cut = seg.recover(on_batch=self._assign_epoch_from_recovery)
                self.recovered_segments.append(base)
                self.recovered_bytes_truncated += cut
                if cut:
                    truncated_at = seg.next_offset
            else:
                seg.load_clean()
            if segs and seg.base_offset < segs[-1].next_offset:
                # Covered by the previous segment: an original whose cleaned group copy was
                # swapped in just before a crash. The copy holds what survives of it.
                seg.rename_to_deleted()
                seg.delete_files()
                continue
            if segs:
                segs[-1].release_index_fds()
            segs.append(seg)
        if segs and not clean_shutdown:
            segs[-1].release_leftover_reserve()  # preallocate's reserve, if a crash left one
        if not segs:
            segs.append(self._new_segment(max(log_start_offset, 0)))
        self._set_segments(segs)
        active = segs[-1]
        self._log_end_offset = active.next_offset
        self._log_start_offset = min(
            max(log_start_offset, segs[0].base_offset), self._log_end_offset
        )
        self._recovery_point = (
            min(recovery_point, self._log_end_offset)
            if not clean_shutdown
            else self._log_end_offset
        )
        if self.epoch_cache.epochs:
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            self.epoch_cache.truncate_from_start(self._log_start_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock()
        self._pending_roll_flush = 0

    def _assign_epoch_from_recovery(self, h: BatchHeader) -> None:
        if (
            h.partition_leader_epoch >= 0
            and h.partition_leader_epoch > self.epoch_cache.latest_epoch
        ):
            self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    def _cleanup_leftovers(self) -> None:
        """Finish what a crash interrupted: deletions, cleaner output, swaps."""
        for p in list(self.dir.iterdir()):
            name = p.name
            if (
                name.endswith(DELETED_SUFFIX)
                or name.endswith(CLEANED_SUFFIX)
                or name.endswith(".tmp")
            ):
                p.unlink(missing_ok=True)
        for p in sorted(self.dir.iterdir()):
            if p.name.endswith(SWAP_SUFFIX):
                # A swap file is only created from complete cleaner output: finish the swap.
                final = p.with_name(p.name[: -len(SWAP_SUFFIX)])
                os.replace(p, final)
        logs = {p.name[:20] for p in self.dir.iterdir() if p.name.endswith(LOG_SUFFIX)}
        for p in self.dir.iterdir():
            if (p.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
                    and p.name[:20] not in logs):
                p.unlink(missing_ok=True)

    # ------------------------------------------------------------------ appends

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int,
        *, allow_control: bool = False,
    ) -> AppendResult:
        """Validate, assign offsets from the log end and stamp `leader_epoch`.

        A writable buffer is patched in place and written as is; a read-only one is not
        copied: each batch is written as a fresh copy of the fields the log stamps (its
        first 16 bytes; the whole 61-byte header with LogAppendTime) followed by the
        caller's bytes (pwritev). Control batches are refused
        (INVALID_RECORD, as Kafka answers clients) unless `allow_control` (the
        transaction markers the broker writes itself)."""
        mv, raw, has_control = self.validator.validate(records, now_ms, allow_control)
        return self.append_validated(mv, raw, has_control, leader_epoch, now_ms)

    def append_validated(
        self, mv: memoryview, raw: list[tuple[int, HeaderFields]], has_control: bool,
        leader_epoch: int, now_ms: int,
    ) -> AppendResult:
        """append_as_leader's second half: batches `self.validator.validate` returned
        (for a caller that checks more between the two, as the partition's producer
        state does with the headers the validation read)."""
        validator = self.validator
        markers_at: dict[int, ControlMarker] | None = None
        if has_control:
            for i, (pos, t) in enumerate(raw):
                if t[5] & CONTROL_MASK:  # attributes
                    m = read_marker(mv[pos : pos + t[1] + LOG_OVERHEAD], BatchHeader(*t))
                    if m is not None:
                        markers_at = markers_at or {}
                        markers_at[i] = m
        log_append = validator.log_append
        with self._lock:
            if self._closed:
                self._check_open()
            data, end, entries, with_producer, max_ts, count, next_offset = (
                validator.assign_offsets(mv, raw, self._log_end_offset, leader_epoch, now_ms))
            base = entries[0][2]
            if leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(leader_epoch, base, persist=False)
            markers = (_NO_MARKERS if markers_at is None
                       else {entries[i][2]: m for i, m in markers_at.items()})
            self._append_locked(data, end, entries, with_producer, now_ms, count, markers)
            return AppendResult(
                base,
                next_offset - 1,
                now_ms if log_append else -1,
                self._log_start_offset,
                count,
                max_ts,
            )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append the leader's batches as they are (offsets, epochs, timestamps).

        A trailing partial batch (a fetch cut at max bytes) is ignored; anything else
        malformed raises CORRUPT_MESSAGE and leaves the log unchanged.
        """
        mv = memoryview(records)
        mv = mv[: whole_batches_length(mv)]
        with self._lock:
            self._check_open()
            if len(mv) == 0:
                return AppendResult(
                    self._log_end_offset,
                    self._log_end_offset - 1,
                    -1,
                    self._log_start_offset,
                    0,
                    -1,
                )
            entries: list[BatchEntry] = []
            headers: list[RawHeader] = []
            with_producer: list[RawHeader] = []
            markers: dict[int, ControlMarker] = {}
            expected = self._log_end_offset
            max_ts = -1
            count = 0
            for pos, t in iter_raw_batch_headers(mv, validate_crc=True):
                base_offset, last_offset_delta, batch_max_ts = (
                    t.base_offset, t.last_offset_delta, t.max_timestamp)
                if base_offset < expected or last_offset_delta < 0:
                    raise KafkaError(
                        ErrorCode.corrupt_message,
                        f"out of order offsets: batch {base_offset} at log end {expected}",
                    )
                expected = base_offset + last_offset_delta + 1
                entries.append((pos, t.batch_length + LOG_OVERHEAD, base_offset, expected - 1,
                                batch_max_ts))
                headers.append(t)
                if t.producer_id >= 0:
                    with_producer.append(t)
                if t.attributes & CONTROL_MASK and t.producer_id >= 0:
                    m = read_marker(mv[pos : pos + t.batch_length + LOG_OVERHEAD],
                                    BatchHeader(*t))
                    if m is not None:
                        markers[base_offset] = m
                count += t.records_count
                if batch_max_ts > max_ts:
                    max_ts = batch_max_ts
            if entries[-1][3] - entries[0][2] > (1 << 31) - 1:
                raise KafkaError(
                    ErrorCode.corrupt_message, "offset range of one append exceeds int32"
                )
            for t in headers:
                if t.partition_leader_epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(t.partition_leader_epoch, t.base_offset, persist=False)
            self._append_locked(mv, len(mv), entries, with_producer, self.clock(), count,
                                markers)
            return AppendResult(
                entries[0][2],
                entries[-1][3],
                -1,
                self._log_start_offset,
                count,
                max_ts,
            )

    def _append_locked(
        self,
        data: memoryview | list[bytes | bytearray | memoryview],
        size: int,
        entries: list[BatchEntry],
        with_producer: list[RawHeader],
        now_ms: int,
        records_count: int,
        markers: Mapping[int, ControlMarker],
    ) -> None:
        seg = self._maybe_roll(size, entries, now_ms)
        seg.append(data, entries, size)
        window = self.config.drop_behind_bytes
        # next_drop's own test, made here first: it spares two calls on most appends.
        if window >= 0 and seg.size - window - seg.cache_dropped_to >= DROP_STEP_BYTES:
            seg.drop_cached_behind(window)
        self._log_end_offset = entries[-1][3] + 1
        if with_producer and self.producer_state_hook is not None:
            # Only batches with a producer id carry producer state: plain producers'
            # appends build no BatchHeader at all.
            for aborted in self.producer_state_hook.on_append(
                    [BatchHeader(*t) for t in with_producer], markers):
                seg.txn_index.append(aborted)
        self._unflushed_messages += records_count
        if self.config.fsync_on_append:
            if len(self._segments) > 1 and self._segments[-2].indexes_unflushed:
                self.flush()  # a roll just happened: make the previous segment durable too
            seg.flush(indexes=False)
            self.epoch_cache.persist_if_dirty()
            self._recovery_point = self._log_end_offset
            self._unflushed_messages = 0
            self._last_flush_ms = now_ms
        elif self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, size: int, entries: list[BatchEntry], now_ms: int) -> LogSegment:
        seg = self._view[0][-1]
        cfg = self.config
        if seg.size == 0:
            return self._roll_if_base_mismatch(seg, entries)
        # Kafka's LogSegment.timeWaitedForRoll: the appended batches' largest timestamp
        # against the segment's first batch's; the wall clock against the segment's creation
        # only when it has no timestamp. (The wall clock against an old first timestamp
        # rolled a segment per append for records that carry old CreateTimes: a backfill,
        # a mirror of old data.)
        rolling_ts = seg.rolling_based_timestamp
        if rolling_ts is None or rolling_ts < 0:
            waited = now_ms - seg.created_ms
        else:
            newest = entries[0][4] if len(entries) == 1 else max(e[4] for e in entries)
            waited = newest - rolling_ts
        should = (
            seg.size + size > cfg.segment_bytes
            or waited > cfg.segment_ms - cfg.segment_jitter_ms
            or len(seg.offset_index.rel_offsets) >= seg.offset_index.max_entries
            or len(seg.time_index.timestamps) >= seg.time_index.max_entries
            or entries[-1][3] - seg.base_offset > INT32_MAX  # not seg.can_hold(...), inline
        )
        if not should:
            return seg
        return self._roll(entries[0][2])

    def _roll_if_base_mismatch(self, seg: LogSegment, entries: list[BatchEntry]) -> LogSegment:
        # An empty active segment is reused unless the batch cannot be indexed relative
        # to its base (a follower jumping forward far).
        if entries[0][2] < seg.base_offset or not seg.can_hold(entries[-1][3]):
            return self._roll(entries[0][2], replace_empty=True)
        return seg

    def roll(self) -> LogSegment:
        with self._lock:
            if self._segments[-1].size == 0:
                return self._segments[-1]
            return self._roll(self._log_end_offset)

    def _roll(self, new_base: int, *, replace_empty: bool = False) -> LogSegment:
        old = self._segments[-1]
        segs = list(self._segments)
        if replace_empty and old.size == 0:
            segs.pop()
            old.rename_to_deleted()
            old.delete_files()
        else:
            # Not flushed here but soon after, off the append path: like Kafka's
            # asynchronous flush of a rolled segment, the next maybe_flush() (the log
            # manager's tick) fsyncs everything below the new segment and moves the
            # recovery point there, so a crash re-scans little more than the active one.
            old.on_become_inactive()
            self._pending_roll_flush = max(self._pending_roll_flush, old.next_offset)
        new_base = max(new_base, old.next_offset if not replace_empty else new_base)
        seg = self._new_segment(new_base)
        segs.append(seg)
        self._set_segments(segs)
        if self.producer_state_hook is not None:
            self.producer_state_hook.on_roll(new_base)
        return seg

    # ------------------------------------------------------------------ reads

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.topic_partition} is closed")

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> FileSlice:
        """Bytes of one segment from the start of the batch holding `offset`: at most
        `max_bytes` (but the whole first batch if `min_one_batch`), never reaching the
        batch that holds `max_offset` (exclusive bound: high watermark / LSO). As in
        Kafka the slice may end inside a batch when max_bytes cuts it; clients and
        append_as_follower drop such a tail. Raises OFFSET_OUT_OF_RANGE outside
        [log start, log end]; an empty slice when there is nothing to return. The slice's
        file stays readable even if the segment is deleted or replaced meanwhile (a
        truncation in place can still shorten it)."""
        start = self._log_start_offset
        end = self._log_end_offset
        segs, bases = self._view
        if offset < start or offset > end:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} outside [{start}, {end}] of {self.topic_partition}",
            )
        if offset >= max_offset or offset == end:
            return EMPTY_SLICE
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        limit_seg, limit_pos = self._position_of(min(max_offset, end), segs, bases)
        while i < len(segs):
            seg = segs[i]
            if limit_seg is not None and seg.base_offset > limit_seg.base_offset:
                return EMPTY_SLICE
            max_pos = limit_pos if seg is limit_seg else seg.size
            sl = seg.read(offset, max_bytes, max_pos, min_one_batch)
            if sl is not None:
                return sl
            i += 1
        return EMPTY_SLICE

    def _position_of(
        self, offset: int, segs: tuple[LogSegment, ...], bases: list[int]
    ) -> tuple[LogSegment | None, int]:
        """(segment, position) where data at `offset` starts; (None, 0) when offset is the
        log end (no limit)."""
        if offset >= self._log_end_offset:
            return None, 0
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        while i < len(segs):
            found = segs[i].locate(offset)
            if found is not None:
                return segs[i], found[0]
            i += 1
        return None, 0

    def read_records(
        self, offset: int, max_offset: int | None = None, max_records: int | None = None
    ) -> list[Record]:
        """Decoded records from `offset` up to `max_offset` across segments (tests, tools,
        internal topics; not the fetch path)."""
        end = self._log_end_offset if max_offset is None else max_offset
        out: list[Record] = []
        while offset < end and (max_records is None or len(out) < max_records):
            data = self.read(offset, 1 << 20, end).read_bytes()
            data = data[: whole_batches_length(data)]
            if not data:
                break
            mv = memoryview(data)
            for pos, h in iter_batch_headers(mv, validate_crc=True):
                if not h.is_control:
                    out += [
                        r
                        for r in decode_records(mv[pos : pos + h.size])
                        if offset <= r.offset < end
                    ]
                offset = max(offset, h.next_offset)
        return out if max_records is None else out[:max_records]

    # ------------------------------------------------------------------ transactions

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the
        `.txnindex` of the segment holding `fetch_offset` and the ones after it, as far
        as needed (Kafka's collectAbortedTransactions). Lock-free like reads."""
        segs, bases = self._view
        i = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
        return collect_aborted((s.txn_index for s in segs[i:]), fetch_offset, upper_bound)

    def all_aborted_txns(self) -> Iterator[AbortedTxn]:
        for seg in self._segments:
            yield from seg.txn_index.entries

    def first_ongoing_txn_offset(self) -> int | None:
        """The cleaner's bound: no transaction still open may be compacted."""
        with self._lock:
            hook = self.producer_state_hook
            return None if hook is None else hook.first_ongoing_txn_offset()

    @property
    def txn_index_rebuild_from(self) -> int | None:
        """Base offset of the first segment whose `.txnindex` was dropped by recovery
        (or found corrupt) and awaits the producer-state scan; None when all are whole."""
        for seg in self._segments:
            if seg.txn_index_reset:
                return seg.base_offset
        return None

    def ensure_aborted_txns(self, entries: Sequence[AbortedTxn]) -> int:
        """Index aborted transactions found by a scan of the log (recovery, a missing
        file): each goes to the segment holding its abort marker unless already there.
        Marks every segment's index as whole again; returns how many were added."""
        with self._lock:
            segs, bases = self._view
            added = 0
            for e in entries:
                i = bisect.bisect_right(bases, e.last_offset) - 1
                if i < 0 or e.last_offset >= segs[i].next_offset:
                    continue
                if segs[i].txn_index.ensure(e):
                    added += 1
            for seg in segs:
                seg.txn_index_reset = False
            return added

    # ------------------------------------------------------------------ ListOffsets

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int] | None:
        """First record with timestamp >= target: (offset, timestamp, leader epoch)."""
        if timestamp_ms == -2:
            return self.earliest_offset()
        if timestamp_ms == -1:
            return self.latest_offset()
        if timestamp_ms == -3:
            return self.max_timestamp_offset()
        start = self._log_start_offset
        for seg in self._segments:
            if seg.max_timestamp >= timestamp_ms and seg.next_offset > start:
                found = seg.find_offset_by_timestamp(timestamp_ms, start)
                if found is not None:
                    return found
        return None

    def earliest_offset(self) -> tuple[int, int, int]:
        start = self._log_start_offset
        return start, -1, self.epoch_cache.epoch_for_offset(start)

    def latest_offset(self) -> tuple[int, int, int]:
        return self._log_end_offset, -1, self.epoch_cache.latest_epoch

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """Offset, timestamp and epoch of the record with the largest timestamp."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.next_offset > self._log_start_offset and (
                best is None or seg.max_timestamp > best.max_timestamp
            ):
                best = seg
        if best is None or best.max_timestamp < 0:
            return None
        found = best.translate_offset(best.offset_of_max_timestamp)
        if found is None:
            return None
        pos, h = found
        if h.timestamp_type == TimestampType.LOG_APPEND_TIME or h.is_control:
            return h.base_offset, h.max_timestamp, h.partition_leader_epoch
        for r in decode_records(best.read_batch(pos, h)):
            if r.timestamp == h.max_timestamp:
                return r.offset, r.timestamp, h.partition_leader_epoch
        return h.last_offset, h.max_timestamp, h.partition_leader_epoch

    # ------------------------------------------------------------------ epochs

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove everything at and after `offset`."""
        with self._lock:
            self._check_open()
            if offset >= self._log_end_offset:
                return
            self.truncation_generation += 1
            if offset <= self._log_start_offset:
                self._truncate_fully_locked(
                    max(offset, 0) if offset < self._log_start_offset else offset
                )
                return
            keep = [s for s in self._segments if s.base_offset < offset]
            drop = [s for s in self._segments if s.base_offset >= offset]
            if not keep:
                self._truncate_fully_locked(offset)
                return
            last = keep[-1]
            cut_base = last.truncate_to(offset)
            self._set_segments(keep)
            for s in drop:
                self._schedule_delete(s)
            # A batch spanning `offset` goes whole: the log then ends where it began.
            self._log_end_offset = offset if cut_base is None else min(offset, cut_base)
            self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            if self._high_watermark is not None:
                self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            if self.producer_state_hook is not None:
                self.producer_state_hook.on_truncate(self._log_end_offset, self._log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        self.truncation_generation += 1
        # Rename the old segments away first: the new one may reuse a base offset name.
        for s in self._segments:
            self._schedule_delete(s)
        self._set_segments([self._new_segment(offset)])
        self._log_start_offset = offset
        self._log_end_offset = offset
        self._recovery_point = offset
        self._high_watermark = None if self._high_watermark is None else offset
        self.epoch_cache.clear()
        if self.producer_state_hook is not None:
            self.producer_state_hook.on_truncate(offset, offset)

    # ------------------------------------------------------------------ cleaner swap

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty `<base>.log.cleaned` segment for the cleaner to fill."""
        for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.dir / f"{base_offset:020d}{ext}{suffix}").unlink(missing_ok=True)
        return self._new_segment(base_offset, suffix=CLEANED_SUFFIX)

    def replace_segments(
        self,
        groups: Sequence[tuple[Sequence[LogSegment], LogSegment]],
        generation: int | None = None,
    ) -> bool:
        """Swap each group of consecutive segments for its cleaned copy, Kafka's way:
        `.cleaned` -> `.swap`, originals -> `.deleted`, `.swap` -> final name (the first
        original's). A crash at any step is finished (swap complete; originals the copy
        covers are dropped as overlapping) or undone (cleaned discarded) by the next load.
        Returns False, and discards the cleaned files, if any original left the log
        meanwhile (truncation, retention, close)."""
        with self._lock:
            current = {id(s) for s in self._segments}
            if (
                self._closed
                or any(id(old) not in current for olds, _ in groups for old in olds)
                or (generation is not None and generation != self.truncation_generation)
            ):
                for _, new in groups:
                    new.delete_files()
                return False
            for _, new in groups:
                new.on_become_inactive()
                new.flush()
                new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_dir(self.dir)
            for olds, _ in groups:
                for old in olds:
                    self._schedule_delete(old)
            for _, new in groups:
                new.change_suffix(SWAP_SUFFIX, "")
            fsync_dir(self.dir)
            first_of = {id(olds[0]): new for olds, new in groups}
            dropped = {id(old) for olds, _ in groups for old in olds[1:]}
            self._set_segments(
                [first_of.get(id(s), s) for s in self._segments if id(s) not in dropped]
            )
            return True

    # ------------------------------------------------------------------ log start / retention

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset; return the new log start."""
        with self._lock:
            self._check_open()
            if offset < 0 or offset > self.high_watermark:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} beyond high watermark {self.high_watermark}",
                )
            self._maybe_increment_log_start(offset)
            self._delete_segments_below_log_start()
            return self._log_start_offset

    def _maybe_increment_log_start(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)

    def _delete_segments_below_log_start(self) -> int:
        segs = self._segments
        doomed = []
        for i, s in enumerate(segs[:-1]):
            if segs[i + 1].base_offset <= self._log_start_offset:
                doomed.append(s)
            else:
                break
        return self._delete_segments(doomed)

    def _delete_segments(self, doomed: list[LogSegment]) -> int:
        if not doomed:
            return 0
        ids = {id(s) for s in doomed}
        remaining = [s for s in self._segments if id(s) not in ids]
        if not remaining:
            remaining = [self._roll_empty_successor()]
        self._set_segments(remaining)
        for s in doomed:
            self._schedule_delete(s)
        new_start = remaining[0].base_offset
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
        return len(doomed)

    def _roll_empty_successor(self) -> LogSegment:
        return self._new_segment(self._log_end_offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: retention.ms, retention.bytes, log start breach. Returns segments
        deleted. Only segments wholly below the high watermark go."""
        with self._lock:
            if self._closed:
                return 0
            hw = self.high_watermark
            count = self._delete_segments_below_log_start()
            if not self.config.delete:
                return count
            segs = self._segments
            doomed: list[LogSegment] = []
            cfg = self.config
            total = sum(s.size for s in segs)
            for i, s in enumerate(segs):
                upper = segs[i + 1].base_offset if i + 1 < len(segs) else s.next_offset
                if upper > hw or (s is segs[-1] and s.size == 0):
                    break
                # Segments without timestamps (converted magic 0) age by file mtime.
                largest = s.max_timestamp if s.max_timestamp >= 0 else s.last_modified_ms()
                by_time = cfg.retention_ms >= 0 and now_ms - largest > cfg.retention_ms
                by_size = cfg.retention_bytes >= 0 and total - s.size >= cfg.retention_bytes
                if not (by_time or by_size):
                    break
                doomed.append(s)
                total -= s.size
            if doomed and doomed[-1] is segs[-1]:
                # Deleting the active segment: roll first so the log keeps its end offset.
                self._roll(self._log_end_offset)
            return count + self._delete_segments(doomed)

    def _schedule_delete(self, seg: LogSegment) -> None:
        seg.rename_to_deleted()
        self._pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, seg))

    def delete_expired_files(self, now_ms: int, *, force: bool = False) -> int:
        """Second step of asynchronous deletion: unlink `.deleted` files whose delay passed."""
        with self._lock:
            due = [s for t, s in self._pending_deletes if force or t <= now_ms]
            self._pending_deletes = [
                (t, s) for t, s in self._pending_deletes if not (force or t <= now_ms)
            ]
        for s in due:
            s.delete_files()
        return len(due)

    # ------------------------------------------------------------------ flushing

    def flush(self, up_to: int | None = None) -> None:
        """Make data below `up_to` (default: the log end) durable and move the recovery
        point there. The fsyncs run outside the log lock (on duplicated descriptors), so
        appends and reads go on meanwhile; only pending index entries are written under
        it."""
        with self._lock:
            if self._closed:
                return
            target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
            generation = self.truncation_generation
            # Before the recovery point can pass an epoch's start (rare: once per epoch).
            self.epoch_cache.persist_if_dirty()
            fds: list[int] = []
            segs = self._segments
            for seg in segs:
                if seg.base_offset < target or (up_to is None and seg is segs[-1]):
                    fds += seg.prepare_flush()
            if up_to is None:
                self._unflushed_messages = 0
                self._last_flush_ms = self.clock()
        started = time.monotonic()
        try:
            if fds and self.parent_dir_unsynced:
                # A new partition's directory entry is made durable with its first data
                # (LogManager.get_or_create does not fsync the log dir per partition).
                fsync_dir(self.dir.parent)
                self.parent_dir_unsynced = False
            for fd in fds:
                os.fdatasync(fd)  # data and size; mtime need not be durable
        finally:
            for fd in fds:
                os.close(fd)
        LOG_FLUSH_TIME.observe((time.monotonic() - started) * 1000.0)
        with self._lock:
            # A truncation meanwhile may have replaced flushed data with unflushed data.
            if generation == self.truncation_generation:
                self._recovery_point = max(self._recovery_point, min(target, self._log_end_offset))

    def maybe_flush(self, now_ms: int) -> bool:
        """Periodic flushing: everything after flush.ms, or the segments rolled since the
        last call."""
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        rolled = self._pending_roll_flush
        if rolled > self._recovery_point:
            self.flush(up_to=rolled)
            return True
        return False

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self.validator = LogValidator(config)
            for s in self._segments:
                s.index_interval_bytes = config.index_interval_bytes

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            for s in self._segments:
                s.flush()
            self.epoch_cache.persist_if_dirty()
            self._recovery_point = self._log_end_offset
            for s in self._segments:
                s.close()
            self._closed = True
            # The hook refers back to the Partition that holds this log. Dropped here, a
            # deleted partition's log and segment files go with their last reference;
            # kept, the cycle waited for the cyclic collector, which a busy broker may not
            # run for hours, and the deleted files' disk space stayed in use until then.
            self.producer_state_hook = None
        self.delete_expired_files(0, force=True)

    @property
    def closed(self) -> bool:
        return self._closed
