"""Durable file writes: the old content or the new, never half of either."""

from __future__ import annotations

import os
import threading
from pathlib import Path

# One writer of a file at a time within the process: writers share the file's temporary name,
# so a second writer could truncate it under the first, and the first's rename then takes the
# second's file away (CI, 2026-12-03: a log dir's recovery-point checkpoint written by the
# background checkpoint thread and a resumed replica move at once; the rename that came second
# failed with ENOENT and took the log dir offline).
_path_locks: dict[str, threading.Lock] = {}
_path_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _path_locks_guard:
        lock = _path_locks.get(key)
        if lock is None:
            lock = _path_locks[key] = threading.Lock()
        return lock


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write via temp file + rename so readers see the old or the new content, never half;
    with `fsync` (the default) the file and then its directory are fsynced."""
    tmp = path.with_name(path.name + ".tmp")
    with _lock_for(path):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if fsync:
            fsync_dir(path.parent)
