"""One Skiff setting against another, and Kafka 4.4 beside them, in one run, by hand.

Two `skiff dev` nodes (vs_kafka.py's settings) that differ only in the keys given with
`--a` and `--b`, and with `--kafka` the reference Kafka 4.4, each get replayed produce
(bench/replay.py: 6 partitions, batches of 16 records of 1,000 B, 5 requests in flight per
connection) and then a replayed fetch of what was written, alternating the order round by
round after an uncounted warm-up round, each round's produce starting with the page cache
empty (as in shard_ceiling.py: a full cache makes each new page a reclaim first, which
swings produce rounds by half; `--keep-caches` to skip, root needed otherwise). Prints each
round and the medians: MB/s and the broker's CPU-s per GB for produce and for fetch.

    PYTHONPATH=. python bench/setting_ab.py --kafka \
        --a socket.send.buffer.bytes=-1,socket.receive.buffer.bytes=-1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench import replay, vs_kafka
from bench.keyvalue import comma_key_values


def one_round(side: vs_kafka.Side, seconds: float, connections: int,
              drop_caches: bool) -> dict[str, Any]:
    topic = f"ab-{uuid.uuid4().hex[:6]}"
    vs_kafka.create_topic(side.bootstrap, topic, 6)
    replay.wait_writable(side.bootstrap, topic, range(6))
    if drop_caches:
        vs_kafka.empty_page_cache()
    else:
        os.sync()
    cpu0 = side.cpu_s()
    produced = replay.replay_produce(side.bootstrap, topic, range(6), connections=connections,
                                     inflight=5, records_per_batch=16, size=1000,
                                     seconds=seconds)
    cpu1 = side.cpu_s()
    ends = replay.end_offsets(side.bootstrap, topic, range(6))
    subprocess.run(["sync"], check=False)
    cpu2 = side.cpu_s()
    fetched = replay.replay_fetch(side.bootstrap, topic, ends, connections=connections)
    cpu3 = side.cpu_s()
    vs_kafka.delete_topic(side.bootstrap, topic)
    return {"produce_mbs": produced.mb_s,
            "produce_cpu_gb": (cpu1 - cpu0) / (produced.bytes / 1e9),
            "fetch_mbs": fetched.mb_s,
            "fetch_cpu_gb": (cpu3 - cpu2) / (fetched.bytes / 1e9),
            "errors": (produced.errors + fetched.errors)[:3]}


def start_skiff(work: Path, name: str, extra: dict[str, str]) -> vs_kafka.Side:
    saved = dict(vs_kafka.SKIFF_ONLY_CONFIG)
    vs_kafka.SKIFF_ONLY_CONFIG.update(extra)
    try:
        side = vs_kafka.start_skiff(work)
    finally:
        vs_kafka.SKIFF_ONLY_CONFIG.clear()
        vs_kafka.SKIFF_ONLY_CONFIG.update(saved)
    side.name = name
    return side


def shown(keys: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in keys.items()) or "(defaults)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="", type=comma_key_values,
                    help="key=value,... for node A")
    ap.add_argument("--b", default="", type=comma_key_values,
                    help="key=value,... for node B (default: none)")
    ap.add_argument("--kafka", action="store_true", help="Kafka 4.4 as a third side")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0, help="produce per round")
    ap.add_argument("--connections", type=int, default=3)
    vs_kafka.add_keep_caches_option(ap)
    args = ap.parse_args(argv)
    vs_kafka.check_drop_caches(ap, args)
    work = Path(tempfile.mkdtemp(prefix="setting-ab-"))
    sides = [start_skiff(work, "A", args.a), start_skiff(work, "B", args.b)]
    if args.kafka:
        sides.append(vs_kafka.start_kafka(work)[0])
    print(f"A: {shown(args.a)}  B: {shown(args.b)}  load {vs_kafka.load()}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {s.name: [] for s in sides}
    try:
        for side in sides:
            one_round(side, 2.0, args.connections, args.drop_caches)  # warm-up
        for rnd in range(args.rounds):
            for side in sides if rnd % 2 == 0 else sides[::-1]:
                r = one_round(side, args.seconds, args.connections, args.drop_caches)
                runs[side.name].append(r)
                print(f"round {rnd} {side.name:6} produce {r['produce_mbs']:7.1f} MB/s "
                      f"{r['produce_cpu_gb']:5.2f} CPU-s/GB  fetch {r['fetch_mbs']:7.1f} MB/s "
                      f"{r['fetch_cpu_gb']:6.3f} CPU-s/GB {r['errors'] or ''}", flush=True)
        for name, rs in runs.items():
            med = {k: statistics.median(r[k] for r in rs)
                   for k in ("produce_mbs", "produce_cpu_gb", "fetch_mbs", "fetch_cpu_gb")}
            print(f"median {name:6} produce {med['produce_mbs']:7.1f} MB/s "
                  f"{med['produce_cpu_gb']:5.2f} CPU-s/GB  fetch {med['fetch_mbs']:7.1f} MB/s "
                  f"{med['fetch_cpu_gb']:6.3f} CPU-s/GB", flush=True)
        print(f"load at the end {vs_kafka.load()}")
    finally:
        for side in sides:
            side.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
