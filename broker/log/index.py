"""Sparse offset index (.index) and time index (.timeindex), Kafka's file formats.

.index entries: relative offset i32, file position i32 (8 bytes).
.timeindex entries: timestamp i64, relative offset i32 (12 bytes).

Entries are kept in memory (arrays, bisect for lookups) and stored through an mmap of a
file pre-sized to segment.index.bytes, which is trimmed to the entries on roll or close,
as Kafka does. An index is only trusted after a clean shutdown and a sanity check;
otherwise it is rebuilt from the log.
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import struct
from array import array
from pathlib import Path

_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


class IndexCorrupt(Exception):
    pass


class _IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        # Mapped (pre-sized to the maximum, like Kafka's) while entries are being added.
        self._mm: mmap.mmap | None = None

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def __len__(self) -> int:
        raise NotImplementedError

    def _map(self) -> mmap.mmap:
        if self._mm is None:
            size = self.max_entries * self.entry_size
            os.ftruncate(self._fd, size)
            self._mm = mmap.mmap(self._fd, size)
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _read_file(self) -> bytes:
        size = os.fstat(self._fd).st_size
        out = os.pread(self._fd, size, 0) if size else b""
        return out[: len(out) - len(out) % self.entry_size]

    def _shrink_file(self, n: int) -> None:
        if self._mm is None:
            os.ftruncate(self._fd, n * self.entry_size)
        # While mapped the tail past the entries is dead space, trimmed on roll/close.

    def trim(self) -> None:
        """Shrink the file to its entries (on roll and close)."""
        self._unmap()
        os.ftruncate(self._fd, len(self) * self.entry_size)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def close_without_trim(self) -> None:
        self._unmap()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

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

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel_offsets and rel <= self.rel_offsets[-1]:
            return
        _OFF.pack_into(self._mm or self._map(), len(self.rel_offsets) * 8, rel, position)
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
            self._shrink_file(n)

    def reset(self) -> None:
        self._truncate_entries(0)

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

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset)."""
        if not self.timestamps:
            return -1, self.base_offset
        return self.timestamps[-1], self.base_offset + self.rel_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if self.is_full:
            # Kafka rolls before the time index fills; the final entry of a full index is
            # dropped rather than written past the mapped size.
            del skip_full_check
            return
        _TIME.pack_into(
            self._mm or self._map(), len(self.timestamps) * 12, timestamp, offset - self.base_offset
        )
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
            self._shrink_file(n)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

    def entries(self) -> list[tuple[int, int]]:
        return [
            (t, self.base_offset + r)
            for t, r in zip(self.timestamps, self.rel_offsets, strict=True)
        ]
