"""Load under a client quota, for tests/compat/test_quotas.py and bench/quota_bench.py: a
greedy librdkafka producer or consumer held to a byte rate of RATE for a number of seconds,
and the AlterClientQuotas/DescribeClientQuotas calls (by kio) that set the quota."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.schema.describe_client_quotas.v1 import request as describe_req
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection

RATE = 100_000  # bytes/s
VALUE = 1000
A: Any = alter_req
D: Any = describe_req


def call(bootstrap: str, api_key: int, version: int, request: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)

    async def go() -> Any:
        conn = KafkaConnection(host, int(port), "quota-test")
        try:
            return await conn.request(api_key, version, request, 10.0)
        finally:
            await conn.close()

    return asyncio.run(go())


def set_quota(bootstrap: str, client_id: str, key: str, value: float | None) -> None:
    resp = call(bootstrap, 49, 1, A.AlterClientQuotasRequest(validate_only=False, entries=(
        A.EntryData(entity=(A.EntityData(entity_type="client-id", entity_name=client_id),),
                    ops=(A.OpData(key=key, value=value or 0.0, remove=value is None),)),)))
    assert [e.error_code for e in resp.entries] == [ErrorCode.none], resp


def describe(bootstrap: str, client_id: str) -> dict[str, float]:
    resp = call(bootstrap, 48, 1, D.DescribeClientQuotasRequest(strict=True, components=(
        D.ComponentData(entity_type="client-id", match_type=0, match=client_id),)))
    assert resp.error_code is ErrorCode.none, resp.error_message
    return {v.key: v.value for e in resp.entries for v in e.values}


def make_topic(bootstrap: str, label: str) -> str:
    name = f"quota-{label}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(timeout=20)
    return name


def produce_for(bootstrap: str, seconds: float) -> tuple[float, list[int]]:
    """A greedy librdkafka producer under a producer_byte_rate of RATE for `seconds`:
    (bytes/s acknowledged, throttle times librdkafka reported)."""
    topic = make_topic(bootstrap, "quota-produce")
    cid = f"quota-producer-{uuid.uuid4().hex[:8]}"
    set_quota(bootstrap, cid, "producer_byte_rate", RATE)
    throttles: list[int] = []
    acked = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "linger.ms": 5,
                  "acks": "all", "log_level": 3, "compression.type": "none",
                  "batch.size": 16384, "queue.buffering.max.kbytes": 512,
                  "max.in.flight.requests.per.connection": 1,
                  "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000))})
    payload = b"q" * VALUE
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, payload, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    sent = acked[0]
    p.purge()
    p.flush(10)
    set_quota(bootstrap, cid, "producer_byte_rate", None)
    return sent / seconds, throttles


def consume_for(bootstrap: str, seconds: float) -> tuple[float, list[int], bool]:
    """A librdkafka consumer under a consumer_byte_rate of RATE for `seconds`, reading a
    topic holding more than it may read: (bytes/s read, throttle times, read everything?).

    Small batches: a Fetch returns at least one whole batch, and one larger than the quota
    allows in a window would be throttled and refetched forever (as in Kafka)."""
    topic = make_topic(bootstrap, "quota-consume")
    total = int(RATE * seconds * (1.6 if seconds >= 20 else 4.0))
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 3,
                  "compression.type": "none", "batch.size": 16384})
    payload = b"c" * VALUE
    for _ in range(total // VALUE):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(30) == 0
    cid = f"quota-consumer-{uuid.uuid4().hex[:8]}"
    set_quota(bootstrap, cid, "consumer_byte_rate", RATE)
    throttles: list[int] = []
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": cid,
                  "group.id": f"g-{cid}", "enable.auto.commit": False, "log_level": 3,
                  "fetch.queue.backoff.ms": 1,
                  "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000))})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got += len(m.value() or b"")
    finally:
        c.close()
    set_quota(bootstrap, cid, "consumer_byte_rate", None)
    return got / seconds, throttles, got >= total
