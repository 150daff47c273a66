"""One log segment: `<base>.log` with its `.index`, `.timeindex` and (once a transaction
whose abort marker it holds was aborted) `.txnindex`.

A segment is appended to by one writer (the owning PartitionLog holds its lock) and read
by any number of readers without locks: data is written before `size` moves, and readers
bound themselves by the `size` they saw.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from crc32c import crc32c as _crc32c_function

from broker.log import files
from broker.log.drop_behind import DROPPER, next_drop
from broker.log.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    SegmentFile,
    pread_exact,
    reserve_space,
    segment_name,
)
from broker.log.index import IndexCorrupt, OffsetIndex, TimeIndex
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from broker.protocol.records import (
    _LEN_AND_MAGIC,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_BATCH_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Record,
    decode_records,
)

# Final, so that the compiled append keeps them in C statics (see broker/protocol/records.py)
crc32c: Final = _crc32c_function
IOV_MAX: Final = files.IOV_MAX
pwrite_all: Final = files.pwrite_all
pwritev_all: Final = files.pwritev_all
INT32_MAX: Final = (1 << 31) - 1
# baseOffset, batchLength, then lastOffsetDelta at byte 23.
_BASE_LEN_DELTA: Final = struct.Struct(">qi11xi")
_RECENT_BATCHES: Final = 256  # at least this many newest batches are remembered by `locate`
_SCAN_CHUNK: Final = 4096 + 64  # about one index interval of small batches
_RECOVER_CHUNK: Final = 8 * 1024 * 1024
# Space reserved ahead of the write position (preallocate): as much as the segment
# already holds, so a quiet partition reserves little, up to this step.
_MAX_RESERVE_STEP: Final = 16 * 1024 * 1024
_BLOCK: Final = 4096
_LEFTOVER_SLACK: Final = 64 * 1024


@dataclass
class FileSlice:
    """Bytes [position, position+length) of `file`, for os.sendfile or read_bytes().

    `file` keeps the segment's data readable even if the segment is deleted or replaced
    meanwhile: the descriptor is only closed once every holder has dropped it.
    """

    file: BinaryIO | None
    position: int
    length: int

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(self, file: BinaryIO | None, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def read_bytes(self) -> bytes:
        if self.file is None or self.length <= 0:
            return b""
        return pread_exact(self.file.fileno(), self.length, self.position)

    def fileno(self) -> int:
        if self.file is None:
            raise ValueError("empty slice has no file")
        return self.file.fileno()

    def __len__(self) -> int:
        return self.length


EMPTY_SLICE: Final = FileSlice(None, 0, 0)


# What a segment needs to know about each batch it is given to append, as a plain tuple
# (built per batch on the hot path): (position within the appended data, size, base
# offset, last offset, max timestamp).
BatchEntry = tuple[int, int, int, int, int]


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        suffix: str = "",
        preallocate: bool = False,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}{LOG_SUFFIX}{suffix}"
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(fd).st_size
        # An empty segment holds no descriptor until it is first used (`file`, `fd`): a
        # broker given 30,000 new partitions would otherwise hold 30,000 descriptors for
        # files nobody has written yet, past a common RLIMIT_NOFILE (issue 17).
        self._file: SegmentFile | None = None
        self._fd = -1  # the descriptor of _file, read on every append
        if self.size:
            self._file = SegmentFile(fd, "r+")
            self._fd = fd
        else:
            os.close(fd)
        self.preallocate = preallocate
        self.reserved_end = self.size
        self.offset_index = OffsetIndex(
            directory / f"{name}{INDEX_SUFFIX}{suffix}", base_offset, max_index_size
        )
        self.time_index = TimeIndex(
            directory / f"{name}{TIME_INDEX_SUFFIX}{suffix}", base_offset, max_index_size
        )
        self.txn_index_path = directory / f"{name}{TXN_INDEX_SUFFIX}{suffix}"
        self.txn_index = TransactionIndex(self.txn_index_path, base_offset)
        # A corrupt file was dropped: the producer-state scan re-indexes it (PartitionLog).
        self.txn_index_reset = self.txn_index.was_reset
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.created_ms = created_ms
        self.rolling_based_timestamp: int | None = None
        self.deleted = False
        self.unflushed = False
        self.indexes_unflushed = False
        self.cache_dropped_to = 0  # see drop_cached_behind
        # The batches appended most recently, oldest first: tailing fetches (followers,
        # caught-up consumers) read them back and find them here without index lookups or
        # header reads. Every batch whose last offset is >= _recent_floor is listed.
        self._recent_lasts: list[int] = []
        self._recent_spans: list[tuple[int, int]] = []  # (position, size)
        self._recent_floor = 0

    @property
    def file(self) -> SegmentFile:
        """The log file, opened on first use (the file exists: created by __init__)."""
        if self._file is None:
            self._file = SegmentFile(os.open(self.log_path, os.O_RDWR), "r+")
            self._fd = self._file.fileno()
        return self._file

    @property
    def fd(self) -> int:
        fd = self._fd
        return fd if fd >= 0 else self.file.fileno()

    @property
    def holds_descriptor(self) -> bool:
        return self._file is not None

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next={self.next_offset})"

    # ------------------------------------------------------------------ loading

    def load_clean(self) -> None:
        """Trust the indexes after a sanity check (rebuild if it fails), read the tail."""
        try:
            self.offset_index.load(max(self.size, 1))
            self._reload_tail()
            self.time_index.load(self.next_offset)
            self._reload_tail()
        except IndexCorrupt:
            self.recover()

    def _reload_tail(self) -> None:
        """Derive next offset, max timestamp and index bookkeeping from the last index
        entries and the batches after the last offset-index entry."""
        ts, ts_off = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_off
        start = self.offset_index.positions[-1] if self.offset_index.positions else 0
        self.next_offset = self.base_offset
        end = start
        for pos, h in self.iter_headers(start):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            self.next_offset = h.next_offset
            end = pos + h.size
        if end != self.size:
            raise IndexCorrupt(f"{self.log_path}: batches after the last index entry end at {end}")
        self.bytes_since_last_index_entry = self.size - start
        if self.size > 0 and self.rolling_based_timestamp is None:
            hdr = self.header_at(0)
            self.rolling_based_timestamp = hdr.max_timestamp if hdr else None

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Rebuild indexes from the log, truncating at the first invalid byte.

        Returns the number of bytes truncated. A batch is valid when its lengths fit,
        its magic is 2, its CRC matches and its offsets follow the previous batch's.
        """
        self.offset_index.reset()
        self.time_index.reset()
        # Aborted transactions are re-indexed by the producer-state scan that follows a
        # recovery (it knows where each transaction began).
        self.txn_index.reset()
        self.txn_index_reset = True
        self._forget_recent()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        self.rolling_based_timestamp = None
        file_size = os.fstat(self.fd).st_size
        pos = 0
        valid = 0
        interval = self.index_interval_bytes
        while pos < file_size:
            buf = pread_exact(self.fd, min(_RECOVER_CHUNK, file_size - pos), pos)
            mv = memoryview(buf)
            p = 0
            stop = False
            while True:
                if len(mv) - p < HEADER_SIZE:
                    if pos + p + HEADER_SIZE > file_size:
                        stop = True
                    break
                _, length, _, magic = _LEN_AND_MAGIC.unpack_from(mv, p)
                if length < MIN_BATCH_LENGTH or length > MAX_BATCH_SIZE or magic != 2:
                    stop = True
                    break
                size = length + LOG_OVERHEAD
                if p + size > len(mv):
                    if pos + p + size > file_size:
                        stop = True
                    elif p == 0:
                        # One batch larger than the chunk: read it whole.
                        mv = memoryview(pread_exact(self.fd, size, pos))
                        continue
                    break
                h = BatchHeader(*HEADER.unpack_from(mv, p))
                if (
                    crc32c(mv[p + CRC_START : p + size]) != h.crc
                    or h.last_offset_delta < 0
                    or h.base_offset < self.next_offset
                    or h.last_offset - self.base_offset > INT32_MAX
                ):
                    stop = True
                    break
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp = h.max_timestamp
                    self.offset_of_max_timestamp = h.last_offset
                if self.bytes_since_last_index_entry > interval:
                    self.offset_index.append(h.last_offset, pos + p)
                    self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                    self.bytes_since_last_index_entry = 0
                self.bytes_since_last_index_entry += size
                if self.rolling_based_timestamp is None:
                    self.rolling_based_timestamp = h.max_timestamp
                self.next_offset = h.next_offset
                if on_batch is not None:
                    on_batch(h)
                p += size
            pos += p
            valid = pos
            if stop or p == 0:
                break
        truncated = file_size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
            self.reserved_end = valid
        self.size = valid
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        return truncated

    # ------------------------------------------------------------------ appends

    def append(
        self,
        data: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
        batches: list[BatchEntry],
        size: int | None = None,
    ) -> None:
        """Write `data` (one buffer, or buffers gathered with pwritev totalling `size`) at
        the end and index its batches. `size` only moves after the bytes are written."""
        physical = self.size
        if size is None:
            assert not isinstance(data, list)
            size = len(data)
        if self.preallocate and physical + size > self.reserved_end:
            self._reserve(physical + size)
        # The `fd` property and pwritev_all's one-call case, made here. Sparing these two
        # calls and two in PartitionLog._maybe_roll saves 0.3 us of a 16 KiB append's
        # 5.4 us of Python (bench/append_cpu.py), so keep them in step with their twins.
        fd = self._fd
        if fd < 0:
            fd = self.file.fileno()
        if isinstance(data, list):
            if len(data) > IOV_MAX or os.pwritev(fd, data, physical) != size:
                pwritev_all(fd, data, physical, size)
        else:
            pwrite_all(fd, data, physical)
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        max_ts = self.max_timestamp
        lasts = self._recent_lasts
        spans = self._recent_spans
        if not lasts:
            self._recent_floor = self.next_offset
        for position, bsize, _, last, bmax in batches:
            lasts.append(last)
            spans.append((physical + position, bsize))
            if bmax > max_ts:
                max_ts = bmax
                self.offset_of_max_timestamp = last
            if since > interval:
                self.offset_index.append(last, physical + position)
                self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp)
                since = 0
            since += bsize
        self.max_timestamp = max_ts
        self.bytes_since_last_index_entry = since
        if len(lasts) > 2 * _RECENT_BATCHES:
            self._recent_floor = lasts[-_RECENT_BATCHES - 1] + 1
            del lasts[:-_RECENT_BATCHES], spans[:-_RECENT_BATCHES]
        if self.rolling_based_timestamp is None and batches:
            self.rolling_based_timestamp = batches[0][4]
        self.next_offset = batches[-1][3] + 1
        self.unflushed = True
        self.indexes_unflushed = True
        self.size = physical + size

    def drop_cached_behind(self, window_bytes: int) -> None:
        """Have the kernel write back and forget this segment's pages older than its newest
        `window_bytes` (broker/log/drop_behind.py), once the window has moved a step."""
        drop = next_drop(self.size, self.cache_dropped_to, window_bytes)
        if drop is not None:
            DROPPER.submit(self.file, *drop)
            self.cache_dropped_to = drop[1]

    def _reserve(self, end: int) -> None:
        step = min(_MAX_RESERVE_STEP, max(end, _BLOCK))
        target = -(-(end + step) // _BLOCK) * _BLOCK
        start = max(self.reserved_end, self.size)
        if reserve_space(self.fd, start, target - start):
            self.reserved_end = target
        else:
            self.preallocate = False  # not supported here (or no space: the write says)

    def release_reserved(self) -> None:
        """Give back blocks reserved past the data (roll, close)."""
        if self.reserved_end > self.size:
            os.ftruncate(self.fd, self.size)
            self.reserved_end = self.size

    def release_leftover_reserve(self) -> None:
        """After a crash: give back a reserve the previous run left past the data. Only a
        clear excess counts (the last block's slack and extent blocks do not), so files
        without one keep their mtime."""
        st = os.fstat(self.fd)
        rounded = -(-self.size // _BLOCK) * _BLOCK
        if st.st_blocks * 512 > rounded + _LEFTOVER_SLACK:
            os.ftruncate(self.fd, self.size)

    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def can_hold(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= INT32_MAX

    def on_become_inactive(self) -> None:
        """Roll: record the final max timestamp and trim the pre-sized indexes."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim()
        self.time_index.trim()
        self.release_index_fds()
        self.release_reserved()

    def release_index_fds(self) -> None:
        """Inactive segments keep only their log file open."""
        self.offset_index.release()
        self.time_index.release()

    # ------------------------------------------------------------------ reads

    def iter_headers(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches from `start` up to `end` (default: size).

        Stops quietly at anything that does not parse: reads only serve what the
        append path or recovery already validated.
        """
        limit = self.size if end is None else end
        if start + HEADER_SIZE > limit:
            return  # nothing to read (an empty segment keeps no descriptor)
        fd = self.fd
        pos = start
        while pos + HEADER_SIZE <= limit:
            buf = os.pread(fd, min(_SCAN_CHUNK, limit - pos), pos)
            p = 0
            n = len(buf)
            if n < HEADER_SIZE:
                return
            while p + HEADER_SIZE <= n:
                h = BatchHeader(*HEADER.unpack_from(buf, p))
                if h.batch_length < MIN_BATCH_LENGTH or pos + p + h.size > limit:
                    return
                yield pos + p, h
                p += h.size
            pos += p

    def header_at(self, position: int) -> BatchHeader | None:
        if position + HEADER_SIZE > self.size:
            return None
        return BatchHeader(*HEADER.unpack_from(os.pread(self.fd, HEADER_SIZE, position)))

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= `offset`.

        The fetch hot path: index lookup, then header-only reads from there, building
        one header object for the batch found."""
        _, pos = self.offset_index.lookup(offset)
        if pos < start_position:
            pos = start_position
        limit = self.size
        if pos + HEADER_SIZE > limit:
            return None
        fd = self.fd
        unpack = _BASE_LEN_DELTA.unpack_from
        while pos + HEADER_SIZE <= limit:
            buf = os.pread(fd, min(_SCAN_CHUNK, limit - pos), pos)
            n = len(buf)
            p = 0
            while p + HEADER_SIZE <= n:
                base, length, delta = unpack(buf, p)
                size = length + LOG_OVERHEAD
                if length < MIN_BATCH_LENGTH or pos + p + size > limit:
                    return None
                if base + delta >= offset:
                    return pos + p, BatchHeader(*HEADER.unpack_from(buf, p))
                p += size
            if p == 0:
                return None
            pos += p
        return None

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset >= `offset`."""
        lasts = self._recent_lasts
        if lasts and offset >= self._recent_floor:
            i = bisect.bisect_left(lasts, offset)
            return self._recent_spans[i] if i < len(lasts) else None
        found = self.translate_offset(offset)
        return None if found is None else (found[0], found[1].size)

    def read(
        self, offset: int, max_size: int, max_position: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Slice from the batch holding `offset`; None if no batch at or after it here."""
        limit = min(max_position, self.size)
        found = self.locate(offset)
        if found is None:
            return None
        pos, batch_size = found
        if pos >= limit:
            return EMPTY_SLICE
        size = max(max_size, batch_size) if min_one_batch else max_size
        length = min(limit - pos, size)
        if length <= 0:
            return EMPTY_SLICE
        return FileSlice(self.file, pos, length)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return pread_exact(self.fd, header.size, position)

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int
    ) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= target."""
        from_offset = max(self.time_index.lookup(timestamp), start_offset)
        _, pos = self.offset_index.lookup(from_offset)
        for p, h in self.iter_headers(pos):
            if h.last_offset < start_offset or h.max_timestamp < timestamp:
                continue
            for r in self._records(p, h):
                if r.timestamp >= timestamp and r.offset >= start_offset:
                    return r.offset, r.timestamp, h.partition_leader_epoch
        return None

    def _records(self, position: int, header: BatchHeader) -> list[Record]:
        if header.is_control:
            return []
        return decode_records(self.read_batch(position, header))

    def _forget_recent(self) -> None:
        self._recent_lasts.clear()
        self._recent_spans.clear()

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int | None:
        """Remove batches whose last offset >= `offset`; return the first removed batch's
        base offset (None if nothing was removed)."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, h = found
        self.size = pos
        self.cache_dropped_to = min(self.cache_dropped_to, pos)
        self._forget_recent()
        os.ftruncate(self.fd, pos)
        self.reserved_end = pos
        self.offset_index.truncate_to_position(pos)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        if pos == 0:
            self.rolling_based_timestamp = None
        try:
            self._reload_tail()
        except IndexCorrupt:
            self.recover()
        return h.base_offset

    # ------------------------------------------------------------------ lifecycle

    def flush(self, *, indexes: bool = True) -> None:
        """Make the data durable. Indexes are only needed durable for segments that a
        restart will not rebuild (below the recovery point); the active segment's are
        always rebuilt after a crash, so fsync-per-append skips them."""
        if self.unflushed:
            os.fdatasync(self.fd)
            self.unflushed = False
            self.indexes_unflushed = True
        if indexes and self.indexes_unflushed:
            self.offset_index.flush()
            self.time_index.flush()
            self.indexes_unflushed = False
        if indexes:
            self.txn_index.flush()

    def prepare_flush(self) -> list[int]:
        """Write pending index entries and return duplicated descriptors of the files to
        fsync (the caller fsyncs and closes them, outside the log lock)."""
        fds: list[int] = []
        if self.unflushed:
            fds.append(os.dup(self.fd))
            self.unflushed = False
            self.indexes_unflushed = True
        if self.indexes_unflushed and not self.deleted:
            for idx in (self.offset_index, self.time_index):
                idx.write_pending()
                fds.append(idx.dup_fd())
            self.indexes_unflushed = False
        if not self.deleted and (fd := self.txn_index.dup_fd()) is not None:
            fds.append(fd)
        return fds

    def close(self) -> None:
        self.release_reserved()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.flush()
        # The log file is not closed here: slices handed out may still read it. It is
        # closed when the last reference goes (SegmentFile.__del__).

    def change_suffix(self, old: str, new: str) -> None:
        """Rename all three files from suffix `old` to `new` (cleaner swap); the open
        descriptors follow the files."""
        for attr in ("offset_index", "time_index"):
            idx = getattr(self, attr)
            name = idx.path.name
            base = name[: len(name) - len(old)] if old else name
            idx.rename(idx.path.with_name(base + new))
        name = self.txn_index.path.name
        base = name[: len(name) - len(old)] if old else name
        self.txn_index.rename(self.txn_index.path.with_name(base + new))
        name = self.log_path.name
        base = name[: len(name) - len(old)] if old else name
        target = self.log_path.with_name(base + new)
        os.replace(self.log_path, target)
        self.log_path = target

    def rename_to_deleted(self) -> None:
        """First step of asynchronous deletion: `.deleted` suffix, index fds closed.

        The log file stays open for readers that already hold a slice of it."""
        self.deleted = True
        new = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, new)
        self.log_path = new
        for idx in (self.offset_index, self.time_index):
            idx.close_without_trim()
            with contextlib.suppress(FileNotFoundError):
                idx.rename(idx.path.with_name(idx.path.name + DELETED_SUFFIX))
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name
                                                            + DELETED_SUFFIX))

    def delete_files(self) -> None:
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
