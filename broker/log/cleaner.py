"""Log cleaner: compaction for `cleanup.policy=compact` (and `compact,delete`).

Rules, as Kafka's LogCleaner:
- Only the range [log start, first uncleanable offset) is cleaned; the first
  uncleanable offset is the lowest of: the active segment's base, the high watermark,
  the first offset of an ongoing transaction, the first segment younger than
  `min.compaction.lag.ms`.
- A log is cleaned when dirty bytes / (clean + dirty) >= `min.cleanable.dirty.ratio`,
  or a dirty segment is older than `max.compaction.lag.ms`.
- A record survives if it is the latest for its key (offset map over the dirty range).
  Records without a key are dropped. Offsets never change: a rewritten batch keeps its
  base offset, lastOffsetDelta, producer fields, epoch and codec.
- Tombstones (null value) first get a delete horizon (now + `delete.retention.ms`,
  KIP-534: batch attribute + baseTimestamp); a later clean past the horizon drops them.
- A batch emptied of all records is kept (empty) if it is its producer's last batch, so
  idempotent producer state survives. Control batches are kept.
- Consecutive segments are grouped (their cleaned copy within segment.bytes) and
  recopied into one `.cleaned` file per group, which keeps each group's last batch (empty
  if need be) so it ends at the group's end offset; groups are swapped in under the log
  lock (PartitionLog.replace_segments); appends and reads never wait for the copy.
- Transactions (Kafka's CleanedTransactionMetadata): the records of aborted transactions
  (a transactional batch of a producer inside one of its aborted ranges of the .txnindex)
  never enter the offset map and are dropped, whatever their keys (the producer's last
  batch is kept empty, as above). A marker stays while this pass still met a batch of its
  transaction (an ABORT marker then keeps its .txnindex entry, in the cleaned copy); once
  none is left it first gets a delete horizon (now + delete.retention.ms, as tombstones
  do) and a pass past the horizon drops it, so a consumer that read the transaction's data
  before the clean still gets its marker.
- An I/O throttle caps bytes read+written per second.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from broker.log.control import read_marker
from broker.log.segment import INT32_MAX
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import (
    HEADER,
    LONG_MAX,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
)

if TYPE_CHECKING:
    from broker.log.config import LogConfig
    from broker.log.log import PartitionLog
    from broker.log.segment import LogSegment

log = structlog.get_logger(__name__)

DEFAULT_MAX_MAP_KEYS = 2_000_000


@dataclass
class CleanStats:
    segments: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0


class Throttler:
    """Sleep so that the bytes reported per second stay under `rate`."""

    def __init__(
        self,
        rate: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.sleep = sleep
        self.monotonic = monotonic
        self.start = monotonic()
        self.total = 0

    def maybe_throttle(self, n: int) -> None:
        if self.rate == float("inf"):
            return
        self.total += n
        elapsed = self.monotonic() - self.start
        needed = self.total / self.rate
        if needed > elapsed:
            self.sleep(needed - elapsed)


def first_uncleanable_offset(plog: PartitionLog, now_ms: int) -> int:
    segs = plog.segments
    bound = min(segs[-1].base_offset, plog.high_watermark)
    first_open = plog.first_ongoing_txn_offset()
    if first_open is not None:
        bound = min(bound, first_open)
    lag = plog.config.min_compaction_lag_ms
    if lag > 0:
        for s in segs[:-1]:
            if s.max_timestamp > now_ms - lag:
                bound = min(bound, s.base_offset)
                break
    return bound


def dirty_ratio(plog: PartitionLog, first_dirty: int, first_uncleanable: int) -> tuple[float, int]:
    clean = dirty = 0
    for s in plog.segments:
        if s.base_offset >= first_uncleanable:
            break
        if s.next_offset <= first_dirty:
            clean += s.size
        else:
            dirty += s.size
    total = clean + dirty
    return (dirty / total if total else 0.0), dirty


def clean_log(
    plog: PartitionLog,
    now_ms: int,
    first_dirty: int,
    *,
    throttler: Throttler | None = None,
    max_map_keys: int = DEFAULT_MAX_MAP_KEYS,
) -> tuple[int, CleanStats] | None:
    """Compact `plog` once. Returns (new first dirty offset, stats), or None if the swap
    was abandoned because the log changed under it."""
    stats = CleanStats()
    generation = plog.truncation_generation
    end = first_uncleanable_offset(plog, now_ms)
    segs = [s for s in plog.segments if s.base_offset < end]
    if not segs:
        return first_dirty, stats
    # 1. Offset map: key -> latest offset in the dirty range; also each producer's last batch.
    offset_map: dict[bytes, int] = {}
    last_batch_of_producer: dict[int, int] = {}
    aborted = AbortedRanges(plog)
    map_end = end
    for s in plog.segments:
        for _, h in s.iter_headers(0):
            if h.producer_id >= 0 and not h.is_control:
                last_batch_of_producer[h.producer_id] = h.base_offset
    full = False
    for s in segs:
        if s.next_offset <= first_dirty or full:
            continue
        for pos, h in s.iter_headers(0):
            if (h.last_offset < first_dirty or h.base_offset >= end or h.is_control
                    or aborted.holds(h)):
                continue
            if len(offset_map) >= max_map_keys:
                map_end = h.base_offset
                full = True
                break
            for r in decode_records(s.read_batch(pos, h)):
                if r.key is not None and r.offset >= first_dirty:
                    offset_map[r.key] = r.offset
            if throttler is not None:
                throttler.maybe_throttle(h.size)
    if full:
        segs = [s for s in segs if s.base_offset < map_end]
        end = map_end
    # 2. Recopy the segments below `end`, small neighbours grouped into one.
    groups: list[tuple[list[LogSegment], LogSegment]] = []
    txns = TxnCleanState(plog)
    for group in group_segments(segs, plog.config):
        new = plog.new_cleaned_segment(group[0].base_offset)
        for i, s in enumerate(group):
            _recopy(
                s,
                new,
                offset_map,
                last_batch_of_producer,
                now_ms,
                plog.config.delete_retention_ms,
                stats,
                throttler,
                keep_last_batch=i == len(group) - 1,
                txns=txns,
            )
            stats.segments += 1
        groups.append((group, new))
    # 3. Swap in.
    if not plog.replace_segments(groups, generation):
        return None
    return max(first_dirty, end), stats


def group_segments(segs: list[LogSegment], config: LogConfig) -> list[list[LogSegment]]:
    """Consecutive segments whose cleaned copy fits one segment: total bytes within
    segment.bytes, index entries within segment.index.bytes, offsets within int32 of the
    first base (Kafka's groupSegmentsBySize)."""
    max_entries = max(1, config.segment_index_bytes // 12)
    groups: list[list[LogSegment]] = []
    for s in segs:
        if groups:
            g = groups[-1]
            size = sum(x.size for x in g) + s.size
            entries = size // max(config.index_interval_bytes, 1) + len(g) + 2
            if (
                size <= config.segment_bytes
                and entries <= max_entries
                and s.next_offset - 1 - g[0].base_offset <= INT32_MAX
            ):
                g.append(s)
                continue
        groups.append([s])
    return groups


def _recopy(
    src: LogSegment,
    dst: LogSegment,
    offset_map: dict[bytes, int],
    last_batch_of_producer: dict[int, int],
    now_ms: int,
    delete_retention_ms: int,
    stats: CleanStats,
    throttler: Throttler | None,
    *,
    keep_last_batch: bool = False,
    txns: TxnCleanState | None = None,
) -> None:
    """Copy what survives of `src` into `dst`. With `keep_last_batch` the segment's last
    batch is kept (empty if need be) so the copy ends at the same offset as the
    original: a crash mid-swap then lets recovery tell which originals the copy covers."""
    headers = list(src.iter_headers(0))
    for i, (pos, h) in enumerate(headers):
        raw = src.read_batch(pos, h)
        stats.bytes_read += len(raw)
        out: bytes | None
        if h.is_control:
            out = raw if txns is None else txns.recopy_marker(raw, h, dst, now_ms,
                                                              delete_retention_ms)
        elif txns is not None and txns.on_data(h):
            stats.records_read += h.records_count
            last_of_producer = last_batch_of_producer.get(h.producer_id) == h.base_offset
            out = _empty_batch(h) if last_of_producer else None
        else:
            out = _clean_batch(
                raw, h, offset_map, last_batch_of_producer, now_ms, delete_retention_ms, stats
            )
        if out is None and keep_last_batch and i == len(headers) - 1:
            out = _empty_batch(h)
        if out is None:
            continue
        nh = BatchHeader(*HEADER.unpack_from(out, 0))
        dst.append(out, [(0, len(out), nh.base_offset, nh.last_offset, nh.max_timestamp)])
        stats.bytes_written += len(out)
        if throttler is not None:
            throttler.maybe_throttle(len(raw) + len(out))


class AbortedRanges:
    """The aborted transactions of a log by producer: [first offset, marker offset)."""

    def __init__(self, plog: PartitionLog) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for e in plog.all_aborted_txns():
            self._by_producer.setdefault(e.producer_id, []).append(
                (e.first_offset, e.last_offset))

    def holds(self, h: BatchHeader) -> bool:
        """Whether `h` is a data batch of an aborted transaction."""
        if not h.is_transactional or h.is_control:
            return False
        ranges = self._by_producer.get(h.producer_id)
        return ranges is not None and any(
            first <= h.base_offset < last for first, last in ranges)


class TxnCleanState:
    """Kafka's CleanedTransactionMetadata: walks one cleaning pass in offset order (from
    the log start), telling aborted data from committed and which markers may go."""

    def __init__(self, plog: PartitionLog) -> None:
        self._pending = deque(sorted(plog.all_aborted_txns(), key=lambda e: e.first_offset))
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, batch seen)
        self._committed: set[int] = set()  # producers with a non-aborted batch seen

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            e = pending.popleft()
            self._aborted[e.producer_id] = (e, False)

    def on_data(self, h: BatchHeader) -> bool:
        """A data batch read: True when it belongs to an aborted transaction (discard)."""
        self._start_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        found = self._aborted.get(h.producer_id)
        if found is not None:
            self._aborted[h.producer_id] = (found[0], True)
            return True
        self._committed.add(h.producer_id)
        return False

    def recopy_marker(self, raw: bytes, h: BatchHeader, dst: LogSegment, now_ms: int,
                      delete_retention_ms: int) -> bytes | None:
        """What of control batch `h` goes into `dst` (None: nothing); an ABORT marker
        that stays indexes its transaction in `dst`'s .txnindex."""
        self._start_up_to(h.last_offset)
        marker = read_marker(raw, h)
        if marker is None:
            return raw  # not a transaction marker (nor ours to judge)
        pid = h.producer_id
        if marker.committed:
            needed = pid in self._committed
            self._committed.discard(pid)
        else:
            found = self._aborted.pop(pid, None)
            needed = found is not None and found[1]
            if needed and found is not None:
                dst.txn_index.append(found[0])
        if needed:
            return raw
        if not h.has_delete_horizon:
            return build_batch(
                decode_records(raw), base_offset=h.base_offset, timestamp_type=h.timestamp_type,
                producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                is_transactional=True, is_control=True, last_offset_delta=h.last_offset_delta,
                max_timestamp=h.max_timestamp, delete_horizon_ms=now_ms + delete_retention_ms,
            )
        return None if now_ms >= h.base_timestamp else raw


def _clean_batch(
    raw: bytes,
    h: BatchHeader,
    offset_map: dict[bytes, int],
    last_batch_of_producer: dict[int, int],
    now_ms: int,
    delete_retention_ms: int,
    stats: CleanStats,
) -> bytes | None:
    records = decode_records(raw)
    stats.records_read += len(records)
    horizon = h.base_timestamp if h.has_delete_horizon else None
    kept: list[Record] = []
    has_tombstone = False
    for r in records:
        if r.key is None:
            continue
        latest = offset_map.get(r.key)
        if latest is not None and r.offset < latest:
            continue
        if r.value is None:
            if horizon is not None and now_ms >= horizon:
                stats.tombstones_dropped += 1
                continue
            has_tombstone = True
        kept.append(r)
    stats.records_kept += len(kept)
    needs_horizon = has_tombstone and horizon is None
    if len(kept) == len(records) and not needs_horizon:
        return raw
    if not kept:
        if h.producer_id >= 0 and last_batch_of_producer.get(h.producer_id) == h.base_offset:
            return _empty_batch(h)
        return None
    new_horizon = (
        horizon
        if horizon is not None
        else (now_ms + delete_retention_ms if has_tombstone else None)
    )
    return build_batch(
        kept,
        base_offset=h.base_offset,
        compression=h.compression,
        timestamp_type=h.timestamp_type,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        is_transactional=h.is_transactional,
        last_offset_delta=h.last_offset_delta,
        max_timestamp=h.max_timestamp,
        delete_horizon_ms=new_horizon,
    )


def _empty_batch(h: BatchHeader) -> bytes:
    return build_batch(
        [],
        base_offset=h.base_offset,
        compression=h.compression,
        timestamp_type=h.timestamp_type,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        is_transactional=h.is_transactional,
        is_control=h.is_control,  # an emptied marker stays a control batch: no data
        last_offset_delta=h.last_offset_delta,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
    )


class CleanableLogs(Protocol):
    """What the cleaner reads and writes of its LogManager (broker/log/manager.py), which
    owns it and drives it from tick()."""

    cleaner_io_max_bytes_per_second: float
    cleaner_checkpoints: dict[tuple[str, int], int]

    def all_logs(self) -> list[PartitionLog]: ...

    def checkpoint_cleaner_offsets(self) -> None: ...


class LogCleaner:
    """Picks the dirtiest compacted log and cleans it; driven by LogManager.tick()."""

    def __init__(self, manager: CleanableLogs) -> None:
        # Weak: the manager owns the cleaner, and a cycle would keep every log's files
        # open until the cyclic garbage collector runs.
        self._manager = weakref.ref(manager)
        self._aborted: set[int] = set()
        self.last_stats: CleanStats | None = None

    @property
    def manager(self) -> CleanableLogs:
        m = self._manager()
        if m is None:
            raise RuntimeError("log manager is gone")
        return m

    def throttler(self) -> Throttler:
        return Throttler(self.manager.cleaner_io_max_bytes_per_second)

    def grab_filthiest(self, now_ms: int) -> tuple[PartitionLog, int] | None:
        best: tuple[float, PartitionLog, int] | None = None
        for plog in self.manager.all_logs():
            cfg = plog.config
            if not cfg.compact or plog.closed:
                continue
            key = (plog.topic_partition.topic, plog.topic_partition.partition)
            first_dirty = max(self.manager.cleaner_checkpoints.get(key, 0), plog.log_start_offset)
            end = first_uncleanable_offset(plog, now_ms)
            if first_dirty >= end:
                continue
            ratio, dirty = dirty_ratio(plog, first_dirty, end)
            if dirty == 0:
                continue
            forced = cfg.max_compaction_lag_ms < LONG_MAX and any(
                s.rolling_based_timestamp is not None
                and s.rolling_based_timestamp >= 0
                and now_ms - s.rolling_based_timestamp > cfg.max_compaction_lag_ms
                for s in plog.segments
                if s.next_offset > first_dirty and s.base_offset < end
            )
            if ratio < cfg.min_cleanable_dirty_ratio and not forced:
                continue
            score = 2.0 if forced else ratio
            if best is None or score > best[0]:
                best = (score, plog, first_dirty)
        return None if best is None else (best[1], best[2])

    def clean_once(self, now_ms: int) -> int:
        """Clean the filthiest log, if any is due. Returns segments cleaned."""
        picked = self.grab_filthiest(now_ms)
        if picked is None:
            return 0
        plog, first_dirty = picked
        self._aborted.discard(id(plog))
        try:
            result = clean_log(plog, now_ms, first_dirty, throttler=self.throttler())
        except Exception:
            log.exception("log cleaner failed", partition=plog.dir.name)
            return 0
        if result is None or id(plog) in self._aborted:
            return 0
        new_first_dirty, stats = result
        self.last_stats = stats
        tp = plog.topic_partition
        self.manager.cleaner_checkpoints[(tp.topic, tp.partition)] = new_first_dirty
        self.manager.checkpoint_cleaner_offsets()
        return stats.segments

    def abort(self, plog: PartitionLog) -> None:
        """A cleaning in progress on `plog` will not be swapped in (the log checks its
        segments at swap time; this also stops the checkpoint update)."""
        self._aborted.add(id(plog))
