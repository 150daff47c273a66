"""Sparse offset index (.index) and time index (.timeindex), Kafka's file formats.

.index entries: relative offset i32, file position i32 (8 bytes).
.timeindex entries: timestamp i64, relative offset i32 (12 bytes).

Entries are kept in memory (arrays, bisect for lookups) and written to a file pre-sized
to segment.index.bytes on flush, roll and close; the file is trimmed to the entries on
roll and close, as Kafka does. An index is only trusted after a clean shutdown and a sanity check;
otherwise it is rebuilt from the log.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from array import array
from pathlib import Path
from typing import Final

from broker.log.files import pwrite_all

_OFF: Final = struct.Struct(">ii")
_TIME: Final = struct.Struct(">qi")


class IndexCorrupt(Exception):
    pass


class _IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._written = 0  # entries already in the file
        self._presized = False
        # Released (inactive segment): the descriptor is opened per operation, so a log
        # with many segments holds one descriptor per segment, not three. An empty index
        # (a new partition's) starts released too, so a broker given 30,000 new partitions
        # holds no descriptors for them (issue 17); its writes (flush, roll) open it.
        self._released = False
        if os.fstat(self._fd).st_size == 0:
            self._released = True
            self._done()
        self._dead = False  # closed for good (log closed, file deleted or renamed away)

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def __len__(self) -> int:
        raise NotImplementedError

    def _pack(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def _open(self) -> int:
        if self._fd < 0:
            if self._dead:
                raise ValueError(f"{self.path} is closed")
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _done(self) -> None:
        if self._released and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def release(self) -> None:
        """Close the descriptor until the next operation (the segment went inactive)."""
        self._released = True
        self._done()

    def _read_file(self) -> bytes:
        fd = self._open()
        try:
            size = os.fstat(fd).st_size
            out = os.pread(fd, size, 0) if size else b""
        finally:
            self._done()
        return out[: len(out) - len(out) % self.entry_size]

    def write_pending(self) -> None:
        """Write the entries added since the last call. Appends never touch the file:
        entries reach it on flush, roll and close (a crash rebuilds what was not
        flushed), so the append path pays no syscall or page fault per index entry."""
        n = len(self)
        if self._written < n:
            fd = self._open()
            try:
                if not self._presized:
                    # Pre-sized (sparse) to the maximum like Kafka's active-segment indexes.
                    os.ftruncate(fd, self.max_entries * self.entry_size)
                    self._presized = True
                pwrite_all(fd, self._pack(self._written, n), self._written * self.entry_size)
                self._written = n
            finally:
                self._done()

    def _entries_truncated(self, n: int) -> None:
        if self._written > n:
            self._written = n
            if not self._presized:
                try:
                    os.ftruncate(self._open(), n * self.entry_size)
                finally:
                    self._done()
            # A pre-sized file keeps dead bytes past the entries until trim().

    def trim(self) -> None:
        """Write pending entries and shrink the file to them (on roll and close)."""
        self.write_pending()
        try:
            os.ftruncate(self._open(), len(self) * self.entry_size)
        finally:
            self._done()
        self._presized = False

    def dup_fd(self) -> int:
        try:
            return os.dup(self._open())
        finally:
            self._done()

    def flush(self) -> None:
        self.write_pending()
        try:
            os.fdatasync(self._open())
        finally:
            self._done()

    def close(self) -> None:
        if not self._dead:
            self.trim()
            self.close_without_trim()

    def close_without_trim(self) -> None:
        self._dead = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def __del__(self) -> None:
        # A log dropped without close() (a crashed owner, a test) must not leak the fd.
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def delete_file(self) -> None:
        self.close_without_trim()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class OffsetIndex(_IndexFile):
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self.rel_offsets = array("q")
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.rel_offsets)

    def load(self, log_size: int) -> None:
        """Read entries from the file; raise IndexCorrupt if they are not sane."""
        data = self._read_file()
        rel = array("q")
        pos = array("q")
        for r, p in _OFF.iter_unpack(data):
            if (rel and (r <= rel[-1] or p < pos[-1])) or r < 0 or p < 0 or p >= log_size:
                raise IndexCorrupt(f"{self.path}: entry ({r}, {p}) out of order or past log")
            rel.append(r)
            pos.append(p)
        if len(rel) > self.max_entries:
            raise IndexCorrupt(f"{self.path}: {len(rel)} entries exceed the maximum")
        self.rel_offsets, self.positions = rel, pos
        self._written = len(rel)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel_offsets and rel <= self.rel_offsets[-1]:
            return
        self.rel_offsets.append(rel)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= offset, or (base, 0)."""
        i = bisect.bisect_right(self.rel_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[i], self.positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        i = bisect.bisect_left(self.rel_offsets, offset - self.base_offset)
        self._truncate_entries(i)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position`."""
        i = bisect.bisect_left(self.positions, position)
        self._truncate_entries(i)

    def _truncate_entries(self, n: int) -> None:
        if n < len(self.rel_offsets):
            del self.rel_offsets[n:]
            del self.positions[n:]
            self._entries_truncated(n)

    def reset(self) -> None:
        self._truncate_entries(0)

    def _pack(self, start: int, end: int) -> bytes:
        pairs = zip(self.rel_offsets[start:end], self.positions[start:end], strict=True)
        return b"".join(_OFF.pack(r, p) for r, p in pairs)

    def entries(self) -> list[tuple[int, int]]:
        return [
            (self.base_offset + r, p) for r, p in zip(self.rel_offsets, self.positions, strict=True)
        ]


class TimeIndex(_IndexFile):
    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self.timestamps = array("q")
        self.rel_offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    def load(self, next_offset: int) -> None:
        data = self._read_file()
        ts = array("q")
        rel = array("q")
        limit = next_offset - self.base_offset
        for t, r in _TIME.iter_unpack(data):
            if (ts and (t <= ts[-1] or r < rel[-1])) or r < 0 or r >= max(limit, 1):
                raise IndexCorrupt(f"{self.path}: entry ({t}, {r}) out of order or past log")
            ts.append(t)
            rel.append(r)
        if len(ts) > self.max_entries:
            raise IndexCorrupt(f"{self.path}: {len(ts)} entries exceed the maximum")
        self.timestamps, self.rel_offsets = ts, rel
        self._written = len(ts)

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset)."""
        if not self.timestamps:
            return -1, self.base_offset
        return self.timestamps[-1], self.base_offset + self.rel_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's. A
        full index takes no more entries (the log rolls first; a segment's exact max
        timestamp is also re-derived from its tail on load)."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if self.is_full:
            return
        self.timestamps.append(timestamp)
        self.rel_offsets.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the largest entry with timestamp <= `timestamp`, or the base offset."""
        i = bisect.bisect_right(self.timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.rel_offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= `offset`."""
        rel = offset - self.base_offset
        n = len(self.rel_offsets)
        while n > 0 and self.rel_offsets[n - 1] >= rel:
            n -= 1
        if n < len(self.timestamps):
            del self.timestamps[n:]
            del self.rel_offsets[n:]
            self._entries_truncated(n)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

    def _pack(self, start: int, end: int) -> bytes:
        pairs = zip(self.timestamps[start:end], self.rel_offsets[start:end], strict=True)
        return b"".join(_TIME.pack(t, r) for t, r in pairs)

    def entries(self) -> list[tuple[int, int]]:
        return [
            (t, self.base_offset + r)
            for t, r in zip(self.timestamps, self.rel_offsets, strict=True)
        ]
