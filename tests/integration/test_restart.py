"""Restart: what a broker acknowledged with acks=all survives a clean stop (SIGTERM) and a
crash (SIGKILL), in order and at the same offsets; topics, deletions and topic config
overrides survive too. Each test runs its own node (own_skiff_node) so stopping it does not
disturb other tests; against an external broker (SKIFF_TEST_BOOTSTRAP) they skip.

Kafka acknowledges acks=all once the record is in every in-sync replica's log, which with
one node means written to its log (page cache), not fsynced: a SIGKILL of the process keeps
such writes (the kernel still has them). A power cut is a different test.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from broker.testing import admin as adm
from tests.support.node import ExternalBroker, SkiffNode
from tests.support.records import (
    CODECS,
    Rec,
    assert_same_records,
    assign_expected_offsets,
    make_records,
    now_ms,
    unique_topic,
)

pytestmark = pytest.mark.timeout(240)
WAIT_S = 30.0
OVERRIDES = {"retention.ms": "3600000", "segment.bytes": "1048576"}


def require_own_process(node: SkiffNode | ExternalBroker) -> SkiffNode:
    if isinstance(node, ExternalBroker):
        pytest.skip(node.reason)
    return node


def produce_all(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "compression.type": codec, "log_level": 3})
    errors: list[str] = []

    def cb_for(r: Rec) -> Any:
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                r.offset = msg.offset()
        return cb

    for r in recs:
        p.produce(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                  partition=r.partition, timestamp=r.timestamp_ms, on_delivery=cb_for(r))
        p.poll(0)
    assert p.flush(WAIT_S) == 0 and not errors, errors[:5]


def read_all(bootstrap: str, topic: str, partitions: int, expect: int) -> list[Rec]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-restart-unused",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100, "log_level": 3})
    out: list[Rec] = []
    at_eof: set[int] = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and (len(out) < expect or len(at_eof) < partitions):
            m = c.poll(0.2)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_eof.add(m.partition() or 0)
                    continue
                raise AssertionError(f"consumer error: {err}")
            at_eof.discard(m.partition() or 0)
            headers = m.headers() or []
            assert isinstance(headers, list)
            out.append(Rec(key=m.key(), value=m.value(), headers=list(headers),  # type: ignore[arg-type]
                           timestamp_ms=m.timestamp()[1], partition=m.partition() or 0,
                           offset=m.offset()))
    finally:
        c.close()
    return out


def check_config(bootstrap: str, topic: str, expected: dict[str, str]) -> None:
    cfg = adm.describe_topic_config(bootstrap, topic)
    for name, value in expected.items():
        assert cfg[name].value == value, (name, cfg[name].value)
        assert ConfigSource(cfg[name].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG, name


def restart(node: SkiffNode, sig: int) -> None:
    code = node.stop(sig)
    if sig == signal.SIGTERM:
        assert code == 0, f"clean shutdown must exit 0, got {code}\n{node.log_tail()}"
    else:
        assert code == -signal.SIGKILL
    node.start()
    node.wait_ready()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_acknowledged_records_topics_and_configs_survive(
        own_skiff_node: SkiffNode | ExternalBroker, sig: int) -> None:
    node = require_own_process(own_skiff_node)
    bootstrap = node.bootstrap
    topic = unique_topic("restart")
    gone = unique_topic("restart-deleted")
    adm.create_topic(bootstrap, topic, 3, OVERRIDES)
    adm.create_topic(bootstrap, gone, 1)
    adm.delete_topic(bootstrap, gone)
    adm.wait_topic_absent(bootstrap, gone)

    # a config changed after creation must survive too
    a = adm.admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(timeout=WAIT_S)
    expected_cfg = {**OVERRIDES, "retention.ms": "7200000"}

    base = now_ms() - 60_000
    sent: list[Rec] = []
    for n, codec in enumerate(CODECS):
        recs = make_records(f"{codec}", 60, base_ts=base + n * 1000, partitions=(0, 1, 2))
        produce_all(bootstrap, topic, recs, codec)
        sent += recs
    acked = [r.offset for r in sent]
    assign_expected_offsets(sent)
    assert acked == [r.offset for r in sent]

    pid_before = node.pid
    restart(node, sig)
    assert node.pid != pid_before

    assert adm.topic_partitions(bootstrap, topic) is not None, "topic lost in restart"
    assert len(adm.topic_partitions(bootstrap, topic) or {}) == 3
    assert adm.topic_partitions(bootstrap, gone) is None, "deleted topic came back"
    check_config(bootstrap, topic, expected_cfg)
    assert_same_records(sent, read_all(bootstrap, topic, 3, len(sent)))

    # the log goes on where it was: new records get the next offsets, none is reused
    more = make_records("after", 30, base_ts=now_ms(), partitions=(0, 1, 2))
    produce_all(bootstrap, topic, more, "lz4")
    acked = [r.offset for r in more]
    assign_expected_offsets(more, {p: sum(1 for r in sent if r.partition == p) for p in range(3)})
    assert acked == [r.offset for r in more]
    assert_same_records(sent + more, read_all(bootstrap, topic, 3, len(sent) + len(more)))


def test_kill_during_produce_keeps_every_acknowledged_record(
        own_skiff_node: SkiffNode | ExternalBroker) -> None:
    """SIGKILL while a producer is mid-stream: every record acknowledged before the kill is
    there after restart at its acknowledged offset; the log has no gap; anything beyond the
    acknowledged records is a prefix of what was in flight, in order."""
    node = require_own_process(own_skiff_node)
    bootstrap = node.bootstrap
    topic = unique_topic("restart-inflight")
    adm.create_topic(bootstrap, topic, 1)

    base = now_ms() - 120_000
    recs = [Rec(key=f"k{i}".encode(), value=f"value-{i}-".encode() * (1 + i % 9),
                headers=[("i", str(i).encode())], timestamp_ms=base + i)
            for i in range(20_000)]
    acked: dict[int, Rec] = {}  # index in recs -> record with its acknowledged offset
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                      "max.in.flight.requests.per.connection": 1, "retries": 0,
                      "message.timeout.ms": 5000, "compression.type": "zstd", "log_level": 0})
        for i, r in enumerate(recs):
            if stop.is_set():
                break

            def cb(err: KafkaError | None, msg: Message, i: int = i) -> None:
                if err is None:
                    with lock:
                        acked[i] = Rec(recs[i].key, recs[i].value, recs[i].headers,
                                       recs[i].timestamp_ms, 0, msg.offset())
            while True:
                try:
                    p.produce(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                              partition=0, timestamp=r.timestamp_ms, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        p.flush(8)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with lock:
            if len(acked) >= 2000:
                break
        time.sleep(0.01)
    node.kill()
    stop.set()
    t.join(timeout=20)
    assert not t.is_alive()
    with lock:
        got_acks = dict(acked)
    assert len(got_acks) >= 2000, f"only {len(got_acks)} acknowledged before the kill"
    # with one in flight and no retries, acknowledgements form a prefix of recs
    assert sorted(got_acks) == list(range(len(got_acks)))
    assert [got_acks[i].offset for i in range(len(got_acks))] == list(range(len(got_acks)))

    node.start()
    node.wait_ready()
    stored = read_all(bootstrap, topic, 1, len(got_acks))
    lost = len(got_acks) - len(stored)
    assert lost <= 0, f"{lost} acknowledged records lost"
    assert [r.offset for r in stored] == list(range(len(stored))), "gap in the log"
    expected = [got_acks[i] for i in range(len(got_acks))]
    assert_same_records(expected, stored[:len(expected)])
    # beyond the acknowledged ones: only records that were sent, in the order sent
    for j, r in enumerate(stored[len(expected):], start=len(expected)):
        assert (r.key, r.value) == (recs[j].key, recs[j].value), f"unexpected record at {j}"
