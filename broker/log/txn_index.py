"""The aborted-transaction index of one segment: `<base offset>.txnindex`, Kafka's format.

Each entry is 34 bytes, big-endian: version i16 (0), producer id i64, first offset i64,
last offset i64 (the abort marker's offset), last stable offset i64 (the LSO just after
the abort was written). An entry lives in the segment that holds its abort marker, so
entries of one file are in increasing last offset. Like Kafka the file is only created
by the first entry: a segment without aborted transactions has none.

A read_committed fetch from offset F with upper bound U needs every aborted transaction
that overlaps [F, U): `collect` walks a segment's entries (lastOffset >= F and
firstOffset < U); an entry whose last stable offset is >= U proves no later segment can
hold one that started before U, which ends the search (Kafka's TxnIndexSearchResult).

The entries are kept in memory (a few per aborted transaction); appends are written to the
file at once, fsynced by `flush`.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0
MAX_TXN_INDEX_BYTES = 64 << 20


class TxnIndexCorrupt(Exception):
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset,
                          self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Entries of a txn index file; a trailing partial entry (a torn write) is ignored,
    an unknown version raises TxnIndexCorrupt."""
    out: list[AbortedTxn] = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != CURRENT_VERSION:
            raise TxnIndexCorrupt(f"txn index entry version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._unflushed = False
        self.was_reset = False
        try:
            self._load()
        except (TxnIndexCorrupt, OSError):
            self.reset()
            self.was_reset = True

    def _load(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size > MAX_TXN_INDEX_BYTES:
            raise TxnIndexCorrupt(f"{self.path}: {size} bytes")
        data = self.path.read_bytes()
        entries = decode_entries(data)
        for e in entries:
            if e.last_offset < self.base_offset:
                raise TxnIndexCorrupt(
                    f"{self.path}: last offset {e.last_offset} below base {self.base_offset}")
        self.entries = entries
        if len(data) % ENTRY_SIZE:
            self._rewrite()

    @property
    def exists(self) -> bool:
        return self.path.exists()

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].last_offset if self.entries else None

    def append(self, entry: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and entry.last_offset <= last:
            raise ValueError(
                f"txn index {self.path.name}: last offset {entry.last_offset} does not "
                f"follow {last}")
        self.entries.append(entry)
        with self.path.open("ab") as f:
            f.write(entry.encode())
        self._unflushed = True

    def ensure(self, entry: AbortedTxn) -> bool:
        """Add `entry` unless one with its producer and last offset is there (rebuilds
        after a crash or of a missing file); True when added."""
        if not self.entries or entry.last_offset > self.entries[-1].last_offset:
            self.append(entry)
            return True
        if any(e.producer_id == entry.producer_id and e.last_offset == entry.last_offset
               for e in self.entries):
            return False
        last = self.last_offset
        if last is None or entry.last_offset > last:
            self.append(entry)
        else:
            self.entries.append(entry)
            self.entries.sort(key=lambda e: e.last_offset)
            self._rewrite()
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose abort marker is at or after `offset`."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def reset(self) -> None:
        """Forget every entry (the segment is being recovered and will be re-indexed)."""
        self.entries = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._unflushed = False

    def _rewrite(self) -> None:
        if not self.entries:
            self.reset()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(e.encode() for e in self.entries))
        os.replace(tmp, self.path)
        self._unflushed = True

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is
        complete (no later segment can add one)."""
        found: list[AbortedTxn] = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def dup_fd(self) -> int | None:
        """A descriptor to fsync when entries were written since the last flush."""
        if not self._unflushed:
            return None
        self._unflushed = False
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None

    def flush(self) -> None:
        fd = self.dup_fd()
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, new_path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def collect_aborted(indexes: Iterable[TransactionIndex], fetch_offset: int,
                    upper_bound: int) -> list[AbortedTxn]:
    """Kafka's collectAbortedTransactions over segments from the one holding fetch_offset."""
    out: list[AbortedTxn] = []
    for idx in indexes:
        found, complete = idx.collect(fetch_offset, upper_bound)
        out += found
        if complete:
            break
    return out


def format_entries(entries: Sequence[AbortedTxn]) -> list[str]:
    return [
        f"version: {CURRENT_VERSION} producerId: {e.producer_id} firstOffset: "
        f"{e.first_offset} lastOffset: {e.last_offset} lastStableOffset: "
        f"{e.last_stable_offset}"
        for e in entries
    ]
