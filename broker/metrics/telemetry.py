"""Client telemetry (KIP-714): what clients push, kept for the metrics endpoint.

GetTelemetrySubscriptions tells a client which metrics to push and how often; PushTelemetry
carries them as an OTLP `MetricsData` protobuf (optionally compressed). Kafka decides what
to request from `client-metrics` resources; Skiff from two node settings:
`client.telemetry.metrics` (metric-name prefixes, `*` for all; empty, the default: request
nothing, so clients push nothing) and `client.telemetry.push.interval.ms`; Kafka's
`telemetry.max.bytes` caps a push.

The store keeps each client's latest data points (gauges, and sums as their cumulative
values) and re-exports them with the client's labels: `client_instance_id`, `client_id`
and the data point's own attributes. The metric name is the OTLP name with dots as
underscores (`org.apache.kafka.producer.record.queue.time.avg` ->
`org_apache_kafka_producer_record_queue_time_avg`). A client that says it is terminating,
or has not pushed for three intervals, is dropped; clients and series are bounded.
"""

from __future__ import annotations

import re
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError

MAX_CLIENTS = 1000
MAX_SERIES_PER_CLIENT = 2000
# Compression types a client may use, in Kafka's order of preference (KIP-714 ids).
ACCEPTED_COMPRESSION = (4, 3, 2, 1)  # zstd, lz4, snappy, gzip
_NAME_OK = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(otlp_name: str) -> str:
    name = _NAME_OK.sub("_", otlp_name)
    return name if not name[:1].isdigit() else "_" + name


def requested_metrics(setting: list[str]) -> tuple[str, ...]:
    """`client.telemetry.metrics` as KIP-714's requested_metrics: `*` means every metric
    (a single empty prefix), nothing means none."""
    prefixes = [p.strip() for p in setting if p.strip()]
    if "*" in prefixes:
        return ("",)
    return tuple(prefixes)


@dataclass
class ClientEntry:
    client_id: str
    last_push_ms: int
    kinds: dict[str, str] = field(default_factory=dict)  # name -> "gauge" | "counter"
    helps: dict[str, str] = field(default_factory=dict)
    # (name, sorted attribute pairs) -> value
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


class TelemetryStore:
    def __init__(self, metrics: list[str], interval_ms: int, max_bytes: int) -> None:
        self.requested = requested_metrics(metrics)
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        # the subscription id changes when what is requested changes (KIP-714)
        self.subscription_id = zlib.crc32(
            repr((self.requested, interval_ms)).encode()) & 0x7FFFFFFF
        self.clients: dict[uuid.UUID, ClientEntry] = {}
        self.pushes = 0
        self.rejected = 0

    def subscribe(self, client_instance_id: uuid.UUID | None) -> uuid.UUID:
        """The client's instance id: a new one when it has none (the zero uuid)."""
        if client_instance_id is None or client_instance_id.int == 0:
            return uuid.uuid4()
        return client_instance_id

    def push(self, client_instance_id: uuid.UUID | None, subscription_id: int,
             terminating: bool, compression_type: int, payload: bytes, client_id: str,
             now_ms: int) -> None:
        """Store one push; raises KafkaError with KIP-714's error for a bad one."""
        try:
            self._push(client_instance_id, subscription_id, terminating, compression_type,
                       payload, client_id, now_ms)
        except KafkaError:
            self.rejected += 1
            raise
        self.pushes += 1

    def _push(self, client_instance_id: uuid.UUID | None, subscription_id: int,
              terminating: bool, compression_type: int, payload: bytes, client_id: str,
              now_ms: int) -> None:
        if client_instance_id is None or client_instance_id.int == 0:
            raise KafkaError(ErrorCode.invalid_request, "no client instance id")
        if subscription_id != self.subscription_id:
            raise KafkaError(ErrorCode.unknown_subscription_id,
                             f"subscription {subscription_id} is not {self.subscription_id}")
        if len(payload) > self.max_bytes:
            raise KafkaError(ErrorCode.telemetry_too_large,
                             f"{len(payload)} bytes over telemetry.max.bytes={self.max_bytes}")
        self.expire(now_ms)
        if terminating:
            self.clients.pop(client_instance_id, None)
            return
        if not self.requested:
            return  # nothing requested: nothing kept
        data = _decompress(compression_type, payload, self.max_bytes * 16)
        entry = self.clients.get(client_instance_id)
        if entry is None:
            if len(self.clients) >= MAX_CLIENTS:
                raise KafkaError(ErrorCode.throttling_quota_exceeded,
                                 f"telemetry of {MAX_CLIENTS} clients is kept already")
            entry = self.clients[client_instance_id] = ClientEntry(client_id, now_ms)
        entry.last_push_ms = now_ms
        entry.client_id = client_id
        _apply(entry, data)

    def expire(self, now_ms: int) -> None:
        limit = now_ms - 3 * self.interval_ms
        for cid in [c for c, e in self.clients.items() if e.last_push_ms < limit]:
            del self.clients[cid]


def _decompress(compression_type: int, payload: bytes, max_size: int) -> bytes:
    from broker.protocol.compression import Compression, decompress

    try:
        codec = Compression(compression_type)
    except ValueError:
        raise KafkaError(ErrorCode.unsupported_compression_type,
                         f"compression type {compression_type}") from None
    if codec != Compression.NONE and codec not in ACCEPTED_COMPRESSION:
        raise KafkaError(ErrorCode.unsupported_compression_type, codec.name)
    try:
        return decompress(codec, payload, max_size)
    except KafkaError as exc:
        raise KafkaError(ErrorCode.invalid_record, exc.message) from exc


def _apply(entry: ClientEntry, data: bytes) -> None:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    doc = metrics_pb2.MetricsData()
    try:
        doc.ParseFromString(data)
    except DecodeError as exc:
        raise KafkaError(ErrorCode.invalid_record, f"not OTLP MetricsData: {exc}") from exc
    for rm in doc.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points, prom_kind = metric.gauge.data_points, "gauge"
                elif kind == "sum":
                    points = metric.sum.data_points
                    prom_kind = "counter" if metric.sum.is_monotonic else "gauge"
                else:
                    continue  # histograms and summaries: not re-exported
                name = prometheus_name(metric.name)
                if prom_kind == "counter" and name.endswith("_total"):
                    name = name[: -len("_total")]
                if entry.kinds.setdefault(name, prom_kind) != prom_kind:
                    continue  # a name that changed its kind: keep the first
                entry.helps.setdefault(name, metric.description or metric.name)
                for p in points:
                    value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                    labels = tuple(sorted(
                        (prometheus_name(a.key), _attr_value(a.value)) for a in p.attributes))
                    key = (name, labels)
                    if key not in entry.series and len(entry.series) >= MAX_SERIES_PER_CLIENT:
                        continue
                    entry.series[key] = float(value)


def _attr_value(v: Any) -> str:
    which = v.WhichOneof("value")
    return "" if which is None else str(getattr(v, which))


def telemetry_families(store: TelemetryStore, now_ms: int) -> list[Any]:
    """The clients' latest data points as metric families, labelled with the client."""
    from prometheus_client.core import Metric

    store.expire(now_ms)
    families: dict[str, Metric] = {}
    for cid, entry in store.clients.items():
        for (name, attrs), value in entry.series.items():
            kind = entry.kinds[name]
            fam = families.get(name)
            if fam is None:
                fam = families[name] = Metric(name, entry.helps.get(name, name), kind)
            labels = {"client_instance_id": str(cid), "client_id": entry.client_id}
            labels.update((k, v) for k, v in attrs if k not in labels)
            fam.add_sample(name + "_total" if kind == "counter" else name, labels, value)
    pushes = Metric("skiff_client_telemetry_pushes", "PushTelemetry requests stored "
                    "(KIP-714)", "counter")
    pushes.add_sample("skiff_client_telemetry_pushes_total", {}, store.pushes)
    rejected = Metric("skiff_client_telemetry_rejected", "PushTelemetry requests refused",
                      "counter")
    rejected.add_sample("skiff_client_telemetry_rejected_total", {}, store.rejected)
    clients = Metric("skiff_client_telemetry_clients", "Clients whose telemetry is kept",
                     "gauge")
    clients.add_sample("skiff_client_telemetry_clients", {}, len(store.clients))
    return [pushes, rejected, clients, *families.values()]
