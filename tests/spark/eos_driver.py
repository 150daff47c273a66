"""A streaming query with the exactly-once sink in its own driver process, for the crash tests.

    python -m tests.spark.eos_driver BOOTSTRAP IN OUT CHECKPOINT MODE [CRASH[;CRASH...]]

Reads IN with format("skiff") (maxOffsetsPerTrigger 40) and writes key and value to OUT with
format("skiff-eos-test"): the exactly-once sink of pipeline/sink.py, unchanged, except that
a CRASH kills this whole driver (kill -9 of its process group: this Python, Spark's JVM and
its Python workers) at a chosen point of a chosen micro-batch:

    mid-commit@N     in commit(messages, N), after EndTxn(commit) of the first task's
                     transaction only: the others stay open
    after-commit@N   after commit(messages, N) returned, before Spark records batch N in the
                     checkpoint's commits/ (Spark writes it after commit returns)
    task-failure@N   not a crash: the first attempt of task 0 of batch N raises after its
                     rows are flushed in its transaction; Spark retries the task

Before killing it writes `crashed-<point>-<N>` next to the checkpoint. MODE is `run` (until
killed) or `available-now` (drain and exit).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pipeline.sink import SkiffStreamWriter
from pipeline.source import SkiffDataSource
from tests.spark.stream_driver import driver_session

CRASH_OPTION = "test.crash"


class CrashingWriter(SkiffStreamWriter):
    def __init__(self, options: dict[str, str], schema: StructType, crash: str) -> None:
        super().__init__(options, schema)
        points, pgid, self.marks = crash.split("@@", 2)
        self.pgid = int(pgid)
        self.points = {(p.split("@")[0], int(p.split("@")[1])) for p in points.split(";")}

    def _mark(self, point: str, batch_id: int) -> None:
        Path(self.marks, f"crashed-{point}-{batch_id}").touch()

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        msg = super().write(iterator)
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        batch = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        if (("task-failure", batch) in self.points and ctx.partitionId() == 0
                and ctx.attemptNumber() == 0):
            self._mark("task-failure", batch)
            raise RuntimeError("injected task failure after the transaction was flushed")
        return msg

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if ("mid-commit", batchId) in self.points:
            from pipeline.eos import commit_batch, pending_transactions

            first = pending_transactions(messages, batchId)[:1]
            commit_batch(self.opts, list(first), batchId)
            self._mark("mid-commit", batchId)
            os.killpg(self.pgid, signal.SIGKILL)
        super().commit(messages, batchId)
        if ("after-commit", batchId) in self.points:
            self._mark("after-commit", batchId)
            os.killpg(self.pgid, signal.SIGKILL)


class CrashingSkiff(SkiffDataSource):
    @classmethod
    def name(cls) -> str:
        return "skiff-eos-test"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = dict(self.options)
        crash = options.pop(CRASH_OPTION, None)
        if crash is None:
            return SkiffStreamWriter(options, schema)
        return CrashingWriter(options, schema, crash)


def main(argv: list[str]) -> int:
    bootstrap, source, out, checkpoint, mode, *crash = argv
    # local[2,4]: up to 4 attempts per task, as on a cluster (plain local[2] never retries).
    spark = driver_session("local[2,4]", "skiff-eos-kill-test")
    spark.dataSource.register(CrashingSkiff)
    df = (spark.readStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "40").load()
          .selectExpr("key", "value"))
    w = (df.writeStream.format("skiff-eos-test").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("skiff.deliveryGuarantee", "exactly-once")
         .option("checkpointLocation", checkpoint))
    if crash:
        marks = str(Path(checkpoint).parent)
        w = w.option(CRASH_OPTION, f"{crash[0]}@@{os.getpgrp()}@@{marks}")
    if mode == "available-now":
        w.trigger(availableNow=True).start().awaitTermination()
    else:
        w.trigger(processingTime="200 milliseconds").start().awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
