"""Skiff for Spark: `format("skiff")` (Spark's Kafka source and sink on the Python Data
Source API) and `format("skiff-logdir")` (batch reads of a stopped broker's log dirs).

    import pipeline
    pipeline.register(spark)
    df = spark.read.format("skiff").option("kafka.bootstrap.servers", "127.0.0.1:9092") \
        .option("subscribe", "events").load()
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register `skiff` and `skiff-logdir` with a SparkSession."""
    from pipeline.logdir import SkiffLogDirDataSource
    from pipeline.source import SkiffDataSource

    spark.dataSource.register(SkiffDataSource)
    spark.dataSource.register(SkiffLogDirDataSource)


__all__ = ["register"]
