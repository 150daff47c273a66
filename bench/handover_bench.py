"""What a hand-over of record batches to another process costs, next to a Produce request.

Issue 33 point 2 needs a broker that uses every core. The relaying spike (docs/benchmarks.md,
"Network processes") showed that moving only the sockets out leaves the request handling in
one interpreter; the design left is workers that each own a share of the partitions, where a
request spanning owners hands the other owner its partitions' batches and waits for their
results. This measures that hand-over alone, in the same event loop Skiff runs (uvloop):

- a sender process writes one message (a small header and `--batches` record batches of
  `--batch-bytes`) to a Unix stream socket, `--inflight` at a time;
- the owner process reads each whole message (the append itself is left out: its owner does
  that work in any design), and answers 16 bytes per batch;
- both sides' CPU per message is reported, against the broker's measured CPU per replayed
  Produce request (`--request-us`, from `vs_kafka.py replay`: 5.34 CPU-s/GB at 96 KB
  requests is ~510 us).

    PYTHONPATH=. python bench/handover_bench.py --messages 20000 --batches 3
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import resource
import struct
import tempfile
import time

import uvloop

_HEAD = struct.Struct(">iii")  # size of the rest, message id, batches


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Owner(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[float]) -> None:
        self.buf = bytearray()
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.cpu0 = _cpu_s()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= _HEAD.size:
            size, msg_id, batches = _HEAD.unpack_from(self.buf)
            if len(self.buf) < 4 + size:
                return
            # The owner does not append here: the append is work the partition's owner does
            # in any design; only the hand-over is the cost of splitting.
            total = size - 8
            del self.buf[:4 + size]
            assert self.transport is not None
            self.transport.write(struct.pack(">ii", msg_id, total) + b"\0" * (16 * batches - 8))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(_cpu_s() - self.cpu0)


def _owner_main(path: str, out: mp.Queue[float]) -> None:
    async def run() -> None:
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        server = await asyncio.get_running_loop().create_unix_server(lambda: _Owner(done), path)
        out.put(-1.0)  # listening
        out.put(await done)
        server.close()
    uvloop.run(run())


async def _send(path: str, messages: int, batches: int, batch_bytes: int,
                inflight: int) -> tuple[float, float]:
    reader, writer = await asyncio.open_unix_connection(path)
    payload = os.urandom(batch_bytes) * batches
    answer = 16 * batches
    cpu0, t0 = _cpu_s(), time.monotonic()
    sent = received = 0
    while received < messages:
        while sent < messages and sent - received < inflight:
            writer.write(_HEAD.pack(8 + len(payload), sent, batches) + payload)
            sent += 1
        await reader.readexactly(answer)
        received += 1
    cpu = _cpu_s() - cpu0
    wall = time.monotonic() - t0
    writer.close()
    await writer.wait_closed()
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--batch-bytes", type=int, default=16384)
    ap.add_argument("--inflight", type=int, default=5)
    ap.add_argument("--request-us", type=float, default=510.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "owner.sock")
        out: mp.Queue[float] = mp.Queue()
        owner = mp.Process(target=_owner_main, args=(path, out))
        owner.start()
        out.get(timeout=30)
        cpu, wall = uvloop.run(_send(path, args.messages, args.batches, args.batch_bytes,
                                     args.inflight))
        owner_cpu = out.get(timeout=60)
        owner.join(timeout=30)
    per_send = cpu / args.messages * 1e6
    per_own = owner_cpu / args.messages * 1e6
    print(f"{args.messages:,} hand-overs of {args.batches} x {args.batch_bytes:,} B, "
          f"{args.inflight} in flight, {wall:.2f} s: sender {per_send:.1f} us, owner "
          f"{per_own:.1f} us CPU each; together {(per_send + per_own) / args.request_us:.2f} "
          f"of a {args.request_us:.0f} us Produce request")


if __name__ == "__main__":
    main()
