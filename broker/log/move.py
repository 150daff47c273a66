"""A replica's move to another log dir of the same broker (AlterReplicaLogDirs, KIP-113).

As Kafka does, the replica gets a "future" copy in the destination dir, in a directory named
`<topic>-<partition>.<uuid>-future`, that catches up with the current log and then takes its
place. Here the copy is made of the log's own files: `FutureLog.copy_pass` (run off the event
loop) copies what changed since its last pass (a segment file that only grew, by its new
bytes; a file that was replaced, as the cleaner does, or that shrank, in full; the small
index and checkpoint files in full) and drops what the log deleted; passes repeat until one
has little left to copy. The last pass runs while nothing can write to the log (the caller
holds the event loop and the log's lock), right before `LogManager.swap_future` renames the
future directory into place and opens it as the partition's log. A move cut short by a
restart or a crash goes on afterwards, as in Kafka: LogManager keeps the future directory
it finds at load (emptied: the copy starts over), and the replica manager resumes the
passes once the partition is served again.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.files import fsync_dir

FUTURE_DIR_SUFFIX = "-future"
# what a copy pass leaves out: files on their way out, the cleaner's unfinished output
_SKIPPED_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
_CHUNK = 1 << 20
_REBUILT_INDEXES = ("index", "timeindex", "txnindex")


@dataclass
class FutureLog:
    topic: str
    partition: int
    log_dir: Path          # the destination log dir
    path: Path             # <log_dir>/<topic>-<partition>.<uuid>-future
    source: Path           # the current log's directory
    # file name -> (inode, size, mtime) as last copied
    copied: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # the current log's end offset when the last completed pass began: every record below
    # it is in the copy (DescribeLogDirs' offset lag of the future replica)
    copied_end_offset: int = 0
    current_end_offset: int = 0
    aborted: bool = False

    def size_in_bytes(self) -> int:
        return sum(v[1] for name, v in self.copied.items() if name.endswith(".log"))

    def offset_lag(self) -> int:
        return max(self.current_end_offset - self.copied_end_offset, 0)

    def copy_pass(self, end_offset: int) -> int:
        """Bring the copy up to the source's files as they are now; returns the segment
        bytes copied. `end_offset`: the source log's end offset before this pass began.

        A segment file that only grew (same inode) gets its new bytes; any other changed
        file (by inode, size or mtime) is copied whole. The indexes of the newest segment
        are left out: they change with every append, and the new log recovers its newest
        segment, which rebuilds them (older segments' indexes are final once rolled)."""
        copied = 0
        entries = [e for e in os.scandir(self.source)
                   if e.is_file(follow_symlinks=False) and not e.name.endswith(_SKIPPED_SUFFIXES)]
        bases = [e.name[:-4] for e in entries if e.name.endswith(".log")]
        newest = max(bases) if bases else None
        names = set()
        for entry in entries:
            name = entry.name
            stem, _, ext = name.partition(".")
            if stem == newest and ext in _REBUILT_INDEXES:
                continue
            names.add(name)
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted meanwhile
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            before = self.copied.get(name)
            if before == sig:
                continue
            try:
                if (ext == "log" and before is not None and before[0] == st.st_ino
                        and before[1] <= st.st_size):
                    n = _copy_range(entry.path, self.path / name, before[1], st.st_size)
                else:
                    n = _copy_range(entry.path, self.path / name, 0, st.st_size, truncate=True)
            except FileNotFoundError:
                continue
            if ext == "log":
                copied += n
            self.copied[name] = sig
        for name in set(self.copied) - names:
            (self.path / name).unlink(missing_ok=True)
            del self.copied[name]
        self.copied_end_offset = end_offset
        return copied

    def restart_logs(self) -> None:
        """The source was truncated since: copy every segment in full at the next pass."""
        self.copied = {n: v for n, v in self.copied.items() if not n.endswith(".log")}

    def sync(self) -> None:
        for name in self.copied:
            fd = os.open(self.path / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(self.path)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _copy_range(src: str, dst: Path, start: int, end: int, *, truncate: bool = False) -> int:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0)
    out = os.open(dst, flags, 0o644)
    try:
        with open(src, "rb") as f:
            f.seek(start)
            pos, left = start, end - start
            while left > 0:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    break
                os.pwrite(out, chunk, pos)
                pos += len(chunk)
                left -= len(chunk)
            if truncate or pos < end:
                os.ftruncate(out, pos)
            return pos - start
    finally:
        os.close(out)
