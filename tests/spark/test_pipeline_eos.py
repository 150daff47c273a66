"""The exactly-once streaming sink (skiff.deliveryGuarantee=exactly-once) on real Spark against
a real Skiff node: a task that fails after flushing its transaction, a driver killed with -9
in the middle of commit(messages, batchId) and one killed after commit returned but before
Spark recorded the batch (tests/spark/eos_driver.py), each restarted from its checkpoint.
A read_committed reader of the output finds every input record exactly once; a
read_uncommitted reader finds the aborted copies too (so the comparison can fail)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.kafka_util import consume_all, create_topic, produce
from tests.support.node import REPO_ROOT
from tests.support.records import unique_topic

pytestmark = pytest.mark.timeout(900)


def _values(n: int, start: int, parts: int) -> list[dict[str, object]]:
    return [{"key": f"k{i}".encode(), "value": f"m{i}".encode(), "partition": i % parts}
            for i in range(start, start + n)]


def _run_driver(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> int:
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(10)


def test_exactly_once_sink_through_task_failure_driver_kills_and_restarts(
        spark: Any, skiff_node: Any, tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    source, out = unique_topic("spark-eos-in"), unique_topic("spark-eos-out")
    create_topic(b, source, 2)
    create_topic(b, out, 2)
    produce(b, source, _values(160, 0, 2))
    ck = tmp_path / "ck"
    log = tmp_path / "driver.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    base = [sys.executable, "-m", "tests.spark.eos_driver", b, source, out, str(ck)]
    started = time.monotonic()

    def tail() -> str:
        return log.read_text(errors="replace")[-4000:]

    # 1. The first attempt of task 0 of batch 1 fails after flushing its transaction (its
    #    retry fences it); then the driver is killed with -9 inside commit(2), after it
    #    committed one of the batch's two transactions: the other stays open.
    rc = _run_driver([*base, "run", "task-failure@1;mid-commit@2"], env, log, 300)
    assert rc == -9, tail()
    assert (tmp_path / "crashed-task-failure-1").exists(), tail()
    assert (tmp_path / "crashed-mid-commit-2").exists(), tail()
    assert not (ck / "commits" / "2").exists()
    # 2. Restarted from the checkpoint: batch 2 is replayed (the task whose transaction
    #    committed finds its marker and writes nothing, the other's open transaction is
    #    fenced and aborted, and it writes again); then the driver is killed right after
    #    commit(4) returned, before Spark wrote commits/4.
    produce(b, source, _values(80, 160, 2))
    rc = _run_driver([*base, "run", "after-commit@4"], env, log, 300)
    assert rc == -9, tail()
    assert (tmp_path / "crashed-after-commit-4").exists(), tail()
    assert not (ck / "commits" / "4").exists()
    # 3. Restarted again, in this process's session with format("skiff"): batch 4 is
    #    replayed (every task finds its marker), then the rest is drained.
    produce(b, source, _values(80, 240, 2))
    q = (spark.readStream.format("skiff").option("kafka.bootstrap.servers", b)
         .option("subscribe", source).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "40").load().selectExpr("key", "value")
         .writeStream.format("skiff").option("kafka.bootstrap.servers", b)
         .option("topic", out).option("skiff.deliveryGuarantee", "exactly-once")
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    assert q.awaitTermination(300)
    assert q.exception() is None
    elapsed = time.monotonic() - started

    expected = collections.Counter(f"m{i}".encode() for i in range(320))
    committed = consume_all(b, out, 2, isolation="read_committed")
    got = collections.Counter(r.value for r in committed)
    assert got == expected, (
        f"duplicates {[v for v, n in got.items() if n > 1][:5]}, "
        f"missing {len(set(expected) - set(got))} of {len(expected)}")
    assert all(r.key == b"k" + (r.value or b"")[1:] for r in committed)
    # The aborted transactions' rows are in the log: the failed attempt of batch 1 and the
    # open transaction of batch 2 wrote rows that were written again.
    everything = consume_all(b, out, 2, isolation="read_uncommitted")
    assert len(everything) > len(committed), "no aborted rows: nothing was tested"
    assert {r.value for r in everything} == set(expected)
    # Spark reads it the same ways: read_committed on request, else (Spark's default) all.
    def spark_values(**extra: str) -> collections.Counter[bytes]:
        r = spark.read.format("skiff").option("kafka.bootstrap.servers", b).option(
            "subscribe", out)
        for k, v in extra.items():
            r = r.option(k, v)
        return collections.Counter(bytes(x.value) for x in r.load().select("value").collect())

    assert spark_values(**{"kafka.isolation.level": "read_committed"}) == expected
    assert sum(spark_values().values()) == len(everything)
    print(f"exactly-once crash test: 2 killed drivers and a drain in {elapsed:.0f} s, "
          f"{len(everything) - len(committed)} aborted rows")


def test_exactly_once_refusals(spark: Any, skiff_node: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="supported by streaming writes"):
        (df.write.format("skiff").mode("append")
         .option("kafka.bootstrap.servers", skiff_node.bootstrap).option("topic", "t")
         .option("skiff.deliveryGuarantee", "exactly-once").save())
