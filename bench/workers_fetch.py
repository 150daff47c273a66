"""Replayed fetch from a broker of one worker and of two (`skiff.broker.workers`), in one
run. Run by hand.

Each round starts a `skiff dev` node (vs_kafka's settings) with the worker count, fills a
topic of 6 partitions with replayed produce (16 KB batches of 1 KB records, 5 s), then reads
it all back from offset 0 with bench/replay.py's fetch replayer: once over one connection
(each Fetch names all 6 partitions, so about half of each is another process's, read
through the hand-over: the owner names its file, the process holding the connection sends
it with sendfile), once over two (connection c reads the partitions p with p % 2 == c, whose
owner is one process: all of a round's connections are on their partitions' owner or none
are). It prints MB/s, the broker's cores and CPU-s per GB (the node and its workers), and
the replayer's cores (one process per connection).

    PYTHONPATH=. python bench/workers_fetch.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import replay  # noqa: E402
from bench.vs_kafka import create_topic, load, start_skiff  # noqa: E402

PARTITIONS = list(range(6))


def one_round(work: Path, rnd: int, workers: int) -> None:
    side = start_skiff(work, {"skiff.broker.workers": str(workers), "metrics.listeners": ""})
    try:
        topic = f"fetch-{rnd}-{workers}"
        create_topic(side.bootstrap, topic, len(PARTITIONS))
        replay.wait_writable(side.bootstrap, topic, PARTITIONS)
        replay.replay_produce(side.bootstrap, topic, PARTITIONS, connections=2, inflight=5,
                              records_per_batch=16, size=1000, seconds=5)
        ends = replay.end_offsets(side.bootstrap, topic, PARTITIONS)
        for conns in (1, 2):
            cpu0, t0 = side.cpu_s(), time.monotonic()
            r = replay.replay_fetch(side.bootstrap, topic, ends, connections=conns)
            wall = time.monotonic() - t0
            cpu = side.cpu_s() - cpu0
            print(f"round {rnd}, {workers} worker(s), {conns} connection(s): "
                  f"{r.bytes / r.wall_s / 1e6:.0f} MB/s, broker {cpu / wall:.2f} cores, "
                  f"{cpu / (r.bytes / 1e9):.2f} CPU-s/GB, replayer "
                  f"{r.client_cpu_s / r.wall_s:.2f} cores, errors {r.errors[:1]}", flush=True)
    finally:
        side.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"load {load()}", flush=True)
    for rnd in range(1, args.rounds + 1):
        for workers in (1, 2):
            work = Path(tempfile.mkdtemp(prefix="skiff-wfetch-"))
            try:
                one_round(work, rnd, workers)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    print(f"load at the end {load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
