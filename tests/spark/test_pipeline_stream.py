"""Streaming reads and writes of `format("skiff")` on real Spark against a real Skiff node."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.spark.kafka_util import add_partitions, consume_all, create_topic, produce
from tests.support.node import REPO_ROOT
from tests.support.records import unique_topic


def _values(n: int, start: int, parts: int) -> list[dict[str, object]]:
    return [{"value": f"m{i}".encode(), "partition": i % parts} for i in range(start, start + n)]


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.25)
    raise TimeoutError(f"{what} not within {timeout:.0f}s")


def _commits(checkpoint: Path) -> int:
    d = checkpoint / "commits"
    return len([f for f in d.iterdir() if f.name.isdigit()]) if d.exists() else 0


def _check_exactly_once(spark: Any, out: Path, expected: set[str]) -> None:
    """Spark reads a Parquet sink through its _spark_metadata log: committed files only."""
    rows = spark.read.parquet(str(out)).collect()
    values = [r.value for r in rows]
    assert len(values) == len(set(values)), "a record was delivered twice"
    assert set(values) == expected
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys))


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_stop_and_restart_from_checkpoint_delivers_each_record_once(
        spark: Any, skiff_node: Any, tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    topic = unique_topic("spark-restart")
    create_topic(b, topic, 2)
    produce(b, topic, _values(100, 0, 2))
    out, ck = tmp_path / "out", tmp_path / "ck"

    def start(**trigger: Any) -> Any:
        df = _stream(spark, b, subscribe=topic, startingOffsets="earliest",
                     maxOffsetsPerTrigger="30").selectExpr(
            "partition", "offset", "CAST(value AS STRING) AS value")
        return (df.writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(ck)).trigger(**trigger).start())

    q = start(processingTime="500 milliseconds")
    try:
        _wait(lambda: _commits(ck) >= 2, 120, "two micro-batches")
    finally:
        q.stop()
    produce(b, topic, _values(100, 100, 2))
    # Offsets are Spark's Kafka offset documents, per topic and partition.
    first = (ck / "offsets" / "0").read_text().splitlines()[-1]
    assert set(json.loads(first)[topic]) == {"0", "1"}
    q = start(availableNow=True)
    assert q.awaitTermination(180)
    assert q.exception() is None
    # maxOffsetsPerTrigger=30 holds under Trigger.AvailableNow too: 200 records, >= 7 batches.
    assert _commits(ck) >= 7
    _check_exactly_once(spark, out, {f"m{i}" for i in range(200)})


def test_driver_killed_with_sigkill_resumes_from_checkpoint(
        spark: Any, skiff_node: Any, tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    topic = unique_topic("spark-kill")
    create_topic(b, topic, 2)
    produce(b, topic, _values(300, 0, 2))
    out, ck = tmp_path / "out", tmp_path / "ck"
    cmd = [sys.executable, "-m", "tests.spark.stream_driver", b, topic, str(out), str(ck)]
    # Without the gateway variables of this process's Spark session, or the child would
    # attach to our JVM instead of starting its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    log = open(tmp_path / "driver.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*cmd, "run"], cwd=REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: _commits(ck) >= 2 or proc.poll() is not None, 180, "two micro-batches")
        assert proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        # The driver's JVM is in the process group we created for it: end it too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    assert _commits(ck) < 15, "the query finished before it was killed"
    produce(b, topic, _values(100, 300, 2))
    done = subprocess.run([*cmd, "available-now"], cwd=REPO_ROOT, env=env,
                          capture_output=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    _check_exactly_once(spark, out, {f"m{i}" for i in range(400)})


def test_new_partitions_and_topics_are_picked_up_mid_stream(spark: Any, skiff_node: Any) -> None:
    b = skiff_node.bootstrap
    prefix = unique_topic("spark-grow")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(b, first, 1)
    produce(b, first, _values(10, 0, 1))
    name = "grow_" + prefix.replace("-", "_")
    q = (_stream(spark, b, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
         .selectExpr("topic", "partition", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName(name)
         .trigger(processingTime="500 milliseconds").start())
    try:
        def seen() -> set[tuple[str, int, str]]:
            return {(r.topic, r.partition, r.value)
                    for r in spark.sql(f"select * from {name}").collect()}

        _wait(lambda: len(seen()) >= 10, 120, "the first records")
        add_partitions(b, first, 2)
        produce(b, first, [{"value": b"p1-a", "partition": 1}])
        create_topic(b, second, 1)
        produce(b, second, [{"value": b"new-topic", "partition": 0}])
        _wait(lambda: {(first, 1, "p1-a"), (second, 0, "new-topic")} <= seen(), 120,
              "the new partition and topic")
        assert len(seen()) == 12
    finally:
        q.stop()


def test_streaming_write_is_read_back_by_a_kafka_client(
        spark: Any, skiff_node: Any, tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    src, dst = unique_topic("spark-sw-src"), unique_topic("spark-sw-dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 1)
    produce(b, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2,
                      "headers": [("i", str(i).encode())]} for i in range(50)])
    q = (_stream(spark, b, subscribe=src, startingOffsets="earliest", includeHeaders="true")
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "headers")
         .writeStream.format("skiff").option("kafka.bootstrap.servers", b)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None
    got = consume_all(b, dst, 1)
    assert sorted((r.key, r.value, r.headers) for r in got) == sorted(
        (f"k{i}".encode(), f"V{i}".encode(), (("i", str(i).encode()),)) for i in range(50))


def test_fail_on_data_loss(spark: Any, skiff_node: Any, tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    topic = unique_topic("spark-loss")
    create_topic(b, topic, 1)
    produce(b, topic, _values(20, 0, 1))
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.delete_records([TopicPartition(topic, 0, 10)]).values():
        f.result(30)
    start = json.dumps({topic: {"0": 5}})
    r = spark.read.format("skiff").option("kafka.bootstrap.servers", b).option(
        "subscribe", topic).option("startingOffsets", start)
    with pytest.raises(Exception, match="Some data may have been lost"):
        r.load().count()
    rows = r.option("failOnDataLoss", "false").load().select("offset").collect()
    assert sorted(x.offset for x in rows) == list(range(10, 20))


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "endingOffsets": "latest"}, "ending offset not valid in streaming"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "5"}, "'minOffsetsPerTrigger' of Spark"),
])
def test_bad_streaming_options(spark: Any, skiff_node: Any, tmp_path: Path,
                               options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message):
        q = (_stream(spark, skiff_node.bootstrap, **options).writeStream.format("memory")
             .queryName("bad_" + str(time.monotonic_ns())).start())
        try:
            q.processAllAvailable()
        finally:
            q.stop()
