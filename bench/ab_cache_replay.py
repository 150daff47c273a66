"""Skiff against Skiff with the page cache emptied before every round: one `skiff dev` node
from each of two checkouts, replayed produce (6 partitions, 16 KB batches of 1 KB records,
5 requests in flight per connection, acks=all) then a replayed fetch of what it wrote,
alternating between them, the broker's user and system CPU apart (its worker processes
included: SKIFF_SKIFF_BROKER_WORKERS=N in the environment gives both nodes N). For
"measure before and after" where ab_replay.py's rounds are bimodal (a full page cache
makes each new page a reclaim first, docs/benchmarks.md). Needs root (drop_caches).
Round 0 is a warm-up.

    PYTHONPATH=. python bench/ab_cache_replay.py --a /path/to/checkout-before --b .
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from bench import replay, vs_kafka
from bench.ab_replay import running, start_node
from bench.perf import tree_user_system_s

COLUMNS = ("produce MB/s", "user s/GB", "sys s/GB", "fetch MB/s", "user s/GB", "sys s/GB")


def one_round(pid: int, bootstrap: str, seconds: float, connections: int) -> tuple[float, ...]:
    topic = f"ab-{uuid.uuid4().hex[:8]}"
    vs_kafka.create_topic(bootstrap, topic, 6)
    replay.wait_writable(bootstrap, topic, range(6))
    vs_kafka.empty_page_cache()
    u0, s0 = tree_user_system_s(pid)
    produced = replay.replay_produce(bootstrap, topic, range(6), connections=connections,
                                     inflight=5, records_per_batch=16, size=1000,
                                     acks=-1, seconds=seconds)
    u1, s1 = tree_user_system_s(pid)
    ends = replay.end_offsets(bootstrap, topic, range(6))
    os.sync()
    u2, s2 = tree_user_system_s(pid)
    fetched = replay.replay_fetch(bootstrap, topic, ends, connections=connections)
    u3, s3 = tree_user_system_s(pid)
    vs_kafka.delete_topic(bootstrap, topic)
    errors = produced.errors + fetched.errors
    if errors:
        raise RuntimeError(f"replay errors: {errors[:3]}")
    gb, fetched_gb = produced.bytes / 1e9, fetched.bytes / 1e9
    return (produced.mb_s, (u1 - u0) / gb, (s1 - s0) / gb,
            fetched.mb_s, (u3 - u2) / fetched_gb, (s3 - s2) / fetched_gb)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="checkout before")
    ap.add_argument("--b", type=Path, default=Path("."), help="checkout after")
    ap.add_argument("--rounds", type=int, default=6, help="counted rounds per side")
    ap.add_argument("--seconds", type=float, default=5.0, help="of produce per round")
    ap.add_argument("--connections", type=int, default=3)
    ap.add_argument("--ports", type=int, default=19500, help="A's first port; B's is +100")
    args = ap.parse_args(argv)
    if not os.access(vs_kafka.DROP_CACHES, os.W_OK):
        ap.error("emptying the page cache before each round needs root")
    work = Path(tempfile.mkdtemp(prefix="skiff-abc-"))
    nodes = {"A": start_node(args.a.resolve(), work / "a", args.ports),
             "B": start_node(args.b.resolve(), work / "b", args.ports + 100)}
    print(f"A: {args.a.resolve()}  B: {args.b.resolve()}  load {vs_kafka.load()}", flush=True)
    rows: dict[str, list[tuple[float, ...]]] = {"A": [], "B": []}
    try:
        for proc, bootstrap in nodes.values():
            vs_kafka.wait_serving(bootstrap, functools.partial(running, proc))
        for rnd in range(args.rounds + 1):
            for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                proc, bootstrap = nodes[name]
                row = one_round(proc.pid, bootstrap, args.seconds, args.connections)
                print(f"round {rnd} {name} " + "  ".join(f"{x:8.2f}" for x in row), flush=True)
                if rnd:
                    rows[name].append(row)
        print(f"medians of {args.rounds} rounds: " + " | ".join(COLUMNS))
        medians = {n: [statistics.median(r[i] for r in rows[n]) for i in range(len(COLUMNS))]
                   for n in rows}
        for name in ("A", "B"):
            print(f"{name}    " + "  ".join(f"{x:8.2f}" for x in medians[name]))
        print("B/A  " + "  ".join(f"{b / a:8.3f}" if a else "       -"
                                  for a, b in zip(medians["A"], medians["B"], strict=True)))
        print(f"load at the end {vs_kafka.load()}")
    finally:
        for proc, _ in nodes.values():
            if running(proc):
                proc.terminate()
                proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
