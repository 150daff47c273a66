"""librdkafka (confluent-kafka): the strictest client.

Consumers use assign() with explicit positions and never commit: no consumer group is
involved (group.id is set only because librdkafka's consumer requires one to exist locally).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from broker.testing import admin as adm
from tests.support.records import (
    CODECS,
    Rec,
    assert_same_records,
    assign_expected_offsets,
    make_records,
    now_ms,
)

pytestmark = pytest.mark.timeout(120)
WAIT_S = 20.0


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def producer(bootstrap: str, codec: str, **extra: Any) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all",
        "linger.ms": 5, "log_level": 3, "message.max.bytes": 2_000_000,
    }
    conf.update(extra)
    return Producer(conf)


def consumer(bootstrap: str, **extra: Any) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": "skiff-compat-unused",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 1, "log_level": 3,
    }
    conf.update(extra)
    return Consumer(conf)


def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    """Produce `recs` in order, acks=all; record the offsets the broker acknowledged."""
    p = producer(bootstrap, codec)
    errors: list[str] = []

    def on_delivery(rec: Rec) -> Any:
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"{rec.brief()}: {err}")
            else:
                assert msg.partition() == rec.partition
                rec.offset = msg.offset()
        return cb

    for r in recs:
        p.produce(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                  partition=r.partition, timestamp=r.timestamp_ms, on_delivery=on_delivery(r))
        p.poll(0)
    left = p.flush(WAIT_S)
    assert left == 0, f"{left} records not acknowledged within {WAIT_S}s ({codec})"
    assert not errors, f"delivery failed ({codec}): {errors[:5]}"


def to_rec(m: Message) -> Rec:
    ts_type, ts = m.timestamp()
    assert ts_type == TIMESTAMP_CREATE_TIME, f"timestamp type {ts_type} at offset {m.offset()}"
    headers = m.headers() or []
    assert isinstance(headers, list)
    return Rec(key=m.key(), value=m.value(), headers=[(k, v) for k, v in headers],  # type: ignore[misc]
               timestamp_ms=ts, partition=m.partition() or 0, offset=m.offset())


def consume(c: Consumer, n: int, timeout: float = WAIT_S) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consumer error: {err}")
        out.append(to_rec(m))
    return out


def assert_nothing_more(c: Consumer, wait: float = 1.0) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            raise AssertionError(f"unexpected extra record {to_rec(m).brief()}")


@pytest.fixture
def topic(bootstrap: str, topic_name: str) -> Iterator[str]:
    yield topic_name
    adm.try_delete_topic(bootstrap, topic_name)


def test_cluster_metadata(bootstrap: str) -> None:
    a = admin_client(bootstrap)
    md = a.list_topics(timeout=WAIT_S)
    assert isinstance(md.cluster_id, str) and md.cluster_id, md.cluster_id
    assert len(md.brokers) == 1, md.brokers
    (broker,) = md.brokers.values()
    host, port = bootstrap.rsplit(":", 1)
    assert (broker.host, broker.port) == (host, int(port)), "advertised listener must be reachable"
    assert md.controller_id == broker.id, "one node: it is its own controller"
    desc = a.describe_cluster(request_timeout=WAIT_S).result(timeout=WAIT_S)
    assert desc.cluster_id == md.cluster_id
    assert [n.id for n in desc.nodes] == [broker.id]
    assert desc.controller is not None


TOPIC_OVERRIDES = {"retention.ms": "3600000", "max.message.bytes": "2000000"}


def test_create_topic_validate_only_creates_nothing(bootstrap: str, topic: str) -> None:
    a = admin_client(bootstrap)
    fut = a.create_topics([NewTopic(topic, 3, 1, config=TOPIC_OVERRIDES)], validate_only=True,
                          operation_timeout=WAIT_S)[topic]
    assert fut.result(timeout=WAIT_S) is None
    assert topic not in a.list_topics(timeout=WAIT_S).topics, "validate_only created the topic"


def test_create_and_delete_topic(bootstrap: str, topic: str) -> None:
    a = admin_client(bootstrap)
    a.create_topics([NewTopic(topic, 3, 1, config=TOPIC_OVERRIDES)],
                    operation_timeout=WAIT_S)[topic].result(timeout=WAIT_S)
    adm.wait_topic_ready(bootstrap, topic, 3)

    again = a.create_topics([NewTopic(topic, 3, 1)], operation_timeout=WAIT_S)[topic]
    with pytest.raises(KafkaException) as exc:
        again.result(timeout=WAIT_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    md = a.list_topics(topic=topic, timeout=WAIT_S).topics[topic]
    assert sorted(md.partitions) == [0, 1, 2]
    assert all(p.leader >= 0 and p.replicas == [p.leader] == p.isrs
               for p in md.partitions.values()), md.partitions

    a.delete_topics([topic], operation_timeout=WAIT_S)[topic].result(timeout=WAIT_S)
    adm.wait_topic_absent(bootstrap, topic)
    res = ConfigResource(ResourceType.TOPIC, topic)
    with pytest.raises(KafkaException) as exc:
        a.describe_configs([res], request_timeout=WAIT_S)[res].result(timeout=WAIT_S)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc.value


def test_describe_topic_config(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1, TOPIC_OVERRIDES)
    cfg = adm.describe_topic_config(bootstrap, topic)
    for name, value in TOPIC_OVERRIDES.items():
        entry: ConfigEntry = cfg[name]
        assert entry.value == value, (name, entry.value)
        assert ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG, (name, entry.source)
        assert not entry.is_default, name
    # a config left alone is still described, with Kafka's default and a non-topic source
    cleanup = cfg.get("cleanup.policy")
    assert cleanup is not None, f"cleanup.policy not described; got {sorted(cfg)}"
    assert cleanup.value == "delete"
    assert ConfigSource(cleanup.source) != ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_alter_topic_config(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1, {"retention.ms": "3600000"})
    a = admin_client(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "10485760",
                    incremental_operation=AlterConfigOpType.SET),
    ])
    a.incremental_alter_configs([res])[res].result(timeout=WAIT_S)
    cfg = adm.describe_topic_config(bootstrap, topic)
    assert cfg["retention.ms"].value == "7200000"
    assert cfg["segment.bytes"].value == "10485760"
    assert ConfigSource(cfg["segment.bytes"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG

    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "", incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([res])[res].result(timeout=WAIT_S)
    cfg = adm.describe_topic_config(bootstrap, topic)
    assert cfg["retention.ms"].value == "604800000", "DELETE must restore Kafka's default"
    assert ConfigSource(cfg["retention.ms"].source) != ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_every_codec_then_consume_from_earliest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 2)
    base = now_ms() - 60_000
    expected: list[Rec] = []
    for n, codec in enumerate(CODECS):
        recs = make_records(codec, 24, base_ts=base + n * 1000, partitions=(0, 1))
        produce(bootstrap, topic, recs, codec)
        expected += recs
    acked = [r.offset for r in expected]
    assign_expected_offsets(expected)
    assert acked == [r.offset for r in expected], "acked offsets not contiguous per partition"

    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        got = consume(c, len(expected))
        assert_same_records(expected, got)
        assert_nothing_more(c)
        for p in (0, 1):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT_S)
            assert (low, high) == (0, sum(1 for r in expected if r.partition == p))
    finally:
        c.close()


def wait_fetching_at(c: Consumer, stats: list[dict[str, Any]], topic: str, partition: int,
                     offset: int, timeout: float = WAIT_S) -> None:
    """Until librdkafka reports the partition actively fetching from `offset` (reset done)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            raise AssertionError(f"record before produce: {to_rec(m).brief()}")
        if stats:
            parts = stats[-1].get("topics", {}).get(topic, {}).get("partitions", {})
            last = parts.get(str(partition))
            if last and last.get("fetch_state") == "active" and last.get("next_offset") == offset:
                return
    raise AssertionError(f"partition never fetched from {offset}; last stats {last}")


def test_consume_from_latest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    before = make_records("old", 10, base_ts=now_ms() - 10_000)
    produce(bootstrap, topic, before, "lz4")

    stats: list[dict[str, Any]] = []
    c = consumer(bootstrap, **{"statistics.interval.ms": 50,
                               "stats_cb": lambda s: stats.append(json.loads(s))})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        wait_fetching_at(c, stats, topic, 0, 10)
        after = make_records("new", 12, base_ts=now_ms())
        produce(bootstrap, topic, after, "zstd")
        assign_expected_offsets(after, {0: 10})
        assert_same_records(after, consume(c, len(after)))
        assert_nothing_more(c)
    finally:
        c.close()


def test_consume_from_timestamp(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    base = now_ms() - 100_000
    first = make_records("a", 10, base_ts=base)           # ts base .. base+9, offsets 0..9
    second = make_records("b", 10, base_ts=base + 50_000)  # offsets 10..19
    produce(bootstrap, topic, first, "gzip")
    produce(bootstrap, topic, second, "snappy")
    assign_expected_offsets(first + second)

    c = consumer(bootstrap)
    try:
        def lookup(ts: int) -> int:
            (tp,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=WAIT_S)
            assert tp.error is None, tp.error
            return int(tp.offset)

        assert lookup(base) == 0
        assert lookup(base + 5) == 5, "first offset with timestamp >= target, inside a batch"
        assert lookup(base + 10) == 10, "between batches: the next batch's first record"
        assert lookup(base + 50_003) == 13
        assert lookup(base + 99_000) == OFFSET_END, "no record that late: offset -1"

        c.assign([TopicPartition(topic, 0, lookup(base + 7))])
        assert_same_records((first + second)[7:], consume(c, 13))
        assert_nothing_more(c)
    finally:
        c.close()

    # the admin ListOffsets API: earliest, latest, timestamp, max timestamp
    a = admin_client(bootstrap)
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": (OffsetSpec.earliest(), 0),  # type: ignore[no-untyped-call]
        "latest": (OffsetSpec.latest(), 20),  # type: ignore[no-untyped-call]
        "timestamp": (OffsetSpec.for_timestamp(base + 50_000), 10),
        "max_timestamp": (OffsetSpec.max_timestamp(), 19),  # type: ignore[no-untyped-call]
    }
    for label, (spec, want) in specs.items():
        res = a.list_offsets({tp: spec}, request_timeout=WAIT_S)[tp].result(timeout=WAIT_S)
        assert res.offset == want, f"ListOffsets {label}: {res.offset} != {want}"
