"""Skiff against Apache Kafka 4.4, side by side in one run (issue 33), run by hand.

Both brokers run on this machine with the same settings where they share a key: one
combined broker+controller node (three for the cluster figures), the same partitions and
replication, no fsync (log.flush.interval.messages at Long.MAX, Kafka's default), the page
cache used as Kafka uses it (Skiff's drop-behind off: log.drop.behind.bytes=-1), and
group.initial.rebalance.delay.ms=0 for both. Kafka's JVM gets kafka-server-start.sh's
settings (G1, -Xmx1G -Xms1G) and an uncounted warm-up round before the timed ones (Skiff gets
the same round). The cases alternate between the brokers (Skiff first, then Kafka first on
the next repeat), both brokers up at once, and every figure prints Skiff, Kafka and
Skiff / Kafka. Broker CPU is utime+stime of the broker processes (and their children) from
/proc/PID/stat; RSS is VmRSS from /proc/PID/status.

Figures (positional; default all but `partitions`, which is slow):

  throughput  produce and consume throughput, 1 and 3 producers, 100 B and 1 KB records,
              with Kafka's kafka-producer-perf-test / kafka-consumer-perf-test (one consumer;
              -Xmx512M and G1 as their scripts give) and with librdkafka (confluent_kafka;
              as many consumers as producers, each assigned its share of the partitions);
              broker CPU-s per GB produced and consumed
  latency     end-to-end latency p50/p99/p99.9 at fixed rates (default 1,000 and 50,000
              records/s), linger.ms=0, acks=all, 1 partition (bench/perf.py's phase)
  footprint   cold start to ready (spawn until the client port answers Metadata; Kafka's
              `kafka-storage format` timed apart), RSS idle and after --rss-records records
              (written with the replayer), on a fresh pair of brokers
  replay      broker-bound produce and fetch with bench/replay.py (pre-encoded requests,
              little client CPU): throughput, broker cores used (CPU-s / wall-s), CPU-s per
              GB; with --taskset CPU also the Skiff broker pinned to that one core; with
              --py-spy PATH a py-spy profile of the Skiff broker during its produce, printed
              as each function's CPU-s per GB
  steady      produce at the JVM's steady state: --steady-rounds rounds of --steady-mb MB
              with one kafka-producer-perf-test of --steady-size B records, each side in
              turn on the same pair of brokers; each round prints the broker's user and
              system CPU-s per GB and the cores the broker and the perf-test's JVM used;
              only the last --steady-counted rounds count (the table gives the ratio
              of their medians and its 95% bootstrap interval). The
              throughput figure's rounds are 200 MB after one warm-up case, while the
              JIT is still compiling Kafka's produce path (docs/benchmarks.md)
  rf3         3 nodes, RF=3, min.insync.replicas=2: produce throughput with acks=1 and
              acks=all (librdkafka, 100 B records, 3 partitions)
  failover    on the 3 nodes: kill -9 of the broker leading a partition (not the active
              controller) until a record produced after the kill is acknowledged (the
              producer's view); kill -9 of the active controller until a CreateTopics
              through a surviving broker succeeds
  partitions  --partition-counts partitions (topics of 100, RF=1) on the 3 nodes: the
              CreateTopics time, the time until every broker serves them all with a leader,
              each node's RSS

    PYTHONPATH=. python bench/vs_kafka.py                      # the default figures
    PYTHONPATH=. python bench/vs_kafka.py throughput --mb 100 --repeats 3
    PYTHONPATH=. python bench/vs_kafka.py replay --taskset 1
    PYTHONPATH=. python bench/vs_kafka.py partitions --partition-counts 10000,100000
    PYTHONPATH=. python bench/vs_kafka.py --smoke ...          # tiny sizes: that it works
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import perf, replay  # noqa: E402
from bench.cluster_bench import direct_metadata, rss_mb  # noqa: E402
from broker.cli.server import dev_workers  # noqa: E402
from broker.config import env_key  # noqa: E402
from broker.node.shards import WORKERS_KEY  # noqa: E402
from broker.protocol.kafka_uuid import random_kafka_uuid  # noqa: E402
from broker.testing.cluster import Cluster, _describe_quorum_leader  # noqa: E402
from broker.testing.kafka_ref import (  # noqa: E402
    BROKER_JVM_OPTS,
    KAFKA_VERSION,
    PERF_TOOL_JVM_OPTS,
    KafkaCluster,
    KafkaNode,
    kafka_classpath,
)
from broker.testing.node import (  # noqa: E402
    DEV_WORKERS_ENV,
    SkiffNode,
    admin_answers,
    tcp_connects,
)

FIGURES = ["throughput", "latency", "footprint", "replay", "rf3", "failover", "partitions",
           "steady"]
DEFAULT_FIGURES = [f for f in FIGURES if f not in ("partitions", "steady")]
SIDES = ("skiff", "kafka")
LONG_MAX = str(2**63 - 1)
# Keys both brokers take, set alike (the defaults of both, written out, except the delay).
COMMON_CONFIG = {
    "log.flush.interval.messages": LONG_MAX,
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}
# Skiff's own keys, set to behave as Kafka does: no drop-behind, the page cache as Kafka uses it.
SKIFF_ONLY_CONFIG = {"log.drop.behind.bytes": "-1"}
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load()}] {msg}", flush=True)


# ------------------------------------------------------------------------ brokers

@dataclass
class Side:
    """One broker or cluster under test."""

    name: str
    bootstrap: str
    pids: Callable[[], list[int]]
    stop: Callable[[], None]
    kill: Callable[[int], object] = lambda _node_id: None  # kill -9 a node
    restart: Callable[[int], None] = lambda _node_id: None  # start it again, until ready
    controller_ports: Callable[[], dict[int, int]] = dict  # running node id -> port
    client_ports: dict[int, int] = field(default_factory=dict)
    started_s: float = 0.0

    def cpu_s(self) -> float:
        return sum(perf.broker_cpu_s(p) or 0.0 for p in self.pids())

    def rss_mb(self) -> float:
        total = 0.0
        for pid in self.pids():
            for p in perf.process_tree(pid):
                with contextlib.suppress(OSError):
                    total += rss_mb(p)
        return total


def skiff_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    cfg = {**COMMON_CONFIG, **SKIFF_ONLY_CONFIG, **(extra or {})}
    return {"SKIFF_" + k.upper().replace(".", "_"): v for k, v in cfg.items()}


def wait_serving(bootstrap: str, alive: Callable[[], bool], timeout: float = 180.0) -> None:
    """Until the client port accepts and answers Metadata naming a broker (both sides alike)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the broker on {bootstrap} exited before it was ready")
        if tcp_connects(host, int(port), timeout=0.2) and admin_answers(bootstrap, 2.0):
            return
        time.sleep(0.02)
    raise TimeoutError(f"{bootstrap} not ready after {timeout:.0f} s")


def start_skiff(work: Path, extra: dict[str, str] | None = None) -> Side:
    node = SkiffNode(work / f"skiff-{uuid.uuid4().hex[:6]}", config_env=skiff_env(extra))
    t0 = time.monotonic()
    node.start()
    try:
        wait_serving(node.bootstrap, lambda: node.running)
    except BaseException:
        print(node.log_tail(), flush=True)
        node.close()
        raise
    return Side("skiff", node.bootstrap, lambda: [node.pid] if node.running else [],
                node.close, started_s=time.monotonic() - t0)


def start_kafka(work: Path) -> tuple[Side, float]:
    """(the node, the seconds `kafka-storage format` took before the start)."""
    node = KafkaNode(work / f"kafka-{uuid.uuid4().hex[:6]}", overrides=COMMON_CONFIG)
    t0 = time.monotonic()
    node.format(random_kafka_uuid())
    formatted = time.monotonic() - t0
    t1 = time.monotonic()
    node.start()
    try:
        wait_serving(node.bootstrap, lambda: node.running)
    except BaseException:
        print(node.log_tail(), flush=True)
        node.close()
        raise
    return Side("kafka", node.bootstrap, lambda: [node.pid] if node.running else [],
                node.close, started_s=time.monotonic() - t1), formatted


def start_skiff_cluster(work: Path, nodes: int = 3) -> Side:
    c = Cluster(work / "skiff-cluster", nodes, combined=True,
                overrides={**COMMON_CONFIG, **SKIFF_ONLY_CONFIG})
    t0 = time.monotonic()
    c.start(timeout=300)

    def restart(node_id: int) -> None:
        c.start_node(node_id)
        c.wait_ready(300)

    return Side("skiff", c.bootstrap_servers,
                lambda: [n.pid for n in c.nodes.values() if n.running], c.stop,
                kill=c.kill, restart=restart,
                controller_ports=lambda: {i: int(n.controller_port or 0)
                                          for i, n in c.nodes.items() if n.running},
                client_ports={i: int(n.client_port or 0) for i, n in c.nodes.items()},
                started_s=time.monotonic() - t0)


def start_kafka_cluster(work: Path, nodes: int = 3) -> Side:
    k = KafkaCluster(work / "kafka-cluster", nodes, overrides=COMMON_CONFIG)
    t0 = time.monotonic()
    try:  # KafkaCluster.start's steps, with the patience a loaded machine needs
        cluster_id = k.new_cluster_id()
        for n in k.nodes:
            n.format(cluster_id, standalone=False)
        for n in k.nodes:
            n.start()
        for n in k.nodes:
            n.wait_ready(timeout=300)
        wait_serving(k.bootstrap, lambda: all(n.running for n in k.nodes), timeout=300)
    except BaseException:
        k.close()
        raise
    by_id = {n.node_id: n for n in k.nodes}

    def restart(node_id: int) -> None:
        by_id[node_id].start()
        by_id[node_id].wait_ready(timeout=300)
        wait_serving(by_id[node_id].bootstrap, lambda: by_id[node_id].running)

    return Side("kafka", k.bootstrap, lambda: [n.pid for n in k.nodes if n.running], k.close,
                kill=lambda i: by_id[i].kill(), restart=restart,
                controller_ports=lambda: {n.node_id: n.controller_port for n in k.nodes
                                          if n.running},
                client_ports={n.node_id: n.port for n in k.nodes},
                started_s=time.monotonic() - t0)


@contextlib.contextmanager
def pair(work: Path, clusters: bool = False) -> Iterator[dict[str, Side]]:
    sides: dict[str, Side] = {}
    try:
        if clusters:
            sides["skiff"] = start_skiff_cluster(work)
            sides["kafka"] = start_kafka_cluster(work)
        else:
            sides["skiff"] = start_skiff(work)
            sides["kafka"], _ = start_kafka(work)
        for s in sides.values():
            log(f"{s.name}: {s.bootstrap}, pids {s.pids()}, started in {s.started_s:.1f} s")
        yield sides
    finally:
        for s in sides.values():
            with contextlib.suppress(Exception):
                s.stop()


def order(repeat: int) -> tuple[str, str]:
    return SIDES if repeat % 2 == 0 else SIDES[::-1]


# ------------------------------------------------------------------------ results

@dataclass
class Row:
    figure: str
    label: str
    unit: str
    better: str  # "higher" or "lower"
    values: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})

    def value(self, side: str) -> float | None:
        v = [x for x in self.values[side] if x == x]  # drop NaN
        return statistics.median(v) if v else None

    def ratio(self) -> float | None:
        s, k = self.value("skiff"), self.value("kafka")
        return s / k if s is not None and k else None

    def interval(self) -> tuple[float, float] | None:
        """The ratio's 95% bootstrap interval, with three runs a side or more."""
        s, k = ([x for x in self.values[n] if x == x] for n in SIDES)
        if len(s) < 3 or len(k) < 3 or 0 in k:
            return None
        return ratio_interval(s, k)


class Table:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Row] = {}

    def add(self, figure: str, label: str, unit: str, better: str, side: str,
            value: float | None) -> None:
        row = self.rows.setdefault((figure, label), Row(figure, label, unit, better))
        if value is not None:
            row.values[side].append(value)

    def show(self) -> None:
        print(f"\n{'figure':<11} {'case':<46} {'unit':<11} {'skiff':>11} {'kafka':>11} "
              f"{'skiff/kafka':>11} {'95% interval':>12}  better")
        for r in self.rows.values():
            s, k, q, i = r.value("skiff"), r.value("kafka"), r.ratio(), r.interval()
            spread = f"{i[0]:.2f}-{i[1]:.2f}" if i is not None else ""
            print(f"{r.figure:<11} {r.label:<46} {r.unit:<11} {fmt(s):>11} {fmt(k):>11} "
                  f"{fmt(q, '.2f'):>11} {spread:>12}  {r.better}"
                  + (f"  (runs: {len(r.values['skiff'])}/{len(r.values['kafka'])})"
                     if max(len(v) for v in r.values.values()) > 1 else ""))

    def as_json(self) -> list[dict[str, Any]]:
        return [{"figure": r.figure, "case": r.label, "unit": r.unit, "better": r.better,
                 "skiff": r.values["skiff"], "kafka": r.values["kafka"], "ratio": r.ratio(),
                 "interval": r.interval()}
                for r in self.rows.values()]


def fmt(v: float | None, spec: str | None = None) -> str:
    if v is None:
        return "n/a"
    if spec:
        return format(v, spec)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"


# ------------------------------------------------------------------------ clients

def create_topic(bootstrap: str, name: str, partitions: int, rf: int = 1,
                 configs: dict[str, str] | None = None,
                 assignment: list[list[int]] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    topic = (NewTopic(name, len(assignment), replica_assignment=assignment,
                      config=configs or {}) if assignment
             else NewTopic(name, partitions, rf, config=configs or {}))
    admin.create_topics([topic], operation_timeout=60)[name].result(120)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == len(p.replicas)
                        for p in md.partitions.values())):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{name} not led with a full ISR in 120 s")


def delete_topic(bootstrap: str, name: str) -> None:
    """A case's topic, deleted once its figures are taken: a full run with --repeats 3
    writes more than this machine's disk holds (each side's replay rounds alone write
    7-10 GB). Both sides then remove the files after their file.delete.delay.ms."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        admin.delete_topics([name], operation_timeout=60)[name].result(120)
    except Exception as e:  # the figures stand; the disk is the only loser
        log(f"  deleting {name} on {bootstrap} failed: {e}")


def _rdkafka_producer(bootstrap: str, topic: str, partitions: int, count: int, size: int,
                      go: Any, out: Any) -> None:
    go.wait()
    perf.producer_proc(bootstrap, topic, partitions, count, size, "none", out)


def _rdkafka_consumer(bootstrap: str, topic: str, ends: dict[int, int], go: Any,
                      out: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-kafka-unused",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                  "fetch.wait.max.ms": 100, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, "log_level": 3})
    c.assign([TopicPartition(topic, p, 0) for p in ends])
    expect = sum(ends.values())
    go.wait()
    got = nbytes = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < expect and time.monotonic() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    t1 = time.perf_counter()
    c.close()
    out.put({"elapsed_s": t1 - t0, "messages": got, "bytes": nbytes})


def _together(target: Any, arg_lists: list[tuple[Any, ...]], timeout: float = 900
              ) -> list[dict[str, Any]]:
    """`target(*args, go, queue)` in one spawned process per args, released together."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    queues = [ctx.Queue() for _ in arg_lists]
    procs = [ctx.Process(target=target, args=(*a, go, q)) for a, q in zip(arg_lists, queues,
                                                                          strict=True)]
    for p in procs:
        p.start()
    time.sleep(0.5)  # their imports (a spawned interpreter) before the start signal
    go.set()
    deadline = time.monotonic() + timeout
    answers: list[dict[str, Any] | None] = [None] * len(queues)
    try:
        while any(a is None for a in answers):
            for i, q in enumerate(queues):
                if answers[i] is None:
                    with contextlib.suppress(queue.Empty):
                        answers[i] = q.get(timeout=0.2)
                    if answers[i] is None and not procs[i].is_alive() and q.empty():
                        raise RuntimeError(f"{target.__name__} exited with "
                                           f"{procs[i].exitcode} without an answer")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target.__name__}: no answer in {timeout:.0f} s")
        return [a for a in answers if a is not None]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def perf_tool(main_class: str, args: list[str], count: int, timeout: float = 900
              ) -> list[subprocess.Popen[str]]:
    cp = kafka_classpath()
    return [subprocess.Popen(["java", *PERF_TOOL_JVM_OPTS, "-cp", cp, main_class, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(count)]


SENT = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def perf_test_produce(bootstrap: str, topic: str, records: int, size: int, producers: int
                      ) -> tuple[float, float, list[str]]:
    """kafka-producer-perf-test in `producers` JVMs at once: (records/s, MB/s, problems)."""
    share = records // producers
    procs = perf_tool(PRODUCER_PERF, [
        "--topic", topic, "--num-records", str(share), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
        producers)
    elapsed, problems = [], []
    for p in procs:
        out, err = p.communicate(timeout=900)
        found = SENT.findall(out)
        if p.returncode != 0 or not found:
            problems.append(f"producer-perf-test exit {p.returncode}: {err[-500:]}")
            continue
        n, rate, _ = found[-1]
        elapsed.append(int(n) / float(rate))
    if not elapsed:
        return float("nan"), float("nan"), problems
    wall = max(elapsed)
    return share * len(elapsed) / wall, share * len(elapsed) * size / wall / 1e6, problems


def perf_test_consume(bootstrap: str, topic: str, records: int) -> tuple[float, float, list[str]]:
    """kafka-consumer-perf-test, one consumer: (records/s, MB/s) while fetching (its
    fetch.* columns, without the group join)."""
    (p,) = perf_tool(CONSUMER_PERF, [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", f"perf-{uuid.uuid4().hex[:6]}", "--timeout", "60000"], 1)
    out, err = p.communicate(timeout=900)
    lines = [x for x in out.splitlines() if x.strip()]
    head = next((i for i, x in enumerate(lines) if x.startswith("start.time")), None)
    if p.returncode != 0 or head is None or head + 1 >= len(lines):
        return float("nan"), float("nan"), [f"consumer-perf-test exit {p.returncode}: "
                                            f"{out[-300:]} {err[-300:]}"]
    cols = dict(zip([c.strip() for c in lines[head].split(",")],
                    [v.strip() for v in lines[head + 1].split(",")], strict=False))
    problems = []
    if int(float(cols["data.consumed.in.nMsg"])) < records:
        problems.append(f"consumer-perf-test read {cols['data.consumed.in.nMsg']} of {records}")
    return float(cols["fetch.nMsg.sec"]), float(cols["fetch.MB.sec"]) * 1.048576, problems


# ------------------------------------------------------------------------ figures

def throughput_case(side: Side, client: str, producers: int, size: int, records: int,
                    partitions: int) -> dict[str, float]:
    topic = f"tp-{client}-{producers}-{size}-{uuid.uuid4().hex[:6]}"
    create_topic(side.bootstrap, topic, partitions)
    problems: list[str] = []
    cpu0 = side.cpu_s()
    if client == "perf-test":
        p_rps, p_mbs, probs = perf_test_produce(side.bootstrap, topic, records, size, producers)
        problems += probs
    else:
        share = records // producers
        res = _together(_rdkafka_producer, [(side.bootstrap, topic, partitions, share, size)
                                            for _ in range(producers)])
        problems += [f"{r['undelivered']} undelivered, {r['errors']} errors" for r in res
                     if r["undelivered"] or r["errors"]]
        wall = max(r["elapsed_s"] for r in res)
        p_rps, p_mbs = share * producers / wall, share * producers * size / wall / 1e6
    cpu1 = side.cpu_s()
    ends = replay.end_offsets(side.bootstrap, topic, range(partitions))
    written = sum(ends.values())
    if written != (records // producers) * producers:
        problems.append(f"end offsets sum to {written}")
    if client == "perf-test":
        c_rps, c_mbs, probs = perf_test_consume(side.bootstrap, topic, written)
        problems += probs
    else:
        shares = [{p: ends[p] for p in range(partitions) if p % producers == i}
                  for i in range(producers)]
        res = _together(_rdkafka_consumer, [(side.bootstrap, topic, s) for s in shares])
        got = sum(r["messages"] for r in res)
        if got != written:
            problems.append(f"consumed {got} of {written}")
        wall = max(r["elapsed_s"] for r in res)
        c_rps, c_mbs = got / wall, sum(r["bytes"] for r in res) / wall / 1e6
    cpu2 = side.cpu_s()
    delete_topic(side.bootstrap, topic)
    gb = written * size / 1e9
    for p in problems:
        log(f"  {side.name} {client}: {p}")
    return {"produce_rps": p_rps, "produce_mbs": p_mbs, "consume_rps": c_rps,
            "consume_mbs": c_mbs, "cpu_gb_produced": (cpu1 - cpu0) / gb,
            "cpu_gb_consumed": (cpu2 - cpu1) / gb}


def fig_throughput(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    cases = [(c, n, s) for c in args.clients for n in args.producers for s in args.sizes]
    if not args.no_warmup:
        c, n, s = cases[0]
        for name in SIDES:
            log(f"warm-up round (not counted): {name} {c} {n}x{s} B")
            throughput_case(sides[name], c, n, s, records_for(args, s), args.partitions)
    for rep in range(args.repeats):
        for client, n, size in cases:
            for name in order(rep):
                r = throughput_case(sides[name], client, n, size, records_for(args, size),
                                    args.partitions)
                label = f"{client} {n}p x {size} B"
                cons = (f"{client} {n}c x {size} B" if client == "rdkafka"
                        else f"{client} 1c x {size} B (of {n}p's)")
                log(f"  {name} {label}: produce {r['produce_rps']:,.0f} rec/s "
                    f"{r['produce_mbs']:.1f} MB/s ({r['cpu_gb_produced']:.2f} CPU-s/GB), "
                    f"consume {r['consume_rps']:,.0f} rec/s {r['consume_mbs']:.1f} MB/s "
                    f"({r['cpu_gb_consumed']:.2f} CPU-s/GB)")
                table.add("throughput", f"produce {label}", "rec/s", "higher", name,
                          r["produce_rps"])
                table.add("throughput", f"consume {cons}", "rec/s", "higher", name,
                          r["consume_rps"])
                table.add("cpu", f"produced, {label}", "CPU-s/GB", "lower", name,
                          r["cpu_gb_produced"])
                table.add("cpu", f"consumed, {cons}", "CPU-s/GB", "lower", name,
                          r["cpu_gb_consumed"])


def user_system_s(side: Side) -> tuple[float, float]:
    """utime and stime of the side's broker processes and their children."""
    user = system = 0.0
    for pid in side.pids():
        u, s = perf.tree_user_system_s(pid)
        user, system = user + u, system + s
    return user, system


def children_cpu_s() -> float:
    """CPU-s of this process's reaped children (a perf-test JVM once it has exited)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ratio_interval(skiff: list[float], kafka: list[float], resamples: int = 10_000,
                   seed: int = 33) -> tuple[float, float]:
    """A 95% bootstrap interval of median(skiff) / median(kafka): how far the ratio of a
    few noisy rounds can be trusted (nan with fewer than two rounds a side)."""
    if len(skiff) < 2 or len(kafka) < 2:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(skiff, k=len(skiff)))
        / statistics.median(rng.choices(kafka, k=len(kafka)))
        for _ in range(resamples))
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def fig_steady(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    size, mb = args.steady_size, args.steady_mb
    records = max(1000, int(mb * 1e6 / size))
    gb = records * size / 1e9
    first_counted = max(0, args.steady_rounds - args.steady_counted)
    label = f"perf-test 1p x {size} B, rounds {first_counted + 1}-{args.steady_rounds}"
    for rnd in range(args.steady_rounds):
        counted = rnd >= first_counted
        for name in order(rnd):
            side = sides[name]
            topic = f"steady-{uuid.uuid4().hex[:6]}"
            create_topic(side.bootstrap, topic, args.partitions)
            # An empty page cache (when root) and no topic deleted: Kafka unlinks a deleted
            # topic's files 60 s later, inside some later round, and with the cache full
            # from the earlier rounds each side's system CPU per GB went up sixfold.
            if os.access(DROP_CACHES, os.W_OK):
                empty_page_cache()
            else:
                flush_page_cache()
            u0, s0 = user_system_s(side)
            c0, t0 = children_cpu_s(), time.monotonic()
            _rps, mbs, problems = perf_test_produce(side.bootstrap, topic, records, size, 1)
            c1, wall = children_cpu_s(), time.monotonic() - t0
            u1, s1 = user_system_s(side)
            for p in problems:
                log(f"  {name}: {p}")
            user, system = (u1 - u0) / gb, (s1 - s0) / gb
            log(f"  round {rnd + 1}{'' if counted else ' (not counted)'} {name}: "
                f"{mbs:.1f} MB/s, broker CPU-s per GB user {user:.2f} system {system:.2f} "
                f"total {user + system:.2f}; cores used: broker "
                f"{(u1 - u0 + s1 - s0) / wall:.2f}, perf-test's JVM {(c1 - c0) / wall:.2f}")
            if counted:
                table.add("steady", f"produce MB/s, {label}", "MB/s", "higher", name, mbs)
                table.add("steady", f"broker user CPU-s per GB, {label}", "CPU-s/GB",
                          "lower", name, user)
                table.add("steady", f"broker system CPU-s per GB, {label}", "CPU-s/GB",
                          "lower", name, system)
                table.add("steady", f"broker CPU-s per GB, {label}", "CPU-s/GB", "lower",
                          name, user + system)


def records_for(args: argparse.Namespace, size: int) -> int:
    return max(1000, int(args.mb * 1e6 / size) // 3 * 3)


def flush_page_cache() -> None:
    """Write back what earlier phases left dirty before a latency round. Otherwise the
    kernel writes gigabytes back ~30 s later, in the middle of whichever side's round comes
    then: a Skiff round after 2 GB of replayed produce stalled 0.44-0.50 s in one round of
    two, twice, and not once in three rounds after a sync (docs/benchmarks.md)."""
    t0 = time.monotonic()
    os.sync()
    if time.monotonic() - t0 > 1.0:
        log(f"  (page cache written back before the round: {time.monotonic() - t0:.1f} s)")


DROP_CACHES = "/proc/sys/vm/drop_caches"


def add_keep_caches_option(ap: argparse.ArgumentParser) -> None:
    """`--keep-caches` (args.drop_caches False): for benchmarks that empty the page cache
    before each round, which needs root; `check_drop_caches` refuses a run without it."""
    ap.add_argument("--keep-caches", dest="drop_caches", action="store_false",
                    help="do not empty the page cache before each round (needs root)")


def check_drop_caches(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.drop_caches and not os.access(DROP_CACHES, os.W_OK):
        ap.error("emptying the page cache before each round needs root; --keep-caches "
                 "runs without it (the rounds then vary with the cache's state)")


def empty_page_cache() -> None:
    """Write back what is dirty, then drop the clean page cache: a full cache makes each new
    page a reclaim first, which swung replayed produce rounds by half (docs/benchmarks.md)."""
    os.sync()
    with open(DROP_CACHES, "w") as f:
        f.write("1\n")


def fig_latency(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    if not args.no_warmup:
        ns = argparse.Namespace(rate=args.rates[0], latency_seconds=args.latency_seconds,
                                warmup_seconds=0.0, drain_seconds=10.0, size=args.latency_size)
        for name in SIDES:
            side = sides[name]
            flush_page_cache()
            r = perf.bench_latency(perf.Broker(name, side.bootstrap, side.pids()[0]), ns,
                                   perf.Result(name, 0, args.latency_size))
            log(f"warm-up round (not counted): {name} {args.rates[0]:,}/s p50 "
                f"{r.latency_p50_ms:.2f} p99 {r.latency_p99_ms:.2f} ms")
    for rep in range(args.repeats):
        for rate in args.rates:
            ns = argparse.Namespace(rate=rate, latency_seconds=args.latency_seconds,
                                    warmup_seconds=min(2.0, args.latency_seconds / 4),
                                    drain_seconds=10.0, size=args.latency_size)
            for name in order(rep):
                side = sides[name]
                b = perf.Broker(name, side.bootstrap, side.pids()[0])
                flush_page_cache()
                r = perf.bench_latency(b, ns, perf.Result(name, 0, args.latency_size))
                log(f"  {name} {rate:,.0f}/s: p50 {r.latency_p50_ms:.2f} p99 "
                    f"{r.latency_p99_ms:.2f} p99.9 {r.latency_p999_ms:.2f} ms, "
                    f"{r.latency_samples} samples; {'; '.join(r.notes)}; p50 per second "
                    f"{r.latency_p50_by_second_ms}")
                for q, v in (("p50", r.latency_p50_ms), ("p99", r.latency_p99_ms),
                             ("p99.9", r.latency_p999_ms)):
                    table.add("latency", f"e2e {q} at {rate:,.0f} rec/s", "ms", "lower", name, v)


def fig_footprint(work: Path, args: argparse.Namespace, table: Table) -> None:
    for rep in range(args.repeats):
        for name in order(rep):
            if name == "skiff":
                side, formatted = start_skiff(work), None
            else:
                side, formatted = start_kafka(work)
            try:
                log(f"  {name}: ready {side.started_s:.2f} s after spawn"
                    + (f" (kafka-storage format before it: {formatted:.2f} s)"
                       if formatted is not None else " (formats its own storage)"))
                table.add("footprint", "cold start to ready", "s", "lower", name,
                          side.started_s)
                if formatted is not None:
                    table.add("footprint", "cold start incl. kafka-storage format", "s",
                              "lower", name, side.started_s + formatted)
                else:
                    table.add("footprint", "cold start incl. kafka-storage format", "s",
                              "lower", name, side.started_s)
                idle = side.rss_mb()
                table.add("footprint", "RSS idle", "MB", "lower", name, idle)
                topic = f"rss-{uuid.uuid4().hex[:6]}"
                create_topic(side.bootstrap, topic, args.partitions)
                replay.wait_writable(side.bootstrap, topic, range(args.partitions))
                per_batch = max(1, 16384 // args.rss_size)
                conns = min(3, args.partitions)
                per_req = per_batch * -(-args.partitions // conns)  # one batch per partition
                r = replay.replay_produce(side.bootstrap, topic, range(args.partitions),
                                          connections=conns,
                                          records_per_batch=per_batch, size=args.rss_size,
                                          requests=max(1, args.rss_records // per_req))
                after = side.rss_mb()
                log(f"  {name}: RSS idle {idle:.0f} MB, after {r.records:,} records of "
                    f"{args.rss_size} B {after:.0f} MB (written at {r.records_s:,.0f} rec/s"
                    f"{'; errors ' + str(r.errors[:3]) if r.errors else ''})")
                table.add("footprint", f"RSS after {r.records:,} x {args.rss_size} B", "MB",
                          "lower", name, after)
            finally:
                side.stop()


def pin(pid: int, cpus: str) -> None:
    """taskset on every thread of `pid` (and of its children)."""
    for p in perf.process_tree(pid):
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(p)], check=True,
                       capture_output=True)


def py_spy_binary() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(found, os.X_OK):
        raise SystemExit("--py-spy needs py-spy (pip install py-spy)")
    return found


def summarize_profile(raw: Path, gb: float, rate: int, top: int = 25) -> list[str]:
    """py-spy's collapsed stacks ("frame;frame;... count") as the functions' CPU-s per GB
    produced: self (the innermost frame) and total (anywhere on the stack)."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [f.strip() for f in stack.split(";")]
        samples += n
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            total[f] = total.get(f, 0) + n
    per_gb = 1 / rate / gb if gb else float("nan")
    out = [f"py-spy: {samples} samples at {rate} Hz = {samples / rate:.1f} CPU-s on Python "
           f"stacks over {gb:.3f} GB produced = {samples * per_gb:.2f} CPU-s/GB",
           f"{'self CPU-s/GB':>14} {'total CPU-s/GB':>15}  function (file)"]
    for f, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"{n * per_gb:>14.3f} {total[f] * per_gb:>15.3f}  {f}")
    out.append(f"{'':>14} {'total CPU-s/GB':>15}  the widest frames")
    for f, n in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"{'':>14} {n * per_gb:>15.3f}  {f}")
    return out


# An upper bound on a replayed produce's rate here, for the disk it needs per round.
REPLAY_MAX_BYTES_S = 700e6


def wait_for_disk(need_bytes: float, timeout_s: float = 90.0) -> None:
    """Wait until the temporary directory's file system has `need_bytes` free: both brokers
    keep a deleted topic's files for file.delete.delay.ms (60 s), and a full disk fails a
    log dir (2026-12-06: Skiff halted in a replay round, all log dirs failed, at ~390 MB/s
    over 30 s rounds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if free >= need_bytes:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{free / 1e9:.1f} GB free in {tempfile.gettempdir()}, a replay "
                             f"round needs {need_bytes / 1e9:.1f} GB: lower --replay-seconds")
        time.sleep(2.0)


def replay_case(side: Side, args: argparse.Namespace,
                profile_to: Path | None = None) -> dict[str, float]:
    wait_for_disk(REPLAY_MAX_BYTES_S * args.replay_seconds + 2e9)
    topic = f"replay-{uuid.uuid4().hex[:6]}"
    create_topic(side.bootstrap, topic, args.partitions)
    per_batch = max(1, args.replay_batch_bytes // args.replay_size)
    probe = replay.wait_writable(side.bootstrap, topic, range(args.partitions))
    spy = None
    if profile_to is not None:
        spy = subprocess.Popen(
            [py_spy_binary(), "record", "--pid", str(side.pids()[0]), "--duration",
             str(max(1, int(args.replay_seconds))), "--rate", str(args.py_spy_rate),
             "--format", "raw", "--nolineno", "--nonblocking", "--output", str(profile_to)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # py-spy attaches before the load starts
    cpu0 = side.cpu_s()
    r = replay.replay_produce(side.bootstrap, topic, range(args.partitions),
                              connections=args.replay_connections, inflight=args.replay_inflight,
                              records_per_batch=per_batch, size=args.replay_size,
                              seconds=args.replay_seconds,
                              idempotent=args.replay_idempotent)
    cpu1 = side.cpu_s()
    if spy is not None and profile_to is not None:
        _, err = spy.communicate(timeout=120)
        if profile_to.exists():
            lines = summarize_profile(profile_to, r.bytes / 1e9, args.py_spy_rate)
            profile_to.with_suffix(".summary.txt").write_text("\n".join(lines) + "\n")
            for line in lines:
                print("    " + line, flush=True)
        else:
            log(f"  py-spy wrote nothing: {err[-500:]}")
    ends = replay.end_offsets(side.bootstrap, topic, range(args.partitions))
    errors = list(r.errors)
    if sum(ends.values()) != r.records + probe:
        errors.append(f"end offsets sum to {sum(ends.values())}, {r.records} + {probe} "
                      "acknowledged")
    f = replay.replay_fetch(side.bootstrap, topic, ends, connections=args.replay_connections)
    cpu2 = side.cpu_s()
    delete_topic(side.bootstrap, topic)
    errors += f.errors
    for e in errors[:5]:
        log(f"  {side.name} replay: {e}")
    return {"produce_mbs": r.mb_s, "produce_rps": r.records_s,
            "produce_cores": (cpu1 - cpu0) / r.wall_s,
            "produce_cpu_gb": (cpu1 - cpu0) / (r.bytes / 1e9) if r.bytes else float("nan"),
            "client_cores": r.client_cpu_s / r.wall_s,
            "fetch_mbs": f.mb_s, "fetch_cores": (cpu2 - cpu1) / f.wall_s if f.wall_s else 0.0,
            "fetch_cpu_gb": (cpu2 - cpu1) / (f.bytes / 1e9) if f.bytes else float("nan"),
            "fetch_client_cores": f.client_cpu_s / f.wall_s if f.wall_s else 0.0}


def replay_label(args: argparse.Namespace) -> str:
    return (f"{args.replay_size} B, {args.partitions} partitions"
            + (", idempotent" if args.replay_idempotent else ""))


def fig_replay(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    profiled = False
    for rep in range(args.repeats + (0 if args.no_warmup else 1)):
        counted = args.no_warmup or rep > 0
        for name in order(rep):
            profile = None
            if args.py_spy and name == "skiff" and counted and not profiled:
                profile, profiled = Path(args.py_spy), True
            r = replay_case(sides[name], args, profile)
            log(f"  {name}{'' if counted else ' (warm-up, not counted)'}: produce "
                f"{r['produce_mbs']:.1f} MB/s, broker {r['produce_cores']:.2f} cores, "
                f"{r['produce_cpu_gb']:.2f} CPU-s/GB (replayer {r['client_cores']:.2f} cores); "
                f"fetch {r['fetch_mbs']:.1f} MB/s, broker {r['fetch_cores']:.2f} cores, "
                f"{r['fetch_cpu_gb']:.2f} CPU-s/GB (replayer {r['fetch_client_cores']:.2f})")
            if not counted:
                continue
            table.add("replay", f"produce MB/s, {replay_label(args)}", "MB/s", "higher", name,
                      r["produce_mbs"])
            table.add("replay", "broker cores during produce", "cores", "higher", name,
                      r["produce_cores"])
            table.add("replay", "broker CPU-s per GB produced", "CPU-s/GB", "lower", name,
                      r["produce_cpu_gb"])
            table.add("replay", "replayer cores during produce", "cores", "lower", name,
                      r["client_cores"])
            table.add("replay", "fetch MB/s", "MB/s", "higher", name, r["fetch_mbs"])
            table.add("replay", "broker CPU-s per GB fetched", "CPU-s/GB", "lower", name,
                      r["fetch_cpu_gb"])
            table.add("replay", "broker cores during fetch", "cores", "higher", name,
                      r["fetch_cores"])
            table.add("replay", "replayer cores during fetch", "cores", "lower", name,
                      r["fetch_client_cores"])
    if args.taskset is not None:
        skiff = sides["skiff"]
        every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        pin(skiff.pids()[0], args.taskset)
        try:
            for _ in range(args.repeats):
                r = replay_case(skiff, args)
                log(f"  skiff pinned to CPU {args.taskset}: produce {r['produce_mbs']:.1f} MB/s,"
                    f" broker {r['produce_cores']:.2f} cores, {r['produce_cpu_gb']:.2f} CPU-s/GB;"
                    f" fetch {r['fetch_mbs']:.1f} MB/s")
                table.add("replay", f"skiff pinned to 1 core: produce MB/s (CPU {args.taskset})",
                          "MB/s", "higher", "skiff", r["produce_mbs"])
                table.add("replay", "skiff pinned to 1 core: broker cores", "cores", "higher",
                          "skiff", r["produce_cores"])
        finally:
            pin(skiff.pids()[0], every)
        free = table.rows.get(("replay", f"produce MB/s, {replay_label(args)}"))
        one = table.rows.get(("replay", f"skiff pinned to 1 core: produce MB/s "
                                        f"(CPU {args.taskset})"))
        if free and one and free.value("skiff") and one.value("skiff"):
            log(f"skiff produce, all cores / one core: "
                f"{(free.value('skiff') or 0) / (one.value('skiff') or 1):.2f} (goal >= 1.5)")


def fig_rf3(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    from bench.cluster_bench import run_producer

    topics = {}
    for name in SIDES:
        topics[name] = f"rf3-{uuid.uuid4().hex[:6]}"
        create_topic(sides[name].bootstrap, topics[name], 3, 3, {"min.insync.replicas": "2"})
        if not args.no_warmup:
            log(f"warm-up round (not counted): {name} acks=all")
            run_producer(sides[name].bootstrap, topics[name], args.rf3_records, "all")
    for rep in range(args.repeats):
        for acks in ("1", "all"):
            for name in order(rep):
                cpu0 = sides[name].cpu_s()
                rate, _ = run_producer(sides[name].bootstrap, topics[name], args.rf3_records,
                                       acks)
                cpu = sides[name].cpu_s() - cpu0
                gb = args.rf3_records * 100 / 1e9
                log(f"  {name} RF=3 acks={acks}: {rate:,.0f} rec/s, cluster "
                    f"{cpu / gb:.1f} CPU-s/GB")
                table.add("rf3", f"produce acks={acks}, 3p x 100 B, RF=3", "rec/s", "higher",
                          name, rate)
                table.add("rf3", f"cluster CPU-s per GB, acks={acks}", "CPU-s/GB", "lower",
                          name, cpu / gb)


def active_controller(side: Side) -> int:
    import asyncio

    for port in side.controller_ports().values():
        with contextlib.suppress(Exception):
            leader = asyncio.run(_describe_quorum_leader("127.0.0.1", port, 2.0))
            if leader >= 0:
                return leader
    return -1


def wait_for(pred: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            v = pred()
            if v:
                return v
        time.sleep(every)
    raise TimeoutError(what)


def partition_failover(side: Side, args: argparse.Namespace) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    controller = wait_for(lambda: max(active_controller(side), 0), 60, "a controller")
    ids = sorted(side.client_ports)
    victim = next(i for i in ids if i != controller)
    others = [i for i in ids if i != victim]
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    create_topic(side.bootstrap, topic, 1, configs={"min.insync.replicas": "2"},
                 assignment=[[victim, *others]])
    acked_at = [0.0]
    lock = threading.Lock()
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "linger.ms": 0,
                      "retry.backoff.ms": 20, "log_level": 0,
                      "topic.metadata.refresh.interval.ms": 1000, "message.timeout.ms": 60000})

        def done(err: Any, _msg: Any, t: float) -> None:
            if err is None:
                with lock:
                    acked_at[0] = max(acked_at[0], t)

        while not stop.is_set():
            p.produce(topic, b"x" * 100, partition=0,
                      on_delivery=functools.partial(done, t=time.monotonic()))
            p.poll(0.005)
        p.flush(30)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        wait_for(lambda: acked_at[0] > 0, 30, "first acknowledgement")
        time.sleep(1)
        since = time.monotonic()
        side.kill(victim)
        while time.monotonic() - since < 90:
            with lock:
                if acked_at[0] > since:
                    break
            time.sleep(0.002)
        elapsed = time.monotonic() - since
    finally:
        stop.set()
        thread.join(60)
    side.restart(victim)
    admin = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    wait_for(lambda: all(len(p.isrs) == 3 for p in
                         admin.list_topics(topic, timeout=5).topics[topic].partitions.values()),
             120, "the ISR full again", every=0.5)
    return elapsed


def controller_failover(side: Side) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    controller = wait_for(lambda: max(active_controller(side), 0), 60, "a controller")
    via = ",".join(f"127.0.0.1:{p}" for i, p in side.client_ports.items() if i != controller)
    since = time.monotonic()
    side.kill(controller)
    elapsed, last = float("nan"), "none"
    while time.monotonic() - since < 120:
        name = f"after-failover-{uuid.uuid4().hex[:6]}"
        # a client per attempt: librdkafka keeps the controller id of its last Metadata, and
        # Kafka names a random live broker there (the killed one, until it is fenced), so one
        # client created before the kill waited on the dead node ("Timed out waiting for
        # controller") for the whole 120 s
        admin = AdminClient({"bootstrap.servers": via, "log_level": 0})
        try:
            admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10,
                                request_timeout=15)[name].result(20)
            elapsed = time.monotonic() - since
            break
        except Exception as exc:
            last = repr(exc)
            time.sleep(0.02)
    if elapsed != elapsed:
        log(f"  {side.name}: no CreateTopics succeeded in 120 s after killing controller "
            f"{controller}; the last error: {last[:300]}")
    side.restart(controller)
    return elapsed


def fig_failover(sides: dict[str, Side], args: argparse.Namespace, table: Table) -> None:
    for rep in range(args.failover_rounds):
        for name in order(rep):
            t = partition_failover(sides[name], args)
            log(f"  {name}: partition leader killed, acknowledged again after {t:.2f} s")
            table.add("failover", "partition, kill -9 of its leader", "s", "lower", name, t)
        for name in order(rep):
            t = controller_failover(sides[name])
            log(f"  {name}: active controller killed, CreateTopics succeeded after {t:.2f} s")
            table.add("failover", "controller, kill -9 to a CreateTopics", "s", "lower", name, t)


# Kafka's operations guide: a broker keeps a file descriptor open per segment and two
# memory maps (offset and time index) per segment; the Linux defaults (65,530 maps) stop a
# node holding a third of 100,000 partitions. Descriptors kept for everything else a node
# opens (sockets, jars, checkpoints).
PARTITIONS_MAX_MAP_COUNT = 262_144
NOFILE_HEADROOM = 2_000


def nodes_for(count: int) -> int:
    """3 nodes, or as many more as the open-files limit (inherited by every node, and not
    raisable here without CAP_SYS_RESOURCE) needs for one descriptor per partition."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY:
        return 3
    return max(3, -(-count // max(1, limit - NOFILE_HEADROOM)))


def raise_map_count(count: int) -> None:
    maps = Path("/proc/sys/vm/max_map_count")
    if count < 10_000 or not maps.exists():
        return
    current = int(maps.read_text())
    if current >= PARTITIONS_MAX_MAP_COUNT:
        return
    try:
        maps.write_text(str(PARTITIONS_MAX_MAP_COUNT))
    except OSError as e:
        raise SystemExit(f"{count:,} partitions need vm.max_map_count >= "
                         f"{PARTITIONS_MAX_MAP_COUNT:,} for Kafka (it is {current:,}: {e}); "
                         f"run `sysctl -w vm.max_map_count={PARTITIONS_MAX_MAP_COUNT}`"
                         ) from None
    log(f"  vm.max_map_count raised from {current:,} to {PARTITIONS_MAX_MAP_COUNT:,} "
        "(Kafka's operations guide)")


def fig_partitions(work: Path, args: argparse.Namespace, table: Table) -> None:
    import resource

    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    raise_map_count(max(args.partition_counts))
    for count in args.partition_counts:
        nodes = nodes_for(count)
        log(f"  {count:,} partitions on {nodes} nodes (open files per process: "
            f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,})")
        for name in SIDES:
            side = (start_skiff_cluster if name == "skiff" else start_kafka_cluster)(
                work / f"{name}-{count}", nodes)
            try:
                admin = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
                per_topic = min(100, count)
                topics = [f"scale-{i}" for i in range(count // per_topic)]
                t0 = time.monotonic()
                for i in range(0, len(topics), 10):
                    futures = admin.create_topics([NewTopic(t, per_topic, 1)
                                                   for t in topics[i:i + 10]],
                                                  operation_timeout=300, request_timeout=330)
                    for f in futures.values():
                        f.result(600)
                created = time.monotonic() - t0
                wanted = set(topics)

                def every_broker_serves(side: Side = side, wanted: set[str] = wanted,
                                        per_topic: int = per_topic) -> bool:
                    for port in side.client_ports.values():
                        md, _, _ = direct_metadata("127.0.0.1", port, 120.0)
                        have = sum(1 for t in wanted if t in md
                                   for leader in md[t].values() if leader >= 0)
                        if have != len(wanted) * per_topic:
                            return False
                    return True

                wait_for(every_broker_serves, 1800, "every broker serves them", every=1.0)
                served = time.monotonic() - t0
                rss = [rss_mb(p) for p in side.pids()]
                log(f"  {name} {count:,} partitions: created in {created:.1f} s, served by "
                    f"every broker after {served:.1f} s, RSS MB {[round(x) for x in rss]}")
                where = f"{count:,} on {nodes} nodes"
                table.add("partitions", f"{where}: CreateTopics time", "s", "lower", name,
                          created)
                table.add("partitions", f"{where}: until every broker serves them", "s",
                          "lower", name, served)
                table.add("partitions", f"{where}: RSS per node (max)", "MB", "lower", name,
                          max(rss))
            finally:
                side.stop()


# ------------------------------------------------------------------------ main

def dev_node_workers() -> str:
    """skiff.broker.workers of the `skiff dev` node this run starts: SkiffNode's --workers
    (tests/run.sh's variable), else the key from the environment, else skiff dev's own."""
    return (dev_workers(os.environ.get(DEV_WORKERS_ENV), os.environ)
            or os.environ[env_key(WORKERS_KEY)])


def describe(args: argparse.Namespace) -> None:
    print("What each side was given:")
    print(f"  machine: {os.cpu_count()} CPUs, {platform.platform()}, load {load()}")
    from broker.protocol.frames import native_senders_missing

    senders = native_senders_missing() or "num.network.threads (3) native threads send " \
        "Fetch answers of 256 KiB or more"
    print(f"  skiff: {sys.executable} (Python {platform.python_version()}), "
          f"skiff.broker.workers {dev_node_workers()} (`skiff dev`; cluster: `skiff server "
          f"start`, combined), {senders}, config { {**COMMON_CONFIG, **SKIFF_ONLY_CONFIG} }")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    print(f"  kafka {KAFKA_VERSION}: {java.stderr.splitlines()[0] if java.stderr else 'java'}; "
          f"broker JVM {' '.join(BROKER_JVM_OPTS)}; config {COMMON_CONFIG}; perf tools' JVM "
          f"{' '.join(PERF_TOOL_JVM_OPTS)}")
    print("  both: KRaft combined broker+controller nodes on 127.0.0.1, PLAINTEXT, defaults "
          "otherwise (segments 1 GiB, no fsync, broker.session.timeout.ms 9000)")
    print(f"  clients: librdkafka {__import__('confluent_kafka').libversion()[0]} "
          "(acks=all, linger.ms=5, batch.size=1000000), Kafka's perf tools (acks=all, "
          "their client defaults), bench/replay.py (Produce v9 / Fetch v12 over raw sockets)")
    print(f"  settings: {vars(args)}", flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    def ints(s: str) -> list[int]:
        return [int(float(x)) for x in s.split(",") if x]

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figures", nargs="*", metavar="figure",
                    help=f"of {' '.join(FIGURES)}; default: {' '.join(DEFAULT_FIGURES)}")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, one repeat: shows that every figure runs end to end")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--partitions", type=int, default=6, help="single-node topics")
    ap.add_argument("--mb", type=float, default=200.0, help="MB per throughput case")
    ap.add_argument("--sizes", type=ints, default=[100, 1000])
    ap.add_argument("--producers", type=ints, default=[1, 3])
    ap.add_argument("--clients", type=lambda s: s.split(","), default=["perf-test", "rdkafka"])
    ap.add_argument("--rates", type=ints, default=[1000, 50000])
    ap.add_argument("--latency-seconds", type=float, default=30.0)
    ap.add_argument("--latency-size", type=int, default=100)
    ap.add_argument("--rss-records", type=int, default=10_000_000)
    ap.add_argument("--rss-size", type=int, default=100)
    ap.add_argument("--replay-seconds", type=float, default=30.0)
    ap.add_argument("--replay-size", type=int, default=1000)
    ap.add_argument("--replay-batch-bytes", type=int, default=16384,
                    help="bytes of records per batch (the Java producer's batch.size)")
    ap.add_argument("--replay-connections", type=int, default=3)
    ap.add_argument("--replay-inflight", type=int, default=5)
    ap.add_argument("--replay-idempotent", action="store_true",
                    help="replayed batches carry a producer id and sequences per connection")
    ap.add_argument("--taskset", help="also run the replay with the Skiff broker pinned to "
                    "this CPU list (taskset -a on the broker only), e.g. 1")
    ap.add_argument("--py-spy", metavar="PATH", help="record a py-spy profile (raw collapsed "
                    "stacks) of the Skiff broker during its first counted replay produce into "
                    "PATH, and print its top functions in CPU-s per GB (PATH.summary.txt)")
    ap.add_argument("--py-spy-rate", type=int, default=100, help="samples per second")
    ap.add_argument("--rf3-records", type=int, default=1_500_000)
    ap.add_argument("--steady-rounds", type=int, default=6)
    ap.add_argument("--steady-counted", type=int, default=3,
                    help="the last rounds of `steady` that count")
    ap.add_argument("--steady-mb", type=float, default=600.0)
    ap.add_argument("--steady-size", type=int, default=1000)
    ap.add_argument("--failover-rounds", type=int, default=3)
    ap.add_argument("--partition-counts", type=ints, default=[10_000, 100_000])
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    args.figures = args.figures or DEFAULT_FIGURES
    unknown = set(args.figures) - set(FIGURES)
    if unknown:
        ap.error(f"unknown figures {sorted(unknown)}; choose from {FIGURES}")
    if args.smoke:  # tiny sizes, where not given on the command line
        for key, small in (("mb", 2.0), ("latency_seconds", 4.0), ("rss_records", 100_000),
                           ("replay_seconds", 4.0), ("rf3_records", 30_000),
                           ("failover_rounds", 1), ("partition_counts", [1000]),
                           ("steady_mb", 2.0), ("steady_rounds", 2), ("steady_counted", 1)):
            if getattr(args, key) == ap.get_default(key):
                setattr(args, key, small)
    return args


def require_disk(path: Path, need_bytes: float, figure: str) -> None:
    """Refuses to start a figure that would fill the disk (and fail both brokers midway)."""
    free = shutil.disk_usage(path).free
    if free < need_bytes:
        raise SystemExit(f"{figure} writes ~{need_bytes / 1e9:.1f} GB under {path}, which has "
                         f"{free / 1e9:.1f} GB free: fewer rounds (--steady-rounds) or MB "
                         "(--steady-mb), or more room")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    describe(args)
    table = Table()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="skiff-vs-kafka-"))
    try:
        if "steady" in args.figures:
            # every round's topic stays until the end (fig_steady says why): both sides
            require_disk(work, 2 * args.steady_rounds * args.steady_mb * 1e6 * 1.1, "steady")
        single = [f for f in ("throughput", "latency", "replay", "steady")
                  if f in args.figures]
        if single:
            with pair(work) as sides:
                for f in single:
                    log(f"== {f}")
                    {"throughput": fig_throughput, "latency": fig_latency,
                     "replay": fig_replay, "steady": fig_steady}[f](sides, args, table)
        if "footprint" in args.figures:
            log("== footprint")
            fig_footprint(work, args, table)
        clustered = [f for f in ("rf3", "failover") if f in args.figures]
        if clustered:
            with pair(work, clusters=True) as sides:
                for f in clustered:
                    log(f"== {f}")
                    {"rf3": fig_rf3, "failover": fig_failover}[f](sides, args, table)
        if "partitions" in args.figures:
            log("== partitions")
            fig_partitions(work, args, table)
    finally:
        table.show()
        print(f"\nrun {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, "
              f"{(time.time() - started) / 60:.1f} min, load at the end {load()}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(table.as_json(), indent=2))
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
