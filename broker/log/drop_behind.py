"""Drop-behind: a partition's older writes leave the OS page cache.

Left to the kernel, every byte a broker appends stays cached until memory runs short, so
a busy broker's page cache grows by everything it writes: as leader and, three times
over at RF=3, as followers, whose logs nobody reads until they lead. Each page the cache
grows by is one the kernel must first find. On a VM whose free memory goes back to the
host (virtio-balloon free page reporting) a write into a never-touched page cost five
times a write into a recycled one here (docs/benchmarks.md); in a container the cache is
charged to the pod, and at its limit the writer itself reclaims.

So each segment keeps its newest `drop.behind.bytes` (topic config; broker default
`log.drop.behind.bytes`, 64 MiB) cached and asks the kernel, a step at a time, to write
back and forget what lies further back (posix_fadvise DONTNEED starts writeback of the
dirty pages and drops the clean ones). Each request reaches one step further back than
the last, so the pages that were still dirty last time, written back since, go too. The
requests run on one worker thread: starting writeback is filesystem work that would
stall the event loop for a millisecond or two per step.

Consumers near the end of the log still read from the cache; one further behind than the
window reads from the disk, as it would from Kafka once the kernel evicted those pages.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from typing import BinaryIO

# How far the end of the cached window must move before another request is made.
DROP_STEP_BYTES = 4 * 1024 * 1024

_Request = tuple[BinaryIO, int, int]


class _Dropper:
    """One daemon thread per process serving drop requests in order."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Request | threading.Event] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, file: BinaryIO, start: int, end: int) -> None:
        # The request holds `file`, so its descriptor stays open (segment files close
        # when their last holder lets go) even if the segment is deleted meanwhile.
        self._queue.put((file, start, end))
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="drop-behind", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            file, start, end = item
            with contextlib.suppress(OSError, ValueError):
                os.posix_fadvise(file.fileno(), start, end - start, os.POSIX_FADV_DONTNEED)
            del file, item

    def join(self, timeout_s: float = 30.0) -> bool:
        """Until every request submitted so far has been made (tests); False if that took
        longer than `timeout_s`."""
        if self._thread is None:
            return True
        reached = threading.Event()
        self._queue.put(reached)
        return reached.wait(timeout_s)


DROPPER = _Dropper()


def next_drop(size: int, dropped_to: int, window_bytes: int) -> tuple[int, int] | None:
    """The range [start, end) to ask the kernel to drop from a segment of `size` bytes
    whose cache was last dropped up to `dropped_to`, keeping its newest `window_bytes`;
    None until the window's end has moved a whole step."""
    end = size - window_bytes
    if window_bytes < 0 or end - dropped_to < DROP_STEP_BYTES:
        return None
    return max(0, dropped_to - DROP_STEP_BYTES), end
