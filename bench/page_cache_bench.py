"""What writing into the page cache costs as it grows, with and without drop-behind, and
what a read from the disk costs against one from the cache.

    PYTHONPATH=. python bench/page_cache_bench.py write --files 8 --window-mib 64
    PYTHONPATH=. python bench/page_cache_bench.py read

`write` writes `--files` files of 300 MiB each, in 128 KiB writes, twice: first keeping
everything cached (Kafka's way: the kernel decides), then dropping what lies more than
`--window-mib` behind the write position, 4 MiB at a time, the way a Skiff segment does
(`broker/log/drop_behind.py`; the fadvise calls run inline here). For each file it prints
the kernel CPU time of the writes per 100 MiB, and at the end the ratio of the two modes'
medians. Files are deleted at the end of each mode, and the kernel's writeback after each
file (`sync`) is outside the timing.

`read` writes one 300 MiB file, drops it from the cache, then sends it through a local
socket with os.sendfile twice: cold (from the disk) and warm (from the cache).

Run it on a quiet machine: other processes' page cache use changes the first mode's
figures. The broker's own benchmark of the effect is `cluster_bench.py replication`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from broker.log.drop_behind import next_drop

FILE_BYTES = 300 << 20
WRITE_BYTES = 128 << 10


def write_file(path: Path, window: int | None) -> float:
    """Kernel CPU seconds per 100 MiB for writing one file."""
    buf = os.urandom(WRITE_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        before = os.times()
        size = dropped_to = 0
        for _ in range(FILE_BYTES // WRITE_BYTES):
            os.write(fd, buf)
            size += WRITE_BYTES
            if window is not None:
                drop = next_drop(size, dropped_to, window)
                if drop is not None:
                    os.posix_fadvise(fd, drop[0], drop[1] - drop[0], os.POSIX_FADV_DONTNEED)
                    dropped_to = drop[1]
        after = os.times()
    finally:
        os.close(fd)
    os.sync()
    return (after.system - before.system) * (100 << 20) / FILE_BYTES


def bench_write(files: int, window_mib: int, directory: str | None) -> None:
    medians = {}
    for label, window in (("keep everything", None), (f"drop-behind {window_mib} MiB",
                                                      window_mib << 20)):
        d = Path(tempfile.mkdtemp(prefix="skiff-pagecache-", dir=directory))
        try:
            costs = []
            for i in range(files):
                cost = write_file(d / f"f{i}", window)
                costs.append(cost)
                print(f"  {label}: file {i}: {cost * 1000:.0f} ms kernel CPU per 100 MiB",
                      flush=True)
        finally:
            shutil.rmtree(d)
        medians[label] = statistics.median(costs)
        print(f"{label}: median {medians[label] * 1000:.0f} ms per 100 MiB, "
              f"last file {costs[-1] * 1000:.0f}", flush=True)
    keep, drop = medians.values()
    print(f"ratio drop-behind / keep everything: {drop / keep:.2f}")


def bench_read(directory: str | None) -> None:
    d = Path(tempfile.mkdtemp(prefix="skiff-pagecache-", dir=directory))
    try:
        path = d / "f"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        buf = os.urandom(1 << 20)
        for _ in range(FILE_BYTES >> 20):
            os.write(fd, buf)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, FILE_BYTES, os.POSIX_FADV_DONTNEED)
        out, sink = socket.socketpair()

        def drain() -> None:
            while sink.recv(1 << 20):
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        rates = {}
        for label in ("cold (disk)", "warm (cache)"):
            start = time.perf_counter()
            worst = 0.0
            offset = 0
            while offset < FILE_BYTES:
                t = time.perf_counter()
                offset += os.sendfile(out.fileno(), fd, offset, 1 << 20)
                worst = max(worst, time.perf_counter() - t)
            rates[label] = FILE_BYTES / (time.perf_counter() - start) / 1e6
            print(f"{label}: {rates[label]:,.0f} MB/s, slowest 1 MiB sendfile "
                  f"{worst * 1000:.2f} ms", flush=True)
        out.close()
        reader.join(timeout=10)
        sink.close()
        os.close(fd)
        cold, warm = rates.values()
        print(f"ratio cold / warm: {cold / warm:.2f}")
    finally:
        shutil.rmtree(d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("write")
    w.add_argument("--files", type=int, default=8)
    w.add_argument("--window-mib", type=int, default=64)
    w.add_argument("--dir", default=None)
    r = sub.add_parser("read")
    r.add_argument("--dir", default=None)
    args = parser.parse_args()
    if args.mode == "write":
        bench_write(args.files, args.window_mib, args.dir)
    else:
        bench_read(args.dir)


if __name__ == "__main__":
    main()
