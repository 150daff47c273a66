"""The log-directory source against the broker source, and the reference pipeline end to end."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pipeline.examples import clickstream
from pipeline.examples.generate_clicks import events
from tests.spark.kafka_util import consume_all, create_topic, produce
from tests.support.node import SkiffNode
from tests.support.records import unique_topic


def _rows(df: Any) -> list[tuple[Any, ...]]:
    from pyspark.sql import functions as F

    cols = [F.col(c) for c in df.columns if c != "timestamp"]
    rows = df.select(*cols, F.unix_millis("timestamp").alias("ts")).collect()
    return sorted((tuple(r) for r in rows), key=lambda t: (t[2], t[3], t[4]))


def test_log_dir_source_reads_the_same_rows_as_the_broker(spark: Any, tmp_path: Path) -> None:
    """A node of its own: produce, read through the broker, stop it, read its log dir."""
    node = SkiffNode(tmp_path / "node")
    node.start()
    try:
        node.wait_ready()
        b = node.bootstrap
        topic = unique_topic("spark-logdir")
        create_topic(b, topic, 3)
        for round_ in range(3):  # several produce requests: several batches per partition
            produce(b, topic, [{
                "key": f"k{i}".encode() if i % 5 else None,
                "value": f"v{round_}-{i}".encode() * (i % 3 + 1),
                "partition": i % 3,
                "headers": [("r", str(round_).encode())],
            } for i in range(40)])
        via_broker = _rows(spark.read.format("skiff").option("kafka.bootstrap.servers", b)
                           .option("subscribe", topic).option("includeHeaders", "true").load())
        node.stop()
        logs = str(node.data_dir / "logs")
        reader = (spark.read.format("skiff-logdir").option("subscribe", topic)
                  .option("includeHeaders", "true"))
        assert _rows(reader.load(logs)) == via_broker
        assert len(via_broker) == 120
        # Offsets options and minPartitions as in the broker source.
        part = (reader.option("startingOffsets", json.dumps({topic: {"0": 3, "1": -2, "2": 39}}))
                .option("endingOffsets", json.dumps({topic: {"0": 10, "1": -1, "2": -1}}))
                .option("minPartitions", "6").load(logs))
        assert part.rdd.getNumPartitions() >= 6
        assert sorted((r.partition, r.offset) for r in part.collect()) == sorted(
            [(0, o) for o in range(3, 10)] + [(1, o) for o in range(39)])
        with pytest.raises(Exception, match="must name the broker's log directory"):
            spark.read.format("skiff-logdir").option("subscribe", topic).load()
    finally:
        node.close()


def _expected_windows(evs: list[dict[str, Any]], watermark_ms: int
                      ) -> dict[tuple[int, str], tuple[int, int]]:
    """The same computation in plain Python: 1-minute windows closed by the watermark."""
    acc: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in evs:
        start = e["ts"] - e["ts"] % 60_000
        a = acc[(start, e["page"])]
        a[0] += 1
        a[1] += e["duration_ms"]
    return {k: (v[0], v[1]) for k, v in acc.items() if k[0] + 60_000 <= watermark_ms}


def test_reference_pipeline_matches_plain_python(spark: Any, skiff_node: Any,
                                                 tmp_path: Path) -> None:
    b = skiff_node.bootstrap
    src, dst = unique_topic("clicks"), unique_topic("click-stats")
    create_topic(b, src, 2)
    create_topic(b, dst, 1)
    t0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
    evs = list(events(600, seed=3, start_ms=t0, spacing_ms=1000))  # ten minutes of clicks
    produce(b, src, [{"key": str(e["user"]).encode(), "value": json.dumps(e).encode()}
                     for e in evs])
    args = clickstream.argparse.Namespace(
        bootstrap=b, input=src, output_topic=dst, parquet=str(tmp_path / "stats"),
        checkpoint=str(tmp_path / "ck"), available_now=True)
    for q in clickstream.start(spark, args):
        assert q.awaitTermination(300)
        assert q.exception() is None
    # The watermark trails the latest event by 30 s; closed windows are emitted.
    watermark = max(e["ts"] for e in evs) - 30_000
    expected = _expected_windows(evs, watermark)
    assert expected, "the generator must close some windows"
    from pyspark.sql import functions as F

    got = {(r.ws, r.page): (r.views, r.total_duration_ms) for r in
           spark.read.parquet(str(tmp_path / "stats"))
           .select(F.unix_millis("window_start").alias("ws"), "page", "views",
                   "total_duration_ms").collect()}
    assert got == expected
    on_topic = {}
    for r in consume_all(b, dst, 1):
        doc = json.loads(r.value)  # type: ignore[arg-type]
        assert r.key == doc["page"].encode()
        on_topic[(doc["window_start"], doc["page"])] = (doc["views"], doc["total_duration_ms"])
    assert len(on_topic) == len(expected)
    assert sorted(on_topic.values()) == sorted(expected.values())
