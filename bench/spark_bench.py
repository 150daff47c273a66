"""Spark on Skiff (issue 20), run by hand against a `skiff dev` node this script starts:

  batch    a topic of --records records (--value-bytes B values, --partitions partitions)
           read by ONE confluent-kafka consumer (the limit: the client's own speed), then by
           Spark (local[2], format("skiff")) into a count and into Parquet, with one task per
           partition (Spark's layout, the default) and with skiff.partitionsPerTask=4 (two
           tasks, one per core); rows/s and the ratio of each Spark figure to the client's,
           all in the same run.
  kafka    format("skiff") against Spark's own format("kafka") (spark-sql-kafka-0-10 from
           tests/spark/pom.xml, resolved with Maven) on the same job: a topic of --records
           records into a count and into Parquet, each format with its defaults (one task
           per partition), alternating, --repeats rounds; rows/s and the skiff/kafka ratio
           (issue 35's goal: >= 1.0), plus format("skiff") with skiff.partitionsPerTask=4.
  sink     a topic of --records records copied by a streaming query (format("skiff") ->
           format("skiff"), Trigger.AvailableNow, --batches micro-batches) with the sink's
           default at-least-once delivery and with skiff.deliveryGuarantee=exactly-once
           (a transaction per micro-batch and task), alternating, --repeats rounds; rows/s
           and the exactly-once/at-least-once ratio of the same run. The exactly-once
           output is checked with a read_committed count.
  latency  a producer at --rate records/s for --seconds s into a topic that a streaming
           query (format("skiff") -> Parquet, trigger every --trigger-ms) writes out; the
           time from each record's produce to the commit of the micro-batch holding it
           (the mtime of the sink's _spark_metadata/<batch> entry), p50/p90/p99/max.

    python bench/spark_bench.py batch --records 10000000
    python bench/spark_bench.py kafka --records 10000000
    python bench/spark_bench.py sink --records 1000000 --batches 10 --repeats 2
    python bench/spark_bench.py latency --rate 10000 --seconds 60 [--per-task 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.testing.node import SkiffNode  # noqa: E402


def spark_session(jars: str | None = None) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import pipeline

    builder = SparkSession.builder
    if jars:
        builder = builder.config("spark.jars", jars)
    spark = (builder.master("local[2]").appName("skiff-spark-bench")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    time.sleep(1.0)


def fill(bootstrap: str, topic: str, records: int, value_bytes: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * value_bytes
    t = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, str(i).encode())
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return time.monotonic() - t


def client_read(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """One librdkafka consumer reading every partition to its end; seconds taken."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    eof: set[int] = set()
    t = time.monotonic()
    deadline = t + 1800
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            err = m.error()
            if err is None:
                n += 1
                m.value()
            elif err.code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            else:
                raise RuntimeError(err)
    took = time.monotonic() - t
    c.close()
    assert n == records, f"client read {n} of {records}"
    return took


def batch(args: argparse.Namespace, bootstrap: str) -> None:
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, args.partitions)
    took = fill(bootstrap, topic, args.records, args.value_bytes)
    print(f"filled {args.records:,} records x {args.value_bytes} B in {took:.1f} s "
          f"({args.records / took:,.0f} rec/s)", flush=True)
    spark = spark_session()
    df = (spark.read.format("skiff").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("skiff.partitionsPerTask", "4").load())
    assert df.count() == args.records  # warm-up: Python workers, page cache
    cases = {"count": ("1", False), "parquet": ("1", True),
             "count/4": ("4", False), "parquet/4": ("4", True)}
    rows: dict[str, list[float]] = {"client": [], **{k: [] for k in cases}}
    out = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    for r in range(args.repeats):
        rows["client"].append(args.records / client_read(bootstrap, topic, args.partitions,
                                                         args.records))
        for name, (per_task, parquet) in cases.items():
            df = (spark.read.format("skiff").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("skiff.partitionsPerTask", per_task)
                  .load())
            t = time.monotonic()
            if parquet:
                df.write.mode("overwrite").parquet(str(out / f"r{r}"))
            else:
                assert df.count() == args.records
            rows[name].append(args.records / (time.monotonic() - t))
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:,.0f} rows/s" for k, v in rows.items()),
              flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nmedian of {args.repeats}, rows/s: confluent-kafka consumer {med['client']:,.0f}")
    for name, (per_task, parquet) in cases.items():
        what = "Parquet" if parquet else "count"
        print(f"  Spark -> {what}, skiff.partitionsPerTask={per_task}: {med[name]:,.0f} "
              f"({med[name] / med['client']:.2f}x the client)")
    spark.stop()


def versus_kafka(args: argparse.Namespace, bootstrap: str) -> None:
    from tests.spark.connector import CONNECTOR_VERSION, spark_kafka_jars

    topic = f"bench-spark-kafka-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, args.partitions)
    took = fill(bootstrap, topic, args.records, args.value_bytes)
    print(f"filled {args.records:,} records x {args.value_bytes} B, {args.partitions} "
          f"partitions in {took:.1f} s ({args.records / took:,.0f} rec/s)", flush=True)
    spark = spark_session(spark_kafka_jars())
    print(f"PySpark {spark.version}, spark-sql-kafka-0-10 {CONNECTOR_VERSION}", flush=True)

    def read(fmt: str, per_task: str | None = None) -> Any:
        r = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic))
        if per_task is not None:
            r = r.option("skiff.partitionsPerTask", per_task)
        return r.load()

    # Warm-up of both: the JVM's Kafka classes, Python workers, the page cache.
    for fmt in ("kafka", "skiff"):
        assert read(fmt).count() == args.records
    cases = {"kafka count": ("kafka", None, False), "skiff count": ("skiff", None, False),
             "kafka parquet": ("kafka", None, True), "skiff parquet": ("skiff", None, True),
             "skiff/4 count": ("skiff", "4", False), "skiff/4 parquet": ("skiff", "4", True)}
    rows: dict[str, list[float]] = {k: [] for k in cases}
    out = Path(tempfile.mkdtemp(prefix="spark-bench-kafka-"))
    for r in range(args.repeats):
        for name, (fmt, per_task, parquet) in cases.items():
            df = read(fmt, per_task)
            t = time.monotonic()
            if parquet:
                df.write.mode("overwrite").parquet(str(out / f"{name.split()[0]}-{r}"))
            else:
                assert df.count() == args.records
            rows[name].append(args.records / (time.monotonic() - t))
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items())
              + f" rows/s; loadavg {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nmedian of {args.repeats}, rows/s, {args.records:,} x {args.value_bytes} B, "
          f"{args.partitions} partitions, local[2]:")
    for job in ("count", "parquet"):
        print(f"  {job}: format(\"kafka\") {med[f'kafka {job}']:,.0f}, format(\"skiff\") "
              f"{med[f'skiff {job}']:,.0f} ({med[f'skiff {job}'] / med[f'kafka {job}']:.2f}x), "
              f"skiff.partitionsPerTask=4 {med[f'skiff/4 {job}']:,.0f} "
              f"({med[f'skiff/4 {job}'] / med[f'kafka {job}']:.2f}x)")
    spark.stop()


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        total = 0
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low  # high is the last stable offset under read_committed
        return total
    finally:
        c.close()


def sink(args: argparse.Namespace, bootstrap: str) -> None:
    source = f"bench-sink-in-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, source, args.partitions)
    took = fill(bootstrap, source, args.records, args.value_bytes)
    print(f"filled {args.records:,} records x {args.value_bytes} B in {took:.1f} s "
          f"({args.records / took:,.0f} rec/s)", flush=True)
    spark = spark_session()
    work = Path(tempfile.mkdtemp(prefix="spark-bench-sink-"))
    per_batch = str(max(1, args.records // args.batches))

    def copy(guarantee: str, tag: str) -> float:
        out = f"bench-sink-out-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, out, args.partitions)
        q = (spark.readStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", per_batch).load().selectExpr("key", "value")
             .writeStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out).option("skiff.deliveryGuarantee", guarantee)
             .option("checkpointLocation", str(work / tag)).trigger(availableNow=True))
        t = time.monotonic()
        query = q.start()
        query.awaitTermination()
        elapsed = time.monotonic() - t
        assert query.exception() is None, query.exception()
        if guarantee == "exactly-once":
            n = committed_count(bootstrap, out, args.partitions)
            assert n >= args.records, f"{n} committed records of {args.records}"
        return args.records / elapsed

    copy("at-least-once", "warm-up")  # Python workers, page cache
    rows: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
    for r in range(args.repeats):
        for g in rows:
            rows[g].append(copy(g, f"{g}-{r}"))
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:,.0f} rows/s" for k, v in rows.items()),
              flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nmedian of {args.repeats}, rows/s, {args.records:,} records in "
          f"{args.batches} micro-batches of {per_batch}, {args.partitions} partitions:")
    print(f"  at-least-once {med['at-least-once']:,.0f}, exactly-once "
          f"{med['exactly-once']:,.0f} "
          f"({med['exactly-once'] / med['at-least-once']:.2f}x at-least-once)")
    spark.stop()


def latency(args: argparse.Namespace, bootstrap: str) -> None:
    from confluent_kafka import Producer

    topic = f"bench-lat-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, args.partitions)
    spark = spark_session()
    work = Path(tempfile.mkdtemp(prefix="spark-lat-"))
    out, ck = work / "out", work / "ck"
    q = (spark.readStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("skiff.partitionsPerTask", str(args.per_task)).load()
         .selectExpr("CAST(value AS STRING) AS sent")
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ck))
         .trigger(processingTime=f"{args.trigger_ms} milliseconds").start())
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    # Warm-up, not measured: the first micro-batch that has data starts the Python workers
    # (seconds on a busy machine); wait until its records are committed.
    warmup = 1000
    for i in range(warmup):
        p.produce(topic, b"warmup", partition=i % args.partitions)
    p.flush(60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if spark.read.parquet(str(out)).count() >= warmup:
                break
        except Exception:  # no committed file yet
            pass
        time.sleep(0.5)
    total = int(args.rate * args.seconds)
    stop = threading.Event()

    def pump() -> None:
        begin = time.monotonic()
        for i in range(total):
            delay = begin + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            p.produce(topic, f"{time.time():.6f}".encode(), partition=i % args.partitions)
            p.poll(0)
        p.flush(60)
        stop.set()

    th = threading.Thread(target=pump)
    th.start()
    th.join()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if spark.read.parquet(str(out)).count() >= total + warmup:
            break
        time.sleep(1)
    q.stop()
    import pyarrow.parquet as pq

    # Each file's commit time: the mtime of the first sink-log entry naming it. Every tenth
    # batch is written as `<batch>.compact` (listing all earlier files too); the earlier
    # per-batch entries stay until Spark's cleanup delay has passed.
    committed: dict[str, float] = {}
    for entry in (out / "_spark_metadata").iterdir():
        if not entry.name.removesuffix(".compact").isdigit():
            continue
        at = entry.stat().st_mtime
        for line in entry.read_text().splitlines()[1:]:
            path = json.loads(line)["path"]
            committed[path] = min(at, committed.get(path, at))
    lat: list[float] = []
    for path, at in committed.items():
        for sent in pq.read_table(path.removeprefix("file:")).column("sent").to_pylist():
            if sent != "warmup":
                lat.append(at - float(sent))
    lat.sort()
    assert len(lat) >= total, f"{len(lat)} of {total} records committed"

    def pct(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))] * 1000

    print(f"{total:,} records at {args.rate:,.0f} rec/s, trigger {args.trigger_ms} ms, "
          f"{args.partitions} partitions, partitionsPerTask {args.per_task}: "
          f"produce -> Parquet commit p50 {pct(0.5):.0f} ms, p90 {pct(0.9):.0f} ms, "
          f"p99 {pct(0.99):.0f} ms, max {lat[-1] * 1000:.0f} ms")
    spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("batch", "kafka", "sink", "latency"))
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--trigger-ms", type=int, default=500)
    ap.add_argument("--batches", type=int, default=10, help="sink: micro-batches per copy")
    ap.add_argument("--per-task", type=int, default=1,
                    help="latency: skiff.partitionsPerTask of the streaming query")
    ap.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    args = ap.parse_args()
    node = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        node = SkiffNode(Path(tempfile.mkdtemp(prefix="spark-bench-node-")))
        node.start()
        node.wait_ready()
        bootstrap = node.bootstrap
    try:
        {"batch": batch, "kafka": versus_kafka, "sink": sink,
         "latency": latency}[args.mode](args, bootstrap)
    finally:
        if node is not None:
            node.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
