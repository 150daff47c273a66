"""CPU per replication round, in one process: a leader's ReplicaManager appends one batch
and a follower's fetcher copies it over loopback (Fetch with sendfile, FrameReader, the
follower's append), as in a real cluster but without the producer, the controller or a
second core, on the nodes' event loop (uvloop unless SKIFF_EVENT_LOOP=asyncio). A quick,
low-noise loop for work on what a round costs in Python, which docs/benchmarks.md names
as the lever for the RF=3 acks=1 ratio.

The limit it prints beside it is the same data movement with bare syscalls in the same
run: pwrite the batch to one file, sendfile it into a loopback socket, recv it and pwrite
it to a second file. Both files are preallocated, and dropped behind by the segments' rule
(broker/log/drop_behind.next_drop, default window) with the fadvise calls inline.

    python bench/replication_round_bench.py --rounds 3000
    python bench/replication_round_bench.py --rounds 3000 --profile 30
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.log import LogConfig  # noqa: E402
from broker.log.drop_behind import next_drop  # noqa: E402
from broker.logsetup import configure_logging  # noqa: E402
from broker.protocol.records import Record, build_batch  # noqa: E402
from broker.testing.inprocess_cluster import FAST, Cluster  # noqa: E402
from raft import eventloop  # noqa: E402

WARM_UP_ROUNDS = 50
DROP_BEHIND_BYTES = LogConfig().drop_behind_bytes  # the segments' default window


def make_batch(records: int, value_bytes: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(timestamp=now, key=None, value=os.urandom(value_bytes))
                        for _ in range(records)])


async def skiff_rounds(tmp: Path, batch: bytes, rounds: int,
                       profile: cProfile.Profile | None) -> float:
    """CPU seconds per round: append on the leader until the follower holds the batch."""
    settings = dataclasses.replace(FAST, fetch_wait_max_ms=500, lag_time_max_ms=60_000)
    cluster = Cluster(tmp, ids=(1, 2), settings=settings)
    await cluster.start()
    try:
        await cluster.create_topic("t", [1, 2])
        leader = cluster.brokers[1].replicas
        follower = cluster.brokers[2].replicas.get("t", 0)
        if follower is None:
            raise RuntimeError("broker 2 holds no replica of t-0")

        async def one() -> None:
            res = await leader.append({("t", 0): batch}, required_acks=1, timeout_ms=5000)
            end = res[("t", 0)].last_offset + 1  # type: ignore[union-attr]
            while follower.log.log_end_offset < end:
                await follower.new_waiter(for_log_end=True)

        for _ in range(WARM_UP_ROUNDS):
            await one()
        start = time.process_time()
        if profile is not None:
            profile.enable()
        for _ in range(rounds):
            await one()
        if profile is not None:
            profile.disable()
        return (time.process_time() - start) / rounds
    finally:
        await cluster.stop()


def syscall_rounds(tmp: Path, batch: bytes, rounds: int) -> float:
    """CPU seconds per round of the same copies with bare syscalls."""
    total = len(batch) * (rounds + WARM_UP_ROUNDS)
    fds = []
    for name in ("leader", "follower"):
        fd = os.open(tmp / name, os.O_CREAT | os.O_RDWR | os.O_TRUNC)
        os.posix_fallocate(fd, 0, total)
        fds.append(fd)
    leader_fd, follower_fd = fds
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    buf = bytearray(len(batch))
    view = memoryview(buf)
    pos = dropped = 0
    try:
        def one() -> None:
            nonlocal pos, dropped
            os.pwrite(leader_fd, batch, pos)
            sent = 0
            got = 0
            while sent < len(batch):
                sent += os.sendfile(sender.fileno(), leader_fd, pos + sent, len(batch) - sent)
                while got < sent:
                    got += receiver.recv_into(view[got:])
            os.pwrite(follower_fd, buf, pos)
            pos += len(batch)
            drop = next_drop(pos, dropped, DROP_BEHIND_BYTES)
            if drop is not None:
                for fd in fds:
                    os.posix_fadvise(fd, drop[0], drop[1] - drop[0], os.POSIX_FADV_DONTNEED)
                dropped = drop[1]

        for _ in range(WARM_UP_ROUNDS):
            one()
        start = time.process_time()
        for _ in range(rounds):
            one()
        return (time.process_time() - start) / rounds
    finally:
        for s in (sender, receiver, listener):
            s.close()
        for fd in fds:
            os.close(fd)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3000)
    p.add_argument("--records", type=int, default=1600,
                   help="records per batch: in cluster_bench.py replication each "
                        "partition's leader got a librdkafka request every 5.2 ms, about "
                        "1,500 records of 100 B at 864k msg/s")
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="cProfile one more Skiff run and print its top N functions")
    args = p.parse_args()
    configure_logging("console", "WARNING")
    batch = make_batch(args.records, args.value_bytes)
    skiff: list[float] = []
    bare: list[float] = []
    # Uncounted: on a VM that hands free memory back to its host, the first pass through
    # page cache the guest has not touched yet costs several times a recycled one
    # (docs/configuration.md, drop-behind).
    with tempfile.TemporaryDirectory() as tmp:
        syscall_rounds(Path(tmp), batch, args.rounds)
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            bare.append(syscall_rounds(Path(tmp), batch, args.rounds))
        with tempfile.TemporaryDirectory() as tmp:
            skiff.append(eventloop.run(skiff_rounds(Path(tmp), batch, args.rounds, None)))
        print(f"  round of {len(batch):,} bytes: Skiff {skiff[-1] * 1e6:.0f} µs CPU, "
              f"bare syscalls {bare[-1] * 1e6:.0f} µs", flush=True)
    s, b = statistics.median(skiff), statistics.median(bare)
    per_100k = 100_000 / args.records
    print(f"replication round: median {s * 1e6:.0f} µs CPU ({s * per_100k * 1e3:.1f} ms per "
          f"100k records), bare syscalls {b * 1e6:.0f} µs; Skiff / bare {s / b:.2f}")
    if args.profile:
        profile = cProfile.Profile()
        with tempfile.TemporaryDirectory() as tmp:
            eventloop.run(skiff_rounds(Path(tmp), batch, args.rounds, profile))
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
