"""The reference pipeline: clicks in, per-page windowed statistics out, on Skiff and Parquet.

    python -m pipeline.examples.clickstream --bootstrap 127.0.0.1:9092 \
        --input clicks --output-topic click-stats --parquet ./click-stats \
        --checkpoint ./click-checkpoints

Reads JSON click events from `--input` (format("skiff"), offsets in the checkpoint),
parses them, counts views and sums durations per page in 1-minute event-time windows with a
30-second watermark, and writes each closed window both to the `--output-topic` topic
(key: page, value: JSON) and as Parquet files under `--parquet`. Each of the two queries has
its own checkpoint under `--checkpoint`: stop the job (Ctrl-C) and start it again and both
resume where they stopped. `--available-now` processes what the topic holds and exits.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

WINDOW = "1 minute"
WATERMARK = "30 seconds"
EVENT_SCHEMA = "user string, page string, ts long, duration_ms long"


def session(master: str = "local[2]") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import pipeline

    spark = (SparkSession.builder.master(master).appName("skiff-clickstream")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark


def page_stats(spark: Any, bootstrap: str, topic: str, starting: str = "earliest") -> Any:
    """The streaming DataFrame of closed windows: window_start, window_end, page, views,
    total_duration_ms, users (distinct users seen in the window)."""
    from pyspark.sql import functions as F

    clicks = (spark.readStream.format("skiff")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", starting)
              .load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("page").isNotNull())
              .withColumn("event_time", F.timestamp_millis(F.col("ts"))))
    return (clicks.withWatermark("event_time", WATERMARK)
            .groupBy(F.window("event_time", WINDOW), F.col("page"))
            .agg(F.count("*").alias("views"),
                 F.sum("duration_ms").alias("total_duration_ms"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "page", "views", "total_duration_ms"))


def start(spark: Any, args: argparse.Namespace) -> list[Any]:
    from pyspark.sql import functions as F

    stats = page_stats(spark, args.bootstrap, args.input)
    trigger = {"availableNow": True} if args.available_now else {"processingTime": "5 seconds"}
    to_parquet = (stats.writeStream.format("parquet").outputMode("append")
                  .option("path", args.parquet)
                  .option("checkpointLocation", os.path.join(args.checkpoint, "parquet"))
                  .trigger(**trigger).start())
    to_topic = (stats.select(F.col("page").alias("key"),
                             F.to_json(F.struct(*stats.columns)).alias("value"))
                .writeStream.format("skiff").outputMode("append")
                .option("kafka.bootstrap.servers", args.bootstrap)
                .option("topic", args.output_topic)
                .option("checkpointLocation", os.path.join(args.checkpoint, "topic"))
                .trigger(**trigger).start())
    return [to_parquet, to_topic]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--input", default="clicks")
    ap.add_argument("--output-topic", default="click-stats")
    ap.add_argument("--parquet", default="./click-stats")
    ap.add_argument("--checkpoint", default="./click-checkpoints")
    ap.add_argument("--available-now", action="store_true",
                    help="process what the input topic holds now, then exit")
    args = ap.parse_args(argv)
    spark = session()
    queries = start(spark, args)
    try:
        for q in queries:
            q.awaitTermination()
    except KeyboardInterrupt:
        for q in queries:
            q.stop()
    for q in queries:
        if q.exception() is not None:
            print(q.exception(), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
