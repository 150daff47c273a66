"""What a broker split into partition-owning processes could reach on this machine (issue 33
point 2), measured before building it. Run by hand.

A share-nothing upper bound: S independent `skiff dev` nodes (vs_kafka's settings), each
the owner of partitions/S partitions, driven by the replayer of bench/replay.py (one replayer
process per node, pre-encoded Produce requests). A broker whose worker processes each own a
share of the partitions does at least the same work per request plus the hand-overs; here
nothing is handed over, so these figures are its ceiling. The baseline is one node with all
the partitions and the same total connections and requests in flight, in the same run.
With --cluster, also S brokers of one cluster (and a controller process, not counted)
leading the partitions of one topic in turn: one broker per core, as a user can run today.

With --workers N, also one broker of N workers (`skiff.broker.workers`, broker/node/shards.py)
with every partition: the design the ceiling was measured for, hand-overs included.

Each configuration runs on all cores and with every broker process pinned to one CPU
(`taskset -a`, the replayers unpinned), as issue 33 asks of one broker: >= 1.6 cores and
>= 1.5x its pinned throughput. Each round starts with `sync` and an empty page cache
(--keep-caches: as the last round left it).

    PYTHONPATH=. python bench/shard_ceiling.py --repeats 3 --cluster
    PYTHONPATH=. python bench/shard_ceiling.py --repeats 3 --cluster --connections 2
    PYTHONPATH=. python bench/shard_ceiling.py --repeats 3 --workers 2 [--connections 2]
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import perf, replay  # noqa: E402
from bench.keyvalue import key_value  # noqa: E402
from bench.vs_kafka import (  # noqa: E402
    COMMON_CONFIG,
    SKIFF_ONLY_CONFIG,
    Side,
    add_keep_caches_option,
    check_drop_caches,
    create_topic,
    delete_topic,
    empty_page_cache,
    load,
    log,
    pin,
    start_skiff,
)
from broker.testing.cluster import Cluster  # noqa: E402


def _replayer(bootstrap: str, topic: str, partitions: list[int], args: argparse.Namespace,
              connections: int, go: Any, out: Any) -> None:
    per_batch = max(1, args.batch_bytes // args.size)
    go.wait()
    r = replay.replay_produce(bootstrap, topic, partitions, connections=connections,
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
    machine: dict[str, float] = field(default_factory=dict)  # cores by /proc/stat column


_STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_ticks() -> dict[str, int]:
    """The first line of /proc/stat: every CPU's time by kind, in clock ticks."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:1 + len(_STAT_COLUMNS)]
    return dict(zip(_STAT_COLUMNS, map(int, fields), strict=True))


def machine_cores(before: dict[str, int], after: dict[str, int], wall_s: float) -> dict[str, float]:
    hz = os.sysconf("SC_CLK_TCK")
    return {k: (after[k] - before[k]) / hz / wall_s for k in _STAT_COLUMNS}


@dataclass
class Owner:
    """A broker process that leads some of the round's partitions."""

    side: Side
    topic: str = ""
    partitions: list[int] = field(default_factory=list)


def independent(owners: list[Side], partitions: int) -> list[Owner]:
    """A topic of partitions/len(owners) partitions on each (unrelated) node."""
    out = []
    for side in owners:
        o = Owner(side, f"shard-{uuid.uuid4().hex[:6]}", list(range(partitions // len(owners))))
        create_topic(side.bootstrap, o.topic, len(o.partitions))
        out.append(o)
    return out


def one_cluster(cluster: Cluster, brokers: list[Side], partitions: int) -> list[Owner]:
    """One topic on the cluster, its partitions' leaders alternating over the brokers: with
    one replica each, the assigned broker leads (create_topic waits until it does)."""
    topic = f"shard-{uuid.uuid4().hex[:6]}"
    n = len(brokers)
    create_topic(cluster.bootstrap_servers, topic, partitions,
                 assignment=[[cluster.broker_ids[p % n]] for p in range(partitions)])
    return [Owner(side, topic, list(range(k, partitions, n))) for k, side in enumerate(brokers)]


def run(owners: list[Owner], args: argparse.Namespace) -> Round:
    """One replayed produce spread over `owners`, each sent its own partitions."""
    conns = args.connections // len(owners)
    for o in owners:
        replay.wait_writable(o.side.bootstrap, o.topic, o.partitions)
    if args.drop_caches:
        # Every round starts with the page cache empty: a full cache makes each new page a
        # reclaim first, which swung earlier rounds' CPU per GB from 4.1 to 6.8 CPU-s/GB.
        empty_page_cache()
    else:
        os.sync()  # write back what the last round left dirty before this one
    ctx = mp.get_context("fork")
    # --whole-requests: a replayer process per connection, each request naming every
    # partition of its owner, as a client's one Produce request per broker does
    per_owner = conns if args.whole_requests else 1
    go = ctx.Barrier(len(owners) * per_owner + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=_replayer, args=(o.side.bootstrap, o.topic, o.partitions,
                                                 args, 1 if args.whole_requests else conns,
                                                 go, out), daemon=True)
             for o in owners for _ in range(per_owner)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    cpu0 = [o.side.cpu_s() for o in owners]
    ticks0 = machine_ticks()
    go.wait()
    t0 = time.monotonic()
    results = [out.get(timeout=args.seconds + 120) for _ in procs]
    wall = time.monotonic() - t0
    ticks1 = machine_ticks()
    cpu = [o.side.cpu_s() - c for o, c in zip(owners, cpu0, strict=True)]
    for p in procs:
        p.join(timeout=30)
    for o in {o.topic: o for o in owners}.values():
        delete_topic(o.side.bootstrap, o.topic)
    produced = sum(r[0] for r in results)
    for r in results:
        for e in r[3]:
            log(f"  replay error: {e}")
    return Round(mbs=produced / wall / 1e6, cores=sum(cpu) / wall,
                 per_owner=[c / wall for c in cpu],
                 cpu_gb=sum(cpu) / (produced / 1e9) if produced else float("nan"),
                 replayer_cores=sum(r[2] for r in results) / wall,
                 machine=machine_cores(ticks0, ticks1, wall))


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
    ap.add_argument("--workers", type=int, default=0,
                    help="also one broker of this many workers (skiff.broker.workers) with "
                    "every partition")
    ap.add_argument("--whole-requests", action="store_true",
                    help="each connection's requests name all of its owner's partitions "
                    "(a replayer process per connection), as librdkafka and the Java "
                    "client send one Produce request per broker; by default connection c "
                    "carries the partitions p with p %% connections == c")
    ap.add_argument("--only-workers", action="store_true",
                    help="with --workers: that broker and the one process only")
    ap.add_argument("--cluster", action="store_true", help="also --shards brokers of one "
                    "cluster (and a controller process), one topic led by them in turn")
    ap.add_argument("--skiff", action="append", default=[], type=key_value,
                    metavar="KEY=VALUE",
                    help="a Skiff key for every Skiff node of the run, over vs_kafka.py's "
                    "settings (e.g. log.drop.behind.bytes=67108864, Skiff's default, which "
                    "vs_kafka.py turns off to use the page cache as Kafka does)")
    add_keep_caches_option(ap)
    args = ap.parse_args(argv)
    skiff_keys = dict(args.skiff)
    check_drop_caches(ap, args)
    if args.partitions % args.shards or args.connections % args.shards:
        ap.error("--partitions and --connections must divide by --shards")
    every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    work = Path(tempfile.mkdtemp(prefix="skiff-shard-"))
    print(f"{args.shards} owners x {args.partitions // args.shards} partitions against 1 x "
          f"{args.partitions}; {args.connections} connections x {args.inflight} in flight, "
          f"{args.size} B records in {args.batch_bytes} B batches, {args.seconds:.0f} s per "
          f"round; {os.cpu_count()} CPUs, load {load()}", flush=True)
    nodes: list[Side] = []
    others: list[Side] = []  # brokers not among the independent nodes
    cluster: Cluster | None = None
    figures: dict[tuple[str, str], list[Round]] = {}
    try:
        nodes = [start_skiff(work, skiff_keys)
                 for _ in range(1 if args.only_workers else args.shards)]
        configs: dict[str, Callable[[], list[Owner]]] = {
            "1 process": lambda: independent(nodes[:1], args.partitions)}
        if not args.only_workers:
            configs[f"{args.shards} processes"] = lambda: independent(nodes, args.partitions)
        if args.workers:
            sharded = start_skiff(work, {**skiff_keys, "skiff.broker.workers": str(args.workers),
                                         "metrics.listeners": ""})
            others.append(sharded)
            configs[f"1 broker, {args.workers} workers"] = (
                lambda: independent([sharded], args.partitions))
        if args.cluster:
            cluster = Cluster(work / "cluster", controllers=1, brokers=args.shards,
                              overrides={**COMMON_CONFIG, **SKIFF_ONLY_CONFIG, **skiff_keys})
            cluster.start(timeout=300)
            c = cluster

            def pids_of(node_id: int) -> list[int]:
                return [c.nodes[node_id].pid]

            brokers = [Side(f"broker {i}", c.nodes[i].bootstrap,
                            functools.partial(pids_of, i), lambda: None)
                       for i in c.broker_ids]
            configs[f"{args.shards} brokers, 1 cluster"] = (
                lambda: one_cluster(c, brokers, args.partitions))
        run(configs[list(configs)[-1]](), args)  # warm-up, not counted
        for rep in range(args.repeats):
            for name, setup in configs.items():
                for placement in ("all cores", f"pinned to CPU {args.cpu}"):
                    cpus = every if placement == "all cores" else args.cpu
                    owners = setup()
                    for o in owners:
                        pin(o.side.pids()[0], cpus)
                    r = run(owners, args)
                    for o in owners:
                        pin(o.side.pids()[0], every)
                    figures.setdefault((name, placement), []).append(r)
                    per = " + ".join(f"{c:.2f}" for c in r.per_owner)
                    log(f"  round {rep + 1}, {name}, {placement}: {r.mbs:.1f} MB/s, broker "
                        f"{r.cores:.2f} cores ({per}), {r.cpu_gb:.2f} CPU-s/GB, "
                        f"replayers {r.replayer_cores:.2f} cores")
                    m = r.machine
                    busy = sum(v for k, v in m.items() if k not in ("idle", "iowait"))
                    log(f"    the machine: busy {busy:.2f} cores (user {m['user']:.2f}, "
                        f"system {m['system']:.2f}, softirq {m['softirq']:.2f}, steal "
                        f"{m['steal']:.2f}), idle {m['idle']:.2f}, iowait {m['iowait']:.2f}; "
                        f"neither broker nor replayers {busy - r.cores - r.replayer_cores:.2f}")
        if cluster is not None:
            ctl = cluster.nodes[cluster.controller_ids[0]].pid
            log(f"  the cluster's controller process used {perf.broker_cpu_s(ctl) or 0:.1f} "
                "CPU-s since its start (not counted as broker CPU above)")
    finally:
        for side in nodes + others:
            side.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)

    def med(name: str, placement: str, key: str) -> float:
        return float(statistics.median(getattr(r, key) for r in figures[(name, placement)]))

    print(f"\n{'':<24} {'all cores MB/s':>15} {'broker cores':>13} {'CPU-s/GB':>9} "
          f"{'pinned MB/s':>12} {'all / pinned':>13}   (medians of {args.repeats})")
    for name in configs:
        free, one = (name, "all cores"), (name, f"pinned to CPU {args.cpu}")
        print(f"{name:<24} {med(*free, 'mbs'):>15.1f} {med(*free, 'cores'):>13.2f} "
              f"{med(*free, 'cpu_gb'):>9.2f} {med(*one, 'mbs'):>12.1f} "
              f"{med(*free, 'mbs') / med(*one, 'mbs'):>13.2f}")
    print(f"load at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
