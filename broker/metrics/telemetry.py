"""Client telemetry (KIP-714): what clients push, kept for the metrics endpoint.

GetTelemetrySubscriptions tells a client which metrics to push and how often; PushTelemetry
carries them as an OTLP `MetricsData` protobuf (optionally compressed). As Kafka, what to
request comes from the client-metrics config resources (`kafka-client-metrics --alter --name
NAME --metrics PREFIXES --interval MS --match SELECTOR=REGEX`, stored in the metadata log;
broker/config/resource_configs.py): every subscription whose `match` selectors all match the
client (client_instance_id, client_id, client_software_name/version from its ApiVersions,
client_source_address/port; a subscription without `match` matches every client) adds its
`metrics` (`*` for all), and the shortest matching `interval.ms` is the push interval; with
none matching the client is asked for nothing every 300000 ms. Skiff adds two node settings
Kafka does not have: `client.telemetry.metrics` (metric-name prefixes, `*` for all; empty,
the default: nothing) is a subscription matching every client, with
`client.telemetry.push.interval.ms`. Kafka's `telemetry.max.bytes` caps a push. The
subscription id is a hash of what is requested and the interval, so a changed subscription
makes the client's next push UNKNOWN_SUBSCRIPTION_ID and the client asks again, as KIP-714
says.

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
from collections.abc import Callable, Mapping
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
    interval_ms: int = 0  # its subscription's push interval (0: the node's)
    kinds: dict[str, str] = field(default_factory=dict)  # name -> "gauge" | "counter"
    helps: dict[str, str] = field(default_factory=dict)
    # (name, sorted attribute pairs) -> value
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Subscription:
    """What one client is asked for."""

    subscription_id: int
    requested: tuple[str, ...]
    interval_ms: int


@dataclass(frozen=True)
class ClientMeta:
    """What a client-metrics `match` selects on."""

    client_instance_id: uuid.UUID | None = None
    client_id: str = ""
    source_address: str = ""
    source_port: int = 0
    software_name: str = ""
    software_version: str = ""

    def selector(self, key: str) -> str:
        return {
            "client_instance_id": str(self.client_instance_id or ""),
            "client_id": self.client_id,
            "client_software_name": self.software_name,
            "client_software_version": self.software_version,
            "client_source_address": self.source_address,
            "client_source_port": str(self.source_port),
        }.get(key, "")


DEFAULT_INTERVAL_MS = 300000  # Kafka's client-metrics interval.ms default
MAX_SOFTWARE_ENTRIES = 10000


def _subscription_id(requested: tuple[str, ...], interval_ms: int) -> int:
    # the subscription id changes when what is requested changes (KIP-714)
    return zlib.crc32(repr((requested, interval_ms)).encode()) & 0x7FFFFFFF


class TelemetryStore:
    def __init__(self, metrics: list[str], interval_ms: int, max_bytes: int,
                 resources: Callable[[], Mapping[str, Mapping[str, str]]] | None = None
                 ) -> None:
        """`resources()`: the client-metrics config resources (name -> configs) of the
        node's metadata image."""
        self.requested = requested_metrics(metrics)
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        self.resources = resources or dict
        self.subscription_id = _subscription_id(self.requested, interval_ms)
        self.clients: dict[uuid.UUID, ClientEntry] = {}
        # connection id -> (client_software_name, client_software_version) from ApiVersions
        self.software: dict[str, tuple[str, str]] = {}
        self.pushes = 0
        self.rejected = 0

    def note_software(self, connection_id: str, name: str, version: str) -> None:
        if connection_id not in self.software and len(self.software) >= MAX_SOFTWARE_ENTRIES:
            self.software.pop(next(iter(self.software)))
        self.software[connection_id] = (name, version)

    def subscription(self, meta: ClientMeta) -> Subscription:
        """The node's own subscription (client.telemetry.metrics) and every client-metrics
        resource matching the client, merged."""
        from broker.config.resource_configs import ResourceConfigError, parse_match

        metrics: set[str] = set(self.requested)
        intervals = [self.interval_ms] if self.requested else []
        for _name, cfg in sorted(self.resources().items()):
            try:
                match = parse_match(cfg.get("match", ""))
            except ResourceConfigError:
                continue
            if not all(p.fullmatch(meta.selector(k)) for k, p in match.items()):
                continue
            metrics.update(requested_metrics(cfg.get("metrics", "").split(",")))
            try:
                intervals.append(int(cfg.get("interval.ms", DEFAULT_INTERVAL_MS)))
            except ValueError:
                intervals.append(DEFAULT_INTERVAL_MS)
        requested = ("",) if "" in metrics else tuple(sorted(metrics))
        interval = min(intervals) if intervals else DEFAULT_INTERVAL_MS
        if not self.resources() and requested == self.requested:
            interval = self.interval_ms
        return Subscription(_subscription_id(requested, interval), requested, interval)

    def subscribe(self, client_instance_id: uuid.UUID | None) -> uuid.UUID:
        """The client's instance id: a new one when it has none (the zero uuid)."""
        if client_instance_id is None or client_instance_id.int == 0:
            return uuid.uuid4()
        return client_instance_id

    def push(self, client_instance_id: uuid.UUID | None, subscription_id: int,
             terminating: bool, compression_type: int, payload: bytes, client_id: str,
             now_ms: int, meta: ClientMeta | None = None) -> None:
        """Store one push; raises KafkaError with KIP-714's error for a bad one. `meta`: who
        pushes (what the subscriptions match on; the client id alone without it)."""
        sub = self.subscription(meta or ClientMeta(client_instance_id, client_id))
        try:
            self._push(client_instance_id, subscription_id, terminating, compression_type,
                       payload, client_id, now_ms, sub)
        except KafkaError:
            self.rejected += 1
            raise
        self.pushes += 1

    def _push(self, client_instance_id: uuid.UUID | None, subscription_id: int,
              terminating: bool, compression_type: int, payload: bytes, client_id: str,
              now_ms: int, sub: Subscription) -> None:
        if client_instance_id is None or client_instance_id.int == 0:
            raise KafkaError(ErrorCode.invalid_request, "no client instance id")
        if subscription_id != sub.subscription_id:
            raise KafkaError(ErrorCode.unknown_subscription_id,
                             f"subscription {subscription_id} is not {sub.subscription_id}")
        if len(payload) > self.max_bytes:
            raise KafkaError(ErrorCode.telemetry_too_large,
                             f"{len(payload)} bytes over telemetry.max.bytes={self.max_bytes}")
        self.expire(now_ms)
        if terminating:
            self.clients.pop(client_instance_id, None)
            return
        if not sub.requested:
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
        entry.interval_ms = sub.interval_ms
        _apply(entry, data)

    def expire(self, now_ms: int) -> None:
        for cid in [c for c, e in self.clients.items()
                    if e.last_push_ms < now_ms - 3 * (e.interval_ms or self.interval_ms)]:
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
