"""What a broker split into partition-owning processes could reach on this machine (issue 33
point 2), measured before building it. Run by hand.

A share-nothing upper bound: S independent `skiff dev` nodes (vs_kafka's settings), each
the owner of partitions/S partitions, driven by the replayer of bench/replay.py (one replayer
process per node, pre-encoded Produce requests). A broker whose worker processes each own a
share of the partitions does at least the same work per request plus the hand-overs; here
nothing is handed over, so these figures are its ceiling. The baseline is one node with all
the partitions and the same total connections and requests in flight, in the same run.

Each configuration runs on all cores and with every broker process pinned to one CPU
(`taskset -a`, the replayers unpinned), as issue 33 asks of one broker: >= 1.6 cores and
>= 1.5x its pinned throughput.

    PYTHONPATH=. python bench/shard_ceiling.py --repeats 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import replay  # noqa: E402
from bench.vs_kafka import (  # noqa: E402
    Side,
    create_topic,
    delete_topic,
    load,
    log,
    pin,
    start_skiff,
)


def _replayer(bootstrap: str, topic: str, partitions: int, args: argparse.Namespace,
              connections: int, go: Any, out: Any) -> None:
    per_batch = max(1, args.batch_bytes // args.size)
    go.wait()
    r = replay.replay_produce(bootstrap, topic, range(partitions), connections=connections,
                              inflight=args.inflight, records_per_batch=per_batch,
                              size=args.size, seconds=args.seconds)
    out.put((r.bytes, r.wall_s, r.client_cpu_s, r.errors[:3]))


@dataclass
class Round:
    mbs: float
    cores: float  # the broker processes', added up
    per_owner: list[float]
    cpu_gb: float
    replayer_cores: float


def run(owners: list[Side], args: argparse.Namespace) -> Round:
    """One replayed produce spread over `owners` (each gets partitions/len(owners))."""
    share = args.partitions // len(owners)
    conns = args.connections // len(owners)
    topics = []
    for side in owners:
        topic = f"shard-{uuid.uuid4().hex[:6]}"
        create_topic(side.bootstrap, topic, share)
        replay.wait_writable(side.bootstrap, topic, range(share))
        topics.append(topic)
    os.sync()  # write back what the last round left dirty before this one
    ctx = mp.get_context("fork")
    go = ctx.Barrier(len(owners) + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=_replayer, args=(side.bootstrap, topic, share, args, conns,
                                                 go, out), daemon=True)
             for side, topic in zip(owners, topics, strict=True)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    cpu0 = [side.cpu_s() for side in owners]
    go.wait()
    t0 = time.monotonic()
    results = [out.get(timeout=args.seconds + 120) for _ in procs]
    wall = time.monotonic() - t0
    cpu = [side.cpu_s() - c for side, c in zip(owners, cpu0, strict=True)]
    for p in procs:
        p.join(timeout=30)
    for side, topic in zip(owners, topics, strict=True):
        delete_topic(side.bootstrap, topic)
    produced = sum(r[0] for r in results)
    for r in results:
        for e in r[3]:
            log(f"  replay error: {e}")
    return Round(mbs=produced / wall / 1e6, cores=sum(cpu) / wall,
                 per_owner=[c / wall for c in cpu],
                 cpu_gb=sum(cpu) / (produced / 1e9) if produced else float("nan"),
                 replayer_cores=sum(r[2] for r in results) / wall)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--connections", type=int, default=6, help="in total, over the owners")
    ap.add_argument("--inflight", type=int, default=5, help="per connection")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--batch-bytes", type=int, default=16384)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cpu", default="1", help="the one CPU for the pinned rounds")
    args = ap.parse_args(argv)
    if args.partitions % args.shards or args.connections % args.shards:
        ap.error("--partitions and --connections must divide by --shards")
    every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    work = Path(tempfile.mkdtemp(prefix="skiff-shard-"))
    print(f"{args.shards} owners x {args.partitions // args.shards} partitions against 1 x "
          f"{args.partitions}; {args.connections} connections x {args.inflight} in flight, "
          f"{args.size} B records in {args.batch_bytes} B batches, {args.seconds:.0f} s per "
          f"round; {os.cpu_count()} CPUs, load {load()}", flush=True)
    nodes: list[Side] = []
    figures: dict[tuple[str, str], list[Round]] = {}
    try:
        nodes = [start_skiff(work) for _ in range(args.shards)]
        configs = {"1 process": nodes[:1], f"{args.shards} processes": nodes}
        run(nodes, args)  # warm-up, not counted
        for rep in range(args.repeats):
            for name, owners in configs.items():
                for placement in ("all cores", f"pinned to CPU {args.cpu}"):
                    cpus = every if placement == "all cores" else args.cpu
                    for side in owners:
                        pin(side.pids()[0], cpus)
                    r = run(owners, args)
                    for side in owners:
                        pin(side.pids()[0], every)
                    figures.setdefault((name, placement), []).append(r)
                    per = " + ".join(f"{c:.2f}" for c in r.per_owner)
                    log(f"  round {rep + 1}, {name}, {placement}: {r.mbs:.1f} MB/s, broker "
                        f"{r.cores:.2f} cores ({per}), {r.cpu_gb:.2f} CPU-s/GB, "
                        f"replayers {r.replayer_cores:.2f} cores")
    finally:
        for side in nodes:
            side.stop()
        shutil.rmtree(work, ignore_errors=True)

    def med(name: str, placement: str, key: str) -> float:
        return float(statistics.median(getattr(r, key) for r in figures[(name, placement)]))

    print(f"\n{'':<14} {'all cores MB/s':>15} {'broker cores':>13} {'CPU-s/GB':>9} "
          f"{'pinned MB/s':>12} {'all / pinned':>13}   (medians of {args.repeats})")
    for name in configs:
        free, one = (name, "all cores"), (name, f"pinned to CPU {args.cpu}")
        print(f"{name:<14} {med(*free, 'mbs'):>15.1f} {med(*free, 'cores'):>13.2f} "
              f"{med(*free, 'cpu_gb'):>9.2f} {med(*one, 'mbs'):>12.1f} "
              f"{med(*free, 'mbs') / med(*one, 'mbs'):>13.2f}")
    print(f"load at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
