"""Old clients with their old API versions (issue 23): kafka-python pinned to a broker version
from before KIP-896's floors, so it sends Produce v0-v2 with magic 0/1 message sets, Fetch
v0-v2 (down-converted answers), ListOffsets v0, OffsetCommit v0-v2 and OffsetFetch v0-v1 — the
versions Kafka 3.9 served and 4.0 dropped. Each pinned client produces, consumes what it
produced, commits its position and reads back the committed offset and the end offset.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.testing import admin as adm

pytestmark = pytest.mark.timeout(120)
WAIT_S = 20.0

# pinned broker version -> what kafka-python then sends (kafka/conn.py, kafka/protocol)
# pinned broker version -> the removed-in-Kafka-4 (api, version) pairs it must have sent, as
# the broker logs them (once per client)
OLD = {
    (0, 10, 0): {("produce", 2), ("fetch", 2), ("list_offsets", 0)},
    (0, 9): {("produce", 1), ("fetch", 1), ("list_offsets", 0)},
    (0, 8, 2): {("produce", 0), ("fetch", 0), ("list_offsets", 0), ("offset_commit", 1)},
    # "zookeeper-storage offset commits" in kafka-python: OffsetCommit v0 / OffsetFetch v0
    (0, 8, 1): {("produce", 0), ("fetch", 0), ("list_offsets", 0), ("offset_commit", 0),
                ("offset_fetch", 0)},
}


def _consume(c: KafkaConsumer, n: int) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(out) < n and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            out.extend(msgs)
    return out


@pytest.mark.parametrize("api_version", list(OLD), ids=lambda v: ".".join(map(str, v)))
@pytest.mark.parametrize("codec", [None, "gzip"])
def test_pinned_old_kafka_python(skiff_node: Any, bootstrap: str, topic_name: str,
                                 api_version: tuple[int, ...], codec: str | None) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    client_id = f"old-{topic_name}"
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks=1,
                      client_id=client_id,
                      compression_type=codec, linger_ms=5)
    try:
        futures = [p.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, partition=0)
                   for i in range(20)]
        p.flush(timeout=WAIT_S)
        offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    finally:
        p.close(timeout=5)
    assert offsets == list(range(20))

    group = f"{topic_name}-g"
    c = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=group,
                      client_id=client_id,
                      enable_auto_commit=False, fetch_max_wait_ms=100,
                      request_timeout_ms=int(WAIT_S * 1000) + 5000)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = _consume(c, 20)
        assert [(m.offset, m.key, m.value) for m in got] == [
            (i, b"k%d" % i, b"v%d" % i) for i in range(20)]
        if api_version >= (0, 10):
            assert all(m.timestamp > 0 for m in got)  # magic 1 carries timestamps
        else:
            assert all(m.timestamp in (None, -1) for m in got)  # magic 0 has none
        assert c.end_offsets([tp]) == {tp: 20}
        assert c.beginning_offsets([tp]) == {tp: 0}
        c.seek(tp, 15)
        c.commit()
        assert c.committed(tp) == 15
    finally:
        c.close()
    # a new consumer of the group resumes at the committed offset
    c2 = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=group,
                       enable_auto_commit=False, fetch_max_wait_ms=100,
                       request_timeout_ms=int(WAIT_S * 1000) + 5000)
    try:
        c2.assign([tp])
        assert c2.committed(tp) == 15
        rest = _consume(c2, 5)
        assert [m.offset for m in rest] == [15, 16, 17, 18, 19]
    finally:
        c2.close()
    log_path = getattr(skiff_node, "log_path", None)
    if log_path is not None:  # an external broker's log is not readable here
        assert OLD[api_version] <= _logged_old_versions(log_path, client_id)


def _logged_old_versions(log_path: Any, client_id: str) -> set[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if "old api version" in line and f"client_id={client_id}" in line:
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                found.add((fields["api"], int(fields["api_version"])))
        if found:
            return found
        time.sleep(0.1)
    return found
