"""Can a thread take a broker's log writes off a busy event loop under CPython's GIL?

Issue 33 point 2 asks one broker to use every core. About half of Skiff's broker CPU in a
broker-bound replayed produce is the kernel copying records into the page cache (perf:
`vfs_writev` 50% of samples), and `os.pwritev` releases the GIL, so one candidate is a
thread that does the appends while the loop parses the next requests. This measures that
shape without the broker: `--requests` requests spread over `--concurrency` tasks on a
uvloop loop; each request is `--loop-us` of Python on the loop, then a job of `--job-us`
of Python plus a GIL-free step (SHA-256 of `--free-kb` KiB, which releases the GIL as a
system call does; ~155 us for 256 KiB here). `inline` runs the job on the loop; `thread`
hands it to one thread (jobs in order, results back with call_soon_threadsafe), at each
`--switch` interval (sys.setswitchinterval). With full overlap `thread` would approach
1 / (loop + job Python) requests per second and use more than one core.

    PYTHONPATH=. python bench/gil_overlap_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import queue
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import uvloop


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


class JobThread:
    """One thread, jobs in submission order, results handed back to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.q: queue.SimpleQueue[tuple[asyncio.Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue())
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def submit(self, job: Callable[[], Any]) -> asyncio.Future[Any]:
        fut = self.loop.create_future()
        self.q.put((fut, job))
        return fut

    def close(self) -> None:
        self.q.put(None)
        self.t.join()

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            fut, job = item
            result = job()
            self.loop.call_soon_threadsafe(fut.set_result, result)


def run(mode: str, switch: float, args: argparse.Namespace) -> tuple[float, float]:
    """(requests per second, cores used)."""
    sys.setswitchinterval(switch)
    free = os.urandom(args.free_kb * 1024)

    def job() -> int:
        spin(args.job_us)
        return len(hashlib.sha256(free).digest())

    async def main() -> tuple[float, float, float]:
        thread = JobThread(asyncio.get_running_loop()) if mode == "thread" else None
        per_task = args.requests // args.concurrency

        async def task() -> None:
            for _ in range(per_task):
                spin(args.loop_us)
                if thread is None:
                    job()
                else:
                    await thread.submit(job)
                await asyncio.sleep(0)

        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        await asyncio.gather(*(task() for _ in range(args.concurrency)))
        r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - t0
        if thread is not None:
            thread.close()
        done = per_task * args.concurrency
        return (done / wall, (r1.ru_utime - r0.ru_utime) / wall,
                (r1.ru_stime - r0.ru_stime) / wall)

    rate, user, system = uvloop.run(main())
    return rate, user + system


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=15_000)
    ap.add_argument("--concurrency", type=int, default=15)
    ap.add_argument("--loop-us", type=float, default=150.0)
    ap.add_argument("--job-us", type=float, default=20.0)
    ap.add_argument("--free-kb", type=int, default=256)
    ap.add_argument("--switch", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.005, 0.0005, 0.00005])
    args = ap.parse_args()
    ideal = 1e6 / (args.loop_us + args.job_us)
    print(f"full overlap would give ~{ideal:,.0f} requests/s; the inline figure is the "
          "one-thread limit", flush=True)
    inline = None
    for mode, switch in [("inline", 0.005)] + [("thread", s) for s in args.switch]:
        rate, cores = run(mode, switch, args)
        inline = inline or rate
        print(f"{mode:>6} switch {switch * 1e6:>6.0f} us: {rate:>7,.0f} requests/s, "
              f"{cores:.2f} cores  ({rate / inline:.2f} of inline)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
