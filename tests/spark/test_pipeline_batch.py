"""Batch reads and writes of `format("skiff")` on real Spark against a real Skiff node."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.spark.kafka_util import (
    Rec,
    by_offset,
    consume_all,
    create_topic,
    produce,
    row_rec,
)
from tests.support.records import unique_topic

# Record timestamps are T0 + i seconds, an hour in the past. Fixed dates years old were
# deleted by the shared node's retention (Kafka's 7-day default) at its next check, which
# came between the produce and the read late in a full run.
T0 = (int(time.time()) - 3600) * 1000


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("skiff").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _recs(df: Any) -> list[Rec]:
    from pyspark.sql import functions as F

    rows = df.withColumn("ts_ms", F.unix_millis("timestamp")).collect()
    return by_offset(row_rec(r) for r in rows)


def _po(df: Any) -> set[tuple[int, int]]:
    return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}


@pytest.fixture(scope="module")
def topic3(skiff_node: Any) -> tuple[str, list[Rec]]:
    """A 3-partition topic of 60 records: null keys, null values, headers, timestamps."""
    name = unique_topic("spark-batch")
    create_topic(skiff_node.bootstrap, name, 3)
    items: list[dict[str, object]] = []
    for i in range(60):
        items.append({
            "partition": i % 3,
            "key": None if i % 7 == 0 else f"k{i}".encode(),
            "value": None if i % 11 == 5 else f"value-{i}".encode() * (1 + i % 4),
            "headers": [("h", f"{i}".encode()), ("empty", None)] if i % 2 else None,
            "timestamp": T0 + i * 1000,
        })
    return name, by_offset(produce(skiff_node.bootstrap, name, items))


def test_batch_read_returns_exactly_what_was_produced(spark: Any, skiff_node: Any,
                                                      topic3: tuple[str, list[Rec]]) -> None:
    name, produced = topic3
    df = _read(spark, skiff_node.bootstrap, subscribe=name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    got = _recs(df)
    assert got == produced
    assert {r.timestampType for r in df.select("timestampType").collect()} == {0}
    # Without includeHeaders the schema is Spark's seven columns.
    plain = _read(spark, skiff_node.bootstrap, subscribe=name)
    assert len(plain.schema.fields) == 7


def test_starting_and_ending_options(spark: Any, skiff_node: Any,
                                     topic3: tuple[str, list[Rec]]) -> None:
    name, produced = topic3
    b = skiff_node.bootstrap
    every = {(r.partition, r.offset) for r in produced}
    ends = {p: 1 + max(r.offset for r in produced if r.partition == p) for p in range(3)}

    assert _po(_read(spark, b, subscribe=name, startingOffsets="earliest",
                     endingOffsets="latest")) == every
    start = json.dumps({name: {"0": 5, "1": -2, "2": 19}})
    end = json.dumps({name: {"0": 8, "1": 3, "2": -1}})
    assert _po(_read(spark, b, subscribe=name, startingOffsets=start, endingOffsets=end)) == (
        {(0, o) for o in range(5, 8)} | {(1, o) for o in range(3)} | {(2, 19)})
    # assign reads only the named partitions.
    assign = json.dumps({name: [1]})
    assert _po(_read(spark, b, assign=assign)) == {(1, o) for o in range(ends[1])}
    # subscribePattern
    assert _po(_read(spark, b, subscribePattern=name.replace("-", ".") + "$")) == every
    # Timestamps: record i of partition p has timestamp T0 + (3 * offset + p) seconds.
    ts = T0 + 30 * 1000
    assert _po(_read(spark, b, subscribe=name, startingTimestamp=str(ts))) == {
        (r.partition, r.offset) for r in produced if r.timestamp_ms >= ts}
    by_ts = json.dumps({name: {"0": T0, "1": ts, "2": T0 + 59_000}})
    end_ts = json.dumps({name: {"0": T0 + 9_000, "1": T0 + 99_000, "2": T0 + 99_000}})
    got = _po(_read(spark, b, subscribe=name, startingOffsetsByTimestamp=by_ts,
                    endingOffsetsByTimestamp=end_ts))
    assert got == {(r.partition, r.offset) for r in produced
                   if (r.partition == 0 and r.timestamp_ms < T0 + 9_000)
                   or (r.partition == 1 and r.timestamp_ms >= ts)
                   or (r.partition == 2 and r.timestamp_ms >= T0 + 59_000)}
    # No offset at or after a timestamp: an error, or latest with the 'latest' strategy.
    late = str(T0 + 10**9)
    assert _po(_read(spark, b, subscribe=name, startingTimestamp=late,
                     startingOffsetsByTimestampStrategy="latest")) == set()
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        _read(spark, b, subscribe=name, startingTimestamp=late).count()
    # Specific offsets must name every partition.
    with pytest.raises(Exception, match="you must specify all TopicPartitions"):
        _read(spark, b, subscribe=name,
              startingOffsets=json.dumps({name: {"0": 0}})).count()


def test_min_partitions_splits_offset_ranges(spark: Any, skiff_node: Any,
                                             topic3: tuple[str, list[Rec]]) -> None:
    name, produced = topic3
    df = _read(spark, skiff_node.bootstrap, subscribe=name, minPartitions="9",
               includeHeaders="true")
    assert df.rdd.getNumPartitions() >= 9
    assert _recs(df) == produced
    assert _read(spark, skiff_node.bootstrap, subscribe=name).rdd.getNumPartitions() == 3
    # Skiff's own option: several partitions per task, one consumer each.
    grouped = _read(spark, skiff_node.bootstrap, subscribe=name, includeHeaders="true",
                    **{"skiff.partitionsPerTask": "2"})
    assert grouped.rdd.getNumPartitions() == 2
    assert _recs(grouped) == produced


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options"),
    ({}, "One of the following options must be specified for Kafka source"),
    ({"subscribe": "a", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
     "Kafka option 'auto.offset.reset' is not supported"),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "a", "startingOffset": "earliest"}, "Unknown option 'startingoffset'"),
    ({"subscribe": "a", "kafka.no.such.setting": "1"}, "Invalid 'kafka.\\*' option"),
])
def test_bad_options_fail_when_planned(spark: Any, skiff_node: Any, options: dict[str, str],
                                       message: str) -> None:
    with pytest.raises(Exception, match=message):
        _read(spark, skiff_node.bootstrap, **options).count()


def test_missing_bootstrap_fails_at_load(spark: Any) -> None:
    with pytest.raises(Exception, match=r"Option 'kafka\.bootstrap\.servers' must be specified"):
        spark.read.format("skiff").option("subscribe", "a").load()


def test_batch_write_is_read_back_by_a_kafka_client(spark: Any, skiff_node: Any) -> None:
    from pyspark.sql import functions as F

    b = skiff_node.bootstrap
    a, c = unique_topic("spark-write-a"), unique_topic("spark-write-c")
    create_topic(b, a, 2)
    create_topic(b, c, 1)
    df = spark.range(40).select(
        F.when(F.col("id") % 2 == 0, F.lit(a)).otherwise(F.lit(c)).alias("topic"),
        F.col("id").cast("string").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.array(F.struct(F.lit("n").alias("key"),
                         F.col("id").cast("string").cast("binary").alias("value"))
                ).alias("headers"),
        F.when(F.col("topic") == a, (F.col("id") % 4 / 2).cast("int"))
        .otherwise(F.lit(0)).alias("partition"),
        F.lit("ignored").alias("extra"),
    )
    # Python data sources take Append or Overwrite only, so Spark's default ErrorIfExists
    # needs mode("append") (docs/pipeline.md, differences).
    df.write.format("skiff").mode("append").option("kafka.bootstrap.servers", b).save()
    got_a = consume_all(b, a, 2)
    got_c = consume_all(b, c, 1)
    expect = {i: (f"{i}".encode(), f"v{i}".encode(), (("n", f"{i}".encode()),))
              for i in range(40)}
    assert len(got_a) == 20 and len(got_c) == 20
    for r in got_a + got_c:
        i = int(r.key)  # type: ignore[arg-type]
        assert (r.key, r.value, r.headers) == expect[i]
        assert r.topic == (a if i % 2 == 0 else c)
        if r.topic == a:
            assert r.partition == (i % 4) // 2
    # The topic option overrides the column; a string value is written as its UTF-8 bytes.
    spark.createDataFrame([("x", "hello")], "topic string, value string").write.format(
        "skiff").mode("append").option("kafka.bootstrap.servers", b).option("topic", c).save()
    assert [r.value for r in consume_all(b, c, 1)][-1] == b"hello"


@pytest.mark.parametrize(("ddl", "options", "message"), [
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value string", {}, "topic option required when no 'topic' attribute is present"),
    ("topic int, value string", {}, "topic attribute type must be a string"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("value string, partition string", {"topic": "t"}, "partition attribute type must be an int"),
])
def test_bad_writes_fail_when_planned(spark: Any, skiff_node: Any, ddl: str,
                                      options: dict[str, str], message: str) -> None:
    df = spark.createDataFrame([], ddl)
    w = df.write.format("skiff").mode("append").option("kafka.bootstrap.servers",
                                                       skiff_node.bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.save()
