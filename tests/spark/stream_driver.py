"""A streaming query in its own driver process, for the kill -9 test.

    python -m tests.spark.stream_driver BOOTSTRAP TOPIC OUT CHECKPOINT (run|available-now)

Reads TOPIC with format("skiff") (maxOffsetsPerTrigger 20) into Parquet at OUT with its
checkpoint at CHECKPOINT; `run` keeps going until killed, `available-now` drains and exits.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def driver_session(master: str, app: str) -> Any:
    """The Spark session of a driver process of its own, on loopback, quiet, with the
    `skiff` data source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import pipeline

    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark


def main(argv: list[str]) -> int:
    bootstrap, topic, out, checkpoint, mode = argv
    spark = driver_session("local[2]", "skiff-kill-test")
    df = (spark.readStream.format("skiff").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "20").load()
          .selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
    w = (df.writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        w.trigger(availableNow=True).start().awaitTermination()
    else:
        print("started", flush=True)
        w.trigger(processingTime="200 milliseconds").start().awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
