"""librdkafka helpers for the Spark tests: topics, producing with delivery reports, reading."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def by_offset(recs: list[Rec] | object) -> list[Rec]:
    return sorted(recs, key=lambda r: (r.topic, r.partition, r.offset))  # type: ignore[arg-type]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not visible")


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_partitions([NewPartitions(name, total)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, items: list[dict[str, object]]) -> list[Rec]:
    """Produce items (key, value, partition, headers, timestamp) and return what was
    acknowledged, with the broker's offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    out: list[Rec] = []
    errors: list[str] = []

    def cb(err: object, msg: object, headers: object) -> None:
        if err is not None:
            errors.append(str(err))
            return
        _, ts = msg.timestamp()  # type: ignore[attr-defined]
        out.append(Rec(msg.topic(), msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                       msg.key(), msg.value(), ts,  # type: ignore[attr-defined]
                       tuple(headers or ())))  # type: ignore[arg-type]

    for it in items:
        kw: dict[str, object] = {}
        for k in ("partition", "headers", "timestamp"):
            if it.get(k) is not None:
                kw[k] = it[k]
        hdrs = it.get("headers")
        p.produce(topic, it.get("value"), it.get("key"),
                  on_delivery=lambda e, m, h=hdrs: cb(e, m, h), **kw)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors
    return out


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60,
                isolation: str = "read_committed") -> list[Rec]:
    """Every record of the topic, from offset 0 to the end of each partition (for
    read_committed, its last stable offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Rec] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise RuntimeError(m.error())
                eof.discard(m.partition())
                out.append(Rec(m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                               m.timestamp()[1], tuple(m.headers() or ())))
    finally:
        c.close()
    assert len(eof) == partitions, f"did not reach the end of {topic}"
    return out


def row_rec(row: object) -> Rec:
    """A Spark row of the skiff schema (plus `ts_ms` = unix_millis(timestamp)) as a Rec."""
    r = row.asDict(recursive=True)  # type: ignore[attr-defined]
    hs = r.get("headers") or ()

    def b(v: object) -> bytes | None:
        return None if v is None else bytes(v)  # type: ignore[arg-type]

    return Rec(r["topic"], r["partition"], r["offset"], b(r["key"]), b(r["value"]),
               r["ts_ms"], tuple((h["key"], b(h["value"])) for h in hs))
