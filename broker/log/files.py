"""Small file helpers: segment file names, page-cache hints; atomic writes and directory fsync
live in broker/util/files.py (raft's stores use them too)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import io
import os
import sys

from broker.util.files import atomic_write as atomic_write
from broker.util.files import fsync_dir as fsync_dir

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


_FALLOC_FL_KEEP_SIZE = 1


def _load_fallocate() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()


def reserve_space(fd: int, offset: int, length: int) -> bool:
    """Allocate disk blocks for [offset, offset+length) without changing the file size
    (Linux fallocate with FALLOC_FL_KEEP_SIZE; Python has no binding for the flag).

    Writes into reserved blocks skip the filesystem's per-page block reservation (ext4
    delayed allocation), which is a third of the cost of a page-cache append here. The
    size stays the data's, so readers, recovery and Kafka's tools see nothing different;
    `ftruncate(fd, size)` gives unused blocks back. False when the platform or the
    filesystem cannot do it."""
    if _fallocate is None or length <= 0:
        return False
    return int(_fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length)) == 0


class SegmentFile(io.FileIO):
    """A segment's log file. Readers may hold it after the segment is deleted (POSIX keeps
    an unlinked file readable through an open descriptor), so it is closed when the last
    holder drops it rather than by the segment, and without a ResourceWarning."""

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view = view[n:]
        position += n


IOV_MAX = 1024


def pwritev_all(
    fd: int, buffers: list[bytes | bytearray | memoryview], position: int, total: int = -1
) -> None:
    """Write the buffers back to back at `position` (gathered, no joining copy)."""
    if total >= 0 and len(buffers) <= IOV_MAX and os.pwritev(fd, buffers, position) == total:
        return  # the common case: one call wrote everything
    if total >= 0:
        # Rare: many buffers or a short write. Redo the whole range piece by piece.
        for b in buffers:
            pwrite_all(fd, b, position)
            position += len(b)
        return
    i = 0
    while i < len(buffers):
        chunk = buffers[i : i + IOV_MAX]
        want = sum(len(b) for b in chunk)
        n = os.pwritev(fd, chunk, position)
        if n < want:
            # Short write (rare): finish this chunk piece by piece.
            for b in chunk:
                view = memoryview(b)
                if n >= len(view):
                    n -= len(view)
                    position += len(view)
                    continue
                pwrite_all(fd, view[n:], position + n)
                position += len(view)
                n = 0
        else:
            position += n
        i += IOV_MAX


def pread_exact(fd: int, length: int, position: int) -> bytes:
    """Read up to `length` bytes at `position`; shorter only at end of file."""
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, position)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
        position += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
