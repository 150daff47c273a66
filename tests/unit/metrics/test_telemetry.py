"""Client telemetry (KIP-714): the store behind GetTelemetrySubscriptions/PushTelemetry."""

from __future__ import annotations

import gzip
import uuid

import pytest
import zstandard
from kio.schema.errors import ErrorCode
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from broker.errors import KafkaError
from broker.metrics.telemetry import (
    TelemetryStore,
    prometheus_name,
    requested_metrics,
    telemetry_families,
)

CID = uuid.UUID("11111111-2222-3333-4444-555555555555")


def payload() -> bytes:
    doc = metrics_pb2.MetricsData()
    sm = doc.resource_metrics.add().scope_metrics.add()
    g = sm.metrics.add(name="org.apache.kafka.producer.record.queue.time.avg",
                       description="queue time")
    p = g.gauge.data_points.add(as_double=1.5)
    p.attributes.append(common_pb2.KeyValue(key="node.id",
                                            value=common_pb2.AnyValue(string_value="1")))
    s = sm.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    s.sum.is_monotonic = True
    s.sum.data_points.add(as_int=3)
    h = sm.metrics.add(name="org.apache.kafka.producer.some.histogram")
    h.histogram.data_points.add(count=1)
    return doc.SerializeToString()


def test_names_and_requested_metrics() -> None:
    assert prometheus_name("org.apache.kafka.client.x-y") == "org_apache_kafka_client_x_y"
    assert requested_metrics([]) == ()
    assert requested_metrics(["*"]) == ("",)
    assert requested_metrics(["org.apache.kafka.producer.", " "]) == (
        "org.apache.kafka.producer.",)


def test_a_push_is_kept_and_exported_with_the_clients_labels() -> None:
    store = TelemetryStore(["*"], 1000, 1 << 20)
    assert store.subscribe(None) != store.subscribe(None)
    assert store.subscribe(CID) == CID
    store.push(CID, store.subscription_id, False, 4,
               zstandard.ZstdCompressor().compress(payload()), "app-1", now_ms=10_000)
    store.push(CID, store.subscription_id, False, 1, gzip.compress(payload()), "app-1",
               now_ms=10_500)
    fams = {f.name: f for f in telemetry_families(store, now_ms=11_000)}
    gauge = fams["org_apache_kafka_producer_record_queue_time_avg"]
    assert gauge.type == "gauge"
    assert [(s.labels, s.value) for s in gauge.samples] == [
        ({"client_instance_id": str(CID), "client_id": "app-1", "node_id": "1"}, 1.5)]
    counter = fams["org_apache_kafka_producer_connection_creation"]
    assert counter.type == "counter"
    assert counter.samples[0].name == "org_apache_kafka_producer_connection_creation_total"
    assert counter.samples[0].value == 3
    assert "org_apache_kafka_producer_some_histogram" not in fams
    assert fams["skiff_client_telemetry_pushes"].samples[0].value == 2

    class Static(Collector):
        def collect(self) -> list:  # type: ignore[type-arg]
            return list(fams.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Static())
    assert b'client_id="app-1"' in generate_latest(registry)


def test_refused_pushes_carry_kip714_errors() -> None:
    store = TelemetryStore(["*"], 1000, 100)
    cases = [
        (dict(subscription_id=store.subscription_id + 1), ErrorCode.unknown_subscription_id),
        (dict(data=b"x" * 101), ErrorCode.telemetry_too_large),
        (dict(compression=9), ErrorCode.unsupported_compression_type),
        (dict(data=b"\xff\xff\xff"), ErrorCode.invalid_record),
        (dict(cid=None), ErrorCode.invalid_request),
    ]
    for change, error in cases:
        args = {"cid": CID, "subscription_id": store.subscription_id, "compression": 0,
                "data": b"", **change}
        with pytest.raises(KafkaError) as exc:
            store.push(args["cid"], args["subscription_id"], False, args["compression"],
                       args["data"], "c", 0)
        assert exc.value.error_code is error
    assert store.rejected == len(cases)


def test_terminating_and_silent_clients_are_dropped() -> None:
    store = TelemetryStore(["*"], 1000, 1 << 20)
    other = uuid.uuid4()
    store.push(CID, store.subscription_id, False, 0, payload(), "a", now_ms=0)
    store.push(other, store.subscription_id, False, 0, payload(), "b", now_ms=0)
    store.push(CID, store.subscription_id, True, 0, payload(), "a", now_ms=100)
    assert set(store.clients) == {other}
    store.expire(now_ms=3001)
    assert store.clients == {}


def test_nothing_requested_keeps_nothing() -> None:
    store = TelemetryStore([], 1000, 1 << 20)
    assert store.requested == ()
    store.push(CID, store.subscription_id, False, 0, payload(), "a", now_ms=0)
    assert store.clients == {}


def test_client_metrics_subscriptions_match_and_merge() -> None:
    """Kafka's client-metrics resources: each matching subscription adds its metrics, the
    shortest interval wins, a changed subscription changes the id (the client's next push is
    UNKNOWN_SUBSCRIPTION_ID and it asks again)."""
    from broker.metrics.telemetry import ClientMeta

    resources: dict[str, dict[str, str]] = {
        "producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
                      "match": "client_id=app-.*,client_software_name=apache-kafka-java"},
        "all-quick": {"metrics": "org.apache.kafka.consumer.", "interval.ms": "500",
                      "match": "client_source_address=10\\..*"},
    }
    store = TelemetryStore([], 300000, 1 << 20, resources=lambda: resources)
    java = ClientMeta(CID, "app-1", "127.0.0.1", 5000, "apache-kafka-java", "4.4.0")
    sub = store.subscription(java)
    assert (sub.requested, sub.interval_ms) == (("org.apache.kafka.producer.",), 1000)
    other = store.subscription(ClientMeta(CID, "app-1", "10.0.0.1", 1, "librdkafka", "2"))
    assert (other.requested, other.interval_ms) == (("org.apache.kafka.consumer.",), 500)
    nothing = store.subscription(ClientMeta(CID, "else", "127.0.0.1", 1))
    assert (nothing.requested, nothing.interval_ms) == ((), 300000)
    store.push(CID, sub.subscription_id, False, 0, payload(), "app-1", 0, java)
    assert CID in store.clients
    resources["producers"]["metrics"] = "*"
    with pytest.raises(KafkaError) as refused:
        store.push(CID, sub.subscription_id, False, 0, payload(), "app-1", 10, java)
    assert refused.value.error_code is ErrorCode.unknown_subscription_id
    assert store.subscription(java).requested == ("",)  # `*`: every metric
