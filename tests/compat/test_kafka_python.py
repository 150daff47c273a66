"""kafka-python 3.x: its own admin client, producer, and a group-less consumer (group_id=None,
assign(), no commits). It cannot send null header values; everything else it can express is
checked. Codecs: gzip (zlib), snappy (python-snappy/cramjam), lz4, zstd (zstandard)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import TopicAlreadyExistsError

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
TOPIC_OVERRIDES = {"retention.ms": "3600000", "max.message.bytes": "2000000"}


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(WAIT_S * 1000))


def make_consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         fetch_max_wait_ms=100, request_timeout_ms=int(WAIT_S * 1000) + 5000)


def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                      compression_type=None if codec == "none" else codec,
                      max_request_size=2_000_000)
    try:
        futures = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                          partition=r.partition, timestamp_ms=r.timestamp_ms) for r in recs]
        p.flush(timeout=WAIT_S)
        for r, f in zip(recs, futures, strict=True):
            md = f.get(timeout=WAIT_S)
            assert md.partition == r.partition
            r.offset = md.offset
    finally:
        p.close(timeout=5)


def consume(c: KafkaConsumer, n: int, timeout: float = WAIT_S) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            for m in msgs:
                assert m.timestamp_type == 0, f"CreateTime expected at offset {m.offset}"
                out.append(Rec(key=m.key, value=m.value, headers=list(m.headers),
                               timestamp_ms=m.timestamp, partition=m.partition, offset=m.offset))
    out.sort(key=lambda r: (r.partition, r.offset or 0))  # poll groups by partition
    return out


def assert_nothing_more(c: KafkaConsumer, wait: float = 1.0) -> None:
    extra = consume(c, 1, timeout=wait)
    assert not extra, f"unexpected extra record {extra[0].brief()}"


def python_records(tag: str, n: int, base_ts: int, partitions: tuple[int, ...] = (0,)) -> list[Rec]:
    return make_records(tag, n, base_ts=base_ts, partitions=partitions, null_header_values=False)


@pytest.fixture
def topic(bootstrap: str, topic_name: str) -> Iterator[str]:
    yield topic_name
    adm.try_delete_topic(bootstrap, topic_name)


def test_cluster_metadata(bootstrap: str) -> None:
    a = admin_client(bootstrap)
    try:
        desc: dict[str, Any] = a.describe_cluster()
    finally:
        a.close()
    host, port = bootstrap.rsplit(":", 1)
    assert isinstance(desc["cluster_id"], str) and desc["cluster_id"]
    assert [(b["host"], b["port"]) for b in desc["brokers"]] == [(host, int(port))]
    assert desc["controller_id"] == desc["brokers"][0]["broker_id"]


def test_create_describe_delete_topic(bootstrap: str, topic: str) -> None:
    a = admin_client(bootstrap)
    try:
        a.create_topics([NewTopic(topic, 2, 1, topic_configs=TOPIC_OVERRIDES)])
        adm.wait_topic_ready(bootstrap, topic, 2)
        assert topic in a.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([NewTopic(topic, 2, 1)])

        (t,) = a.describe_topics([topic])
        assert t["error_code"] == 0
        assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1]

        cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                 config_filter="all")["topic"][topic]
        for name, value in TOPIC_OVERRIDES.items():
            assert cfg[name]["value"] == value, (name, cfg.get(name))
            assert cfg[name]["config_source"] == "DYNAMIC_TOPIC_CONFIG", (name, cfg[name])
        assert cfg["cleanup.policy"]["value"] == "delete"
        assert cfg["cleanup.policy"]["config_source"] != "DYNAMIC_TOPIC_CONFIG"
        modified = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        assert set(TOPIC_OVERRIDES) <= set(modified["topic"][topic]), modified

        a.delete_topics([topic])
        adm.wait_topic_absent(bootstrap, topic)
        assert topic not in a.list_topics()
    finally:
        a.close()


def test_every_codec_then_consume_from_earliest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 2)
    base = now_ms() - 60_000
    expected: list[Rec] = []
    for n, codec in enumerate(CODECS):
        recs = python_records(codec, 24, base + n * 1000, (0, 1))
        produce(bootstrap, topic, recs, codec)
        expected += recs
    acked = [r.offset for r in expected]
    assign_expected_offsets(expected)
    assert acked == [r.offset for r in expected]

    c = make_consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        assert_same_records(expected, consume(c, len(expected)))
        assert_nothing_more(c)
        counts = {p: sum(1 for r in expected if r.partition == p) for p in (0, 1)}
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
    finally:
        c.close()


def test_consume_from_latest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, python_records("old", 10, now_ms() - 10_000), "gzip")
    c = make_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp, timeout_ms=int(WAIT_S * 1000)) == 10
        after = python_records("new", 12, now_ms())
        produce(bootstrap, topic, after, "lz4")
        assign_expected_offsets(after, {0: 10})
        assert_same_records(after, consume(c, len(after)))
        assert_nothing_more(c)
    finally:
        c.close()


def test_consume_from_timestamp(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    base = now_ms() - 100_000
    first = python_records("a", 10, base)
    second = python_records("b", 10, base + 50_000)
    produce(bootstrap, topic, first, "zstd")
    produce(bootstrap, topic, second, "snappy")
    assign_expected_offsets(first + second)

    c = make_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)

        def lookup(ts: int) -> int | None:
            found = c.offsets_for_times({tp: ts})[tp]
            return None if found is None else int(found.offset)

        assert lookup(base) == 0
        assert lookup(base + 5) == 5, "first offset with timestamp >= target, inside a batch"
        assert lookup(base + 10) == 10
        assert lookup(base + 50_003) == 13
        assert lookup(base + 99_000) is None, "no record that late"

        c.assign([tp])
        start = lookup(base + 7)
        assert start is not None
        c.seek(tp, start)
        assert_same_records((first + second)[7:], consume(c, 13))
        assert_nothing_more(c)
    finally:
        c.close()
