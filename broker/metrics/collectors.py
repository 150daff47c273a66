"""Metric families built at scrape time from a node's state and counters.

Names are Kafka's MBeans as the Prometheus JMX exporter's Kafka rules render them
(lower-cased `kafka_<domain>_<type>_<name>`, `PerSec` meters as `_total` counters), so
dashboards and alert rules written for Kafka work unchanged; docs/monitoring.md lists each
metric with its MBean. Where Kafka exports nothing (consumer lag, group members), the names
of kafka_exporter, the usual companion exporter, are used.

Everything here runs on the node's event loop (the exporter hops onto it), so it reads the
loop's objects without locks. Parts a node does not have (a controller-only node has no
replica manager) or has not started yet are skipped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from broker.metrics.stats import (
    FETCH_API_KEY,
    LOG_FLUSH_TIME,
    SPLIT_REQUEST_NAMES,
    BrokerTopicStats,
    Histogram,
    ServerStats,
    ShareCoordinatorStats,
    TopicStats,
)

if TYPE_CHECKING:
    from broker.config import NodeConfig
    from broker.controller.service import ControllerService
    from broker.group.shell import GroupCoordinatorService
    from broker.metadata.publisher import MetadataPublisher
    from broker.metrics.stats import NodeStats
    from broker.metrics.telemetry import TelemetryStore
    from broker.quotas.core import Quotas
    from broker.replication import ReplicaFetcherManager, ReplicaManager
    from broker.server import Server
    from broker.share.coordinator_shell import ShareCoordinatorService
    from broker.share.shell import ShareService
    from raft.driver import RaftDriver

CONSUMER_OFFSETS = "__consumer_offsets"
LEADER_RECOVERING = 1

# BrokerTopicMetrics: (field, metric name after kafka_server_brokertopicmetrics_, help,
# per topic as well as in total?)
TOPIC_METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("messages_in", "messagesin", "Records appended as partition leader (MessagesInPerSec)",
     True),
    ("bytes_in", "bytesin", "Record bytes produced to partition leaders (BytesInPerSec)", True),
    ("bytes_out", "bytesout", "Record bytes fetched by consumers (BytesOutPerSec)", True),
    ("bytes_rejected", "bytesrejected",
     "Produced bytes refused as corrupt or too large (BytesRejectedPerSec)", True),
    ("failed_produce", "failedproducerequests",
     "Partition produce requests that failed (FailedProduceRequestsPerSec)", True),
    ("failed_fetch", "failedfetchrequests",
     "Partition fetch requests that failed (FailedFetchRequestsPerSec)", True),
    ("total_produce", "totalproducerequests",
     "Partition produce requests (TotalProduceRequestsPerSec)", True),
    ("total_fetch", "totalfetchrequests",
     "Partition fetch requests, consumers and followers (TotalFetchRequestsPerSec)", True),
    ("replication_bytes_in", "replicationbytesin",
     "Record bytes fetched from leaders as a follower (ReplicationBytesInPerSec)", False),
    ("replication_bytes_out", "replicationbytesout",
     "Record bytes fetched by followers from this leader (ReplicationBytesOutPerSec)", False),
    ("total_share_fetch", "totalsharefetchrequests",
     "Share-partitions answered in ShareFetch requests (TotalShareFetchRequestsPerSec)", True),
    ("failed_share_fetch", "failedsharefetchrequests",
     "Share-partitions a ShareFetch answered with an error (FailedShareFetchRequestsPerSec)",
     True),
    ("total_share_acknowledgement", "totalshareacknowledgementrequests",
     "Share-partitions acknowledged (TotalShareAcknowledgementRequestsPerSec)", True),
    ("failed_share_acknowledgement", "failedshareacknowledgementrequests",
     "Share-partition acknowledgements answered with an error "
     "(FailedShareAcknowledgementRequestsPerSec)", True),
)


def request_label(api_name: str) -> str:
    """Kafka's ApiKeys name ("Produce", "ApiVersions") from kio's snake_case name."""
    return "".join(word.capitalize() for word in api_name.split("_"))


def _api_label(api_key: int) -> str:
    split = SPLIT_REQUEST_NAMES.get(api_key)
    if split is not None:
        return split
    from broker.protocol.api import api_name

    return request_label(api_name(api_key))


def _with_fetch_total(table: dict[Any, Any], key_of: Callable[[Any], Any],
                      add: Callable[[Any, Any], Any]) -> dict[Any, Any]:
    """`table` (keyed by request metric key, or by (key, version)) with Kafka's `Fetch`
    series added: the sum of its FetchConsumer and FetchFollower ones, as Kafka counts a
    Fetch under both its sender's name and `Fetch`."""
    out = dict(table)
    for k, v in table.items():
        if (k[0] if isinstance(k, tuple) else k) in SPLIT_REQUEST_NAMES:
            total_key = key_of(k)
            out[total_key] = v if total_key not in out else add(out[total_key], v)
    return out


def _error_label(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_{code}"


# ---- broker topic metrics ------------------------------------------------------------


def topic_families(stats: BrokerTopicStats, live_topics: Iterable[str] | None) -> list[Metric]:
    """Per topic (only topics that still exist, when `live_topics` is given) and in total:
    the total series has no topic label, as Kafka's all-topics MBean has no topic key."""
    total = stats.total()
    live = None if live_topics is None else set(live_topics)
    out: list[Metric] = []
    for fld, name, help_text, per_topic in TOPIC_METRICS:
        fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", help_text,
                                  labels=["topic"] if per_topic else None)
        if per_topic:
            for topic, st in sorted(stats.topics.items()):
                if live is None or topic in live:
                    fam.add_metric([topic], getattr(st, fld))
        fam.add_metric([], getattr(total, fld))  # the total: no topic label
        out.append(fam)
    return out


# ---- request and network metrics -----------------------------------------------------

HISTOGRAMS = (
    ("total_time", "totaltimems",
     "Milliseconds from a request's last byte read to its response written (TotalTimeMs)"),
    ("request_queue_time", "requestqueuetimems",
     "Milliseconds from a request read to its handler's first step (RequestQueueTimeMs)"),
    ("local_time", "localtimems",
     "Milliseconds from a handler's first step to its answer, or to its first wait for "
     "replication or a long poll's data (LocalTimeMs)"),
    ("remote_time", "remotetimems",
     "Milliseconds a handler waited for replication (acks=all) or a long poll's data, "
     "0 for requests that never wait (RemoteTimeMs)"),
    ("response_queue_time", "responsequeuetimems",
     "Milliseconds from a handler's answer to its response's write begun, the responses "
     "owed before it on the connection written first (ResponseQueueTimeMs)"),
    ("response_send_time", "responsesendtimems",
     "Milliseconds writing a response to the socket (ResponseSendTimeMs)"),
)


def request_families(stats: ServerStats) -> list[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests received, per API and version (RequestsPerSec)", labels=["request", "version"])
    counts = _with_fetch_total(stats.requests, lambda k: (FETCH_API_KEY, k[1]),
                               lambda a, b: a + b)
    for (key, version), n in sorted(counts.items()):
        requests.add_metric([_api_label(key), str(version)], n)
    errors = CounterMetricFamily(
        "kafka_network_requestmetrics_errors",
        "Responses per API and top-level error code, NONE included (ErrorsPerSec)",
        labels=["request", "error"])
    for (key, code), n in sorted(stats.errors.items()):
        errors.add_metric([_api_label(key), _error_label(code)], n)
    out: list[Metric] = [requests, errors]
    for attr, name, help_text in HISTOGRAMS:
        table: dict[int, Histogram] = _with_fetch_total(
            getattr(stats, attr), lambda _k: FETCH_API_KEY, Histogram.merged)
        fam = HistogramMetricFamily(f"kafka_network_requestmetrics_{name}", help_text,
                                    labels=["request"])
        for key, h in sorted(table.items()):
            fam.add_metric([_api_label(key)], h.cumulative(), sum_value=h.sum)
        out.append(fam)
    return out


def network_families(stats: ServerStats, servers: Iterable[Any]) -> list[Metric]:
    """Kafka's socket-server-metrics per listener; in-flight requests and their bytes
    (RequestQueueSize, MemoryPoolUsed) from the live connections."""
    prefix = "kafka_server_socket_server_metrics_"
    count = GaugeMetricFamily(prefix + "connections", "Open connections (connection-count)",
                              labels=["listener"])
    queued = GaugeMetricFamily(
        "kafka_network_requestchannel_requestqueuesize",
        "Requests read and not yet answered, every connection (RequestQueueSize)")
    pool = GaugeMetricFamily(
        "kafka_network_socketserver_memorypoolused",
        "Bytes of request frames held by requests not yet answered (MemoryPoolUsed)")
    total_queued = total_bytes = 0
    for server in servers:
        for listener, (conns, inflight, inflight_bytes) in sorted(
                server.connection_stats().items()):
            count.add_metric([listener], conns)
            total_queued += inflight
            total_bytes += inflight_bytes
    queued.add_metric([], total_queued)
    pool.add_metric([], total_bytes)
    created = CounterMetricFamily(prefix + "connection_creation",
                                  "Connections accepted (connection-creation-total)",
                                  labels=["listener"])
    closed = CounterMetricFamily(prefix + "connection_close",
                                 "Connections closed (connection-close-total)",
                                 labels=["listener"])
    incoming = CounterMetricFamily(prefix + "incoming_byte",
                                   "Bytes of request frames read (incoming-byte-total)",
                                   labels=["listener"])
    outgoing = CounterMetricFamily(prefix + "outgoing_byte",
                                   "Bytes of responses written (outgoing-byte-total)",
                                   labels=["listener"])
    for name, ls in sorted(stats.listeners.items()):
        created.add_metric([name], ls.connections_created)
        closed.add_metric([name], ls.connections_closed)
        incoming.add_metric([name], ls.bytes_in)
        outgoing.add_metric([name], ls.bytes_out)
    return [count, created, closed, incoming, outgoing, queued, pool]


# ---- partitions, logs, replica fetchers ------------------------------------------------


def replica_families(replicas: Any, image: Any) -> list[Metric]:
    """ReplicaManager gauges and counters, per-partition state and log figures."""
    from broker.replication import Role

    prefix = "kafka_server_replicamanager_"
    partitions = leaders = urp = under_min = at_min = offline = 0
    urp_part = GaugeMetricFamily(
        "kafka_cluster_partition_underreplicated",
        "1 when this leader's partition has fewer in-sync replicas than replicas "
        "(Partition UnderReplicated)", labels=["topic", "partition"])
    under_min_part = GaugeMetricFamily(
        "kafka_cluster_partition_underminisr",
        "1 when this leader's partition has fewer in-sync replicas than "
        "min.insync.replicas (Partition UnderMinIsr)", labels=["topic", "partition"])
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log (Log Size)",
                             labels=["topic", "partition"])
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments",
                                 "Segments of the partition's log (Log NumLogSegments)",
                                 labels=["topic", "partition"])
    start = GaugeMetricFamily("kafka_log_log_logstartoffset",
                              "The partition log's start offset (Log LogStartOffset)",
                              labels=["topic", "partition"])
    end = GaugeMetricFamily("kafka_log_log_logendoffset",
                            "The partition log's end offset (Log LogEndOffset)",
                            labels=["topic", "partition"])
    for part in list(replicas.partitions()):
        partitions += 1
        labels = [part.topic, str(part.index)]
        plog = part.log
        with contextlib.suppress(Exception):  # a log closed under our feet: skip its figures
            size.add_metric(labels, plog.size_in_bytes)
            segments.add_metric(labels, len(plog.segments))
            start.add_metric(labels, plog.log_start_offset)
            end.add_metric(labels, plog.log_end_offset)
        if part.role is Role.OFFLINE:
            offline += 1
            continue
        if part.role is not Role.LEADER:
            continue
        leaders += 1
        isr, replicas_n = len(part.isr), len(part.replicas)
        under = isr < replicas_n
        urp += under
        urp_part.add_metric(labels, 1 if under else 0)
        min_isr = part.min_insync_replicas
        under_min_part.add_metric(labels, 1 if isr < min_isr else 0)
        if isr < min_isr:
            under_min += 1
        elif isr == min_isr:
            at_min += 1
    out: list[Metric] = []
    for name, value, help_text in (
        ("partitioncount", partitions, "Partitions with a replica on this broker"),
        ("leadercount", leaders, "Partitions this broker leads"),
        ("underreplicatedpartitions", urp,
         "Partitions this broker leads whose ISR is smaller than their replica set"),
        ("underminisrpartitioncount", under_min,
         "Partitions this broker leads with fewer in-sync replicas than min.insync.replicas"),
        ("atminisrpartitioncount", at_min,
         "Partitions this broker leads with exactly min.insync.replicas in-sync replicas"),
        ("offlinereplicacount", offline, "Replicas on this broker that are offline"),
    ):
        out.append(GaugeMetricFamily(prefix + name, help_text, value=value))
    for name, value, help_text in (
        ("isrshrinks", replicas.isr_shrinks, "ISR shrinks committed for partitions led here"),
        ("isrexpands", replicas.isr_expands, "ISR expansions committed for partitions led here"),
        ("failedisrupdates", replicas.failed_isr_updates,
         "AlterPartition proposals the controller refused or that failed"),
    ):
        out.append(CounterMetricFamily(prefix + name, help_text, value=value))
    out.extend([urp_part, under_min_part, size, segments, start, end])
    return out


def fetcher_families(fetchers: Any) -> list[Metric]:
    lag = GaugeMetricFamily(
        "kafka_server_fetcherlagmetrics_consumerlag",
        "Offsets this follower is behind the leader's high watermark (FetcherLagMetrics "
        "ConsumerLag)", labels=["client_id", "topic", "partition"])
    max_lag = 0
    for source, fetcher in sorted(fetchers.fetchers.items()):
        client = f"ReplicaFetcherThread-0-{source}"
        for (topic, index), st in sorted(fetcher.partitions.items()):
            lag.add_metric([client, topic, str(index)], st.lag)
            max_lag = max(max_lag, st.lag)
    maxlag = GaugeMetricFamily(
        "kafka_server_replicafetchermanager_maxlag",
        "The largest follower lag, in offsets, of this broker's partitions (MaxLag)",
        labels=["client_id"])
    maxlag.add_metric(["Replica"], max_lag)
    fetched = CounterMetricFamily(
        "kafka_server_fetcherstats_bytes",
        "Record bytes fetched from each leader broker (FetcherStats BytesPerSec)",
        labels=["client_id", "broker_id"])
    for source, n in sorted(fetchers.bytes_fetched.items()):
        fetched.add_metric([f"ReplicaFetcherThread-0-{source}", str(source)], n)
    return [lag, maxlag, fetched]


# ---- controller, metadata, raft ------------------------------------------------------


class ElectionCounter:
    """A MetadataPublisher subscriber counting leader elections the way the active
    controller counts them: a partition whose leader changed to a live leader, and unclean
    ones (leader recovery state RECOVERING). Counted only while `active()` says this node
    is the active controller, so the sum over a cluster counts each election once."""

    def __init__(self, active: Callable[[], bool]) -> None:
        self.active = active
        self.elections = 0
        self.unclean = 0

    def __call__(self, old: Any, new: Any, delta: Any) -> None:
        if delta is None or not delta.changed_partitions or not self.active():
            return
        for (tid, index), reg in delta.changed_partitions.items():
            topic = old.topics_by_id.get(tid)
            prev = topic.partitions.get(index) if topic is not None else None
            if prev is None or reg.leader < 0 or reg.leader == prev.leader:
                continue
            self.elections += 1
            if reg.leader_recovery_state == LEADER_RECOVERING:
                self.unclean += 1


def controller_families(image: Any, active: bool, raft_hw: int,
                        elections: ElectionCounter | None,
                        service: Any = None, applied_ts: int = 0,
                        now_ms: int = 0) -> list[Metric]:
    """KafkaController gauges. As in Kafka, the cluster-wide figures are reported by the
    active controller and are 0 on the others, so `sum` over the cluster is right."""
    prefix = "kafka_controller_kafkacontroller_"
    topics = partitions = offline = imbalance = fenced = active_brokers = 0
    if active:
        for reg in image.brokers.values():
            if reg.fenced:
                fenced += 1
            else:
                active_brokers += 1
        for _topic, _index, p in image.iter_partitions():
            partitions += 1
            if p.leader < 0:
                offline += 1
            elif p.replicas and p.leader != p.replicas[0]:
                imbalance += 1
        topics = len(image.topics_by_name)
    out: list[Metric] = [
        GaugeMetricFamily(prefix + "activecontrollercount",
                          "1 on the active controller, else 0 (ActiveControllerCount)",
                          value=1 if active else 0),
    ]
    for name, value, help_text in (
        ("globaltopiccount", topics, "Topics in the cluster (GlobalTopicCount)"),
        ("globalpartitioncount", partitions, "Partitions in the cluster (GlobalPartitionCount)"),
        ("offlinepartitionscount", offline,
         "Partitions without a leader (OfflinePartitionsCount)"),
        ("preferredreplicaimbalancecount", imbalance,
         "Partitions whose leader is not their preferred replica "
         "(PreferredReplicaImbalanceCount)"),
        ("fencedbrokercount", fenced, "Registered brokers that are fenced (FencedBrokerCount)"),
        ("activebrokercount", active_brokers,
         "Registered brokers that are unfenced (ActiveBrokerCount)"),
    ):
        out.append(GaugeMetricFamily(prefix + name, help_text, value=value))
    out.append(GaugeMetricFamily(
        prefix + "lastappliedrecordoffset",
        "Offset of the last metadata record applied (LastAppliedRecordOffset)",
        value=image.offset))
    out.append(GaugeMetricFamily(
        prefix + "lastcommittedrecordoffset",
        "Offset of the last committed metadata record (LastCommittedRecordOffset)",
        value=raft_hw - 1))
    out.extend(_applied_time(prefix + "lastappliedrecordtimestamp",
                             prefix + "lastappliedrecordlagms", applied_ts, now_ms,
                             "(LastAppliedRecordTimestamp)", "(LastAppliedRecordLagMs)"))
    if service is not None:
        for attr, name, help_text in (
            ("event_queue_time", "eventqueuetimems",
             "Milliseconds a controller operation waited for the one before it "
             "(ControllerEventManager EventQueueTimeMs)"),
            ("event_processing_time", "eventqueueprocessingtimems",
             "Milliseconds a controller operation took, its commit included "
             "(EventQueueProcessingTimeMs)"),
        ):
            h = getattr(service, attr)
            fam = HistogramMetricFamily(f"kafka_controller_controllereventmanager_{name}",
                                        help_text)
            fam.add_metric([], h.cumulative(), sum_value=h.sum)
            out.append(fam)
    if elections is not None:
        out.append(CounterMetricFamily(
            "kafka_controller_controllerstats_leaderelections",
            "Partition leader elections made by this node as active controller "
            "(LeaderElectionRateAndTimeMs count)", value=elections.elections))
        out.append(CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections made by this node as active controller "
            "(UncleanLeaderElectionsPerSec)", value=elections.unclean))
    return out


def metadata_families(image: Any, applied_ts: int = 0, now_ms: int = 0) -> list[Metric]:
    """broker-metadata-metrics: the last metadata batch applied here, its offset, its
    append time (wall-clock ms) and how long ago that was (no series before the first)."""
    prefix = "kafka_server_broker_metadata_metrics_"
    out: list[Metric] = [GaugeMetricFamily(
        prefix + "last_applied_record_offset",
        "Offset of the last metadata record this node applied "
        "(broker-metadata-metrics last-applied-record-offset)", value=image.offset)]
    # promtool refuses "_ms" in a name: the lag is in seconds here, as Prometheus prefers
    out.extend(_applied_time(prefix + "last_applied_record_timestamp",
                             prefix + "last_applied_record_lag_seconds", applied_ts, now_ms,
                             "(broker-metadata-metrics last-applied-record-timestamp)",
                             "(broker-metadata-metrics last-applied-record-lag-ms, in "
                             "seconds)", unit_s=1000.0))
    return out


def _applied_time(ts_name: str, lag_name: str, applied_ts: int, now_ms: int,
                  ts_kafka: str, lag_kafka: str, unit_s: float = 1.0) -> list[Metric]:
    ts = GaugeMetricFamily(ts_name, "Append time, Unix ms, of the last metadata record "
                           f"applied here {ts_kafka}")
    lag = GaugeMetricFamily(lag_name, "Time between the last metadata record's append "
                            f"time and now {lag_kafka}")
    if applied_ts > 0:
        ts.add_metric([], applied_ts)
        lag.add_metric([], max(0, now_ms - applied_ts) / unit_s)
    return [ts, lag]


def log_flush_families() -> list[Metric]:
    fam = HistogramMetricFamily(
        "kafka_log_logflushstats_logflushrateandtimems",
        "Milliseconds per log flush (fdatasync of segments), every log of this process "
        "(LogFlushStats LogFlushRateAndTimeMs)")
    fam.add_metric([], LOG_FLUSH_TIME.cumulative(), sum_value=LOG_FLUSH_TIME.sum)
    return [fam]


RAFT_STATES = ("leader", "follower", "candidate", "prospective", "unattached", "resigned")


def raft_families(driver: Any) -> list[Metric]:
    """raft-metrics, as Strimzi's JMX exporter rules name them."""
    core = driver.core
    prefix = "kafka_server_raftmetrics_"
    role = type(core.role).__name__.lower()
    state = GaugeMetricFamily(prefix + "current_state",
                              "1 for this node's Raft role (current-state)", labels=["state"])
    for s in RAFT_STATES:
        state.add_metric([s], 1 if s == role else 0)
    st = driver.stats
    commit = SummaryMetricFamily(
        prefix + "commit_latency_seconds",
        "Seconds from a leader's append to its commit (commit-latency-avg is "
        "rate(_sum)/rate(_count))",
        count_value=st.commit_latency_count, sum_value=st.commit_latency_sum)
    out: list[Metric] = [
        GaugeMetricFamily(prefix + "current_leader",
                          "The Raft leader's node id, -1 when unknown (current-leader)",
                          value=core.leader_id),
        GaugeMetricFamily(prefix + "current_epoch", "The Raft epoch (current-epoch)",
                          value=core.epoch),
        GaugeMetricFamily(prefix + "high_watermark",
                          "The metadata log's high watermark (high-watermark)", value=core.hw),
        GaugeMetricFamily(prefix + "log_end_offset",
                          "The metadata log's end offset (log-end-offset)",
                          value=core.log.end_offset),
        state,
        commit,
        CounterMetricFamily(prefix + "append_records",
                            "Records appended as the Raft leader (append-records-rate)",
                            value=st.appended_records),
        CounterMetricFamily(prefix + "fetch_records",
                            "Records fetched from the Raft leader as a follower or observer "
                            "(fetch-records-rate)", value=st.fetched_records),
        SummaryMetricFamily(
            prefix + "election_latency_seconds",
            "Seconds from this node standing for election to a leader known (election-"
            "latency-avg is rate(_sum)/rate(_count))",
            count_value=st.election_latency_count, sum_value=st.election_latency_sum),
        GaugeMetricFamily(prefix + "election_latency_max_seconds",
                          "The longest election this node stood in since it started "
                          "(election-latency-max, not windowed)",
                          value=st.election_latency_max),
        CounterMetricFamily(prefix + "leader_changes",
                            "Raft leader changes this node has seen", value=len(st.leader_changes)),
    ]
    voters, observers = core.replica_progress()
    lag = GaugeMetricFamily(
        prefix + "replica_lag",
        "On the leader: offsets each voter and observer is behind its log end",
        labels=["replica", "kind"])
    leo = core.log.end_offset
    for kind, table in (("voter", voters), ("observer", observers)):
        for rid, progress in sorted(table.items()):
            if progress.end_offset >= 0:
                lag.add_metric([str(rid), kind], max(0, leo - progress.end_offset))
    out.append(lag)
    return out


# ---- groups ---------------------------------------------------------------------------

CLASSIC_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")
CONSUMER_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")


def group_families(coordinators: Iterable[Any], replicas: Any) -> list[Metric]:
    """GroupMetadataManager gauges, KIP-848 group counts, and per group (kafka_exporter's
    names): members, committed offsets and lag. Lag is the partition's high watermark
    minus the committed offset, for partitions with a replica on this broker (a follower's
    high watermark may trail the leader's by a fetch round)."""
    classic = dict.fromkeys(CLASSIC_STATES, 0)
    consumer = dict.fromkeys(CONSUMER_STATES, 0)
    offsets_count = rebalances = consumer_rebalances = 0
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group",
                                labels=["consumergroup"])
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "The group's committed offset",
                                labels=["consumergroup", "topic", "partition"])
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus the group's committed offset, computed by the coordinator",
        labels=["consumergroup", "topic", "partition"])
    for coord in coordinators:
        rebalances += coord.rebalances
        consumer_rebalances += coord.consumer_rebalances
        groups: Iterator[tuple[str, Any, str, int]] = (
            (gid, g, g.state.value, len(g.members)) for gid, g in coord.groups.items())
        cgroups: Iterator[tuple[str, Any, str, int]] = (
            (gid, g, g.state.value, len(g.members)) for gid, g in coord.consumer_groups.items())
        for gid, g, state, n in groups:
            classic[state] = classic.get(state, 0) + 1
            _group_offsets(gid, g, n, replicas, members, current, lag)
            offsets_count += len(g.offsets)
        for gid, g, state, n in cgroups:
            consumer[state] = consumer.get(state, 0) + 1
            _group_offsets(gid, g, n, replicas, members, current, lag)
            offsets_count += len(g.offsets)
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    out: list[Metric] = [GaugeMetricFamily(prefix + "numgroups",
                                           "Classic groups this broker coordinates (NumGroups)",
                                           value=sum(classic.values()))]
    for state, n in classic.items():
        out.append(GaugeMetricFamily(prefix + "numgroups" + state.lower(),
                                     f"Classic groups in state {state} (NumGroups{state})",
                                     value=n))
    out.append(GaugeMetricFamily(prefix + "numoffsets",
                                 "Committed offsets this broker holds (NumOffsets)",
                                 value=offsets_count))
    cg = GaugeMetricFamily("kafka_server_group_coordinator_metrics_consumer_groups",
                           "KIP-848 consumer groups per state (consumer-group-count)",
                           labels=["state"])
    for state, n in consumer.items():
        cg.add_metric([state], n)
    out.append(cg)
    out.append(CounterMetricFamily(
        "kafka_server_group_coordinator_metrics_group_rebalance",
        "Classic group rebalances completed here (group-rebalance-count)", value=rebalances))
    out.append(CounterMetricFamily(
        "kafka_server_group_coordinator_metrics_consumer_group_rebalance",
        "KIP-848 consumer group rebalances here: new target assignments, each for a new "
        "group epoch (consumer-group-rebalance-count)", value=consumer_rebalances))
    out.extend([members, current, lag])
    return out


SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")


def share_families(share: Any) -> list[Metric]:
    """Share groups (KIP-932): group-coordinator-metrics share-group-count per state,
    ShareGroupMetrics (acknowledgements by type, partition load time) and, per
    share-partition led here, SharePartitionMetrics' in-flight messages and lock timeouts."""
    counts = dict.fromkeys(SHARE_GROUP_STATES, 0)
    for _gid, state in share.groups.listed():
        counts[state] = counts.get(state, 0) + 1
    groups = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_groups",
                               "Share groups per state (share-group-count)", labels=["state"])
    for state, n in counts.items():
        groups.add_metric([state], n)
    rebalances = CounterMetricFamily(
        "kafka_server_group_coordinator_metrics_share_group_rebalance",
        "Share group rebalances here: new target assignments, each for a new group epoch "
        "(share-group-rebalance-count)", value=share.groups.rebalances)
    acks = CounterMetricFamily(
        "kafka_server_sharegroupmetrics_recordacknowledgements",
        "Acknowledgement types received, one per type entry of a batch "
        "(ShareGroupMetrics RecordAcknowledgementsPerSec)", labels=["acktype"])
    for kind in ("Accept", "Release", "Reject", "Renew"):
        acks.add_metric([kind], share.stats.acknowledgements.get(kind, 0))
    load = HistogramMetricFamily(
        "kafka_server_sharegroupmetrics_partitionloadtimems",
        "Milliseconds to load a share-partition's state from the share coordinator "
        "(ShareGroupMetrics PartitionLoadTimeMs)")
    hist = share.stats.partition_load_time
    load.add_metric([], hist.cumulative(), sum_value=hist.sum)
    labels = ["group", "topic", "partition"]
    in_flight = GaugeMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightmessagecount",
        "Offsets in the share-partition's in-flight window, SPSO to SPEO "
        "(SharePartitionMetrics InFlightMessageCount)", labels=labels)
    timeouts = CounterMetricFamily(
        "kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
        "Records whose acquisition lock expired in a share-partition led here "
        "(SharePartitionMetrics AcquisitionLockTimeoutPerSec)", labels=labels)
    batches = GaugeMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightbatchcount",
        "In-flight batches of the share-partition: the new offsets of one acquisition, or a "
        "batch of its loaded state, until the start offset is past them "
        "(SharePartitionMetrics InFlightBatchCount)", labels=labels)
    batch_sizes = HistogramMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightbatchmessagecount",
        "Offsets per in-flight batch, when it is made "
        "(SharePartitionMetrics InFlightBatchMessageCount)", labels=labels)
    for (gid, topic, p), sp in sorted(share.partitions.items()):
        in_flight.add_metric([gid, topic, str(p)], sp.in_flight_message_count())
        batches.add_metric([gid, topic, str(p)], sp.in_flight_batch_count())
    for (gid, topic, p), hist in sorted(share.stats.batch_sizes.items()):
        batch_sizes.add_metric([gid, topic, str(p)], hist.cumulative(), sum_value=hist.sum)
    for (gid, topic, p), n in sorted(share.lock_timeouts().items()):
        timeouts.add_metric([gid, topic, str(p)], n)
    stats = share.stats
    acquire = HistogramMetricFamily(
        "kafka_server_sharegroupmetrics_topicpartitionsacquiretimems",
        "Milliseconds from a share fetch's start until one of its share-partitions had room "
        "to acquire records, or until its answer if none had "
        "(ShareGroupMetrics TopicPartitionsAcquireTimeMs)", labels=["group"])
    for gid, hist in sorted(stats.acquire_time.items()):
        acquire.add_metric([gid], hist.cumulative(), sum_value=hist.sum)
    dlq_records = CounterMetricFamily(
        "kafka_server_sharegroupmetrics_deadletterqueuerecordcount",
        "Dead letters written to the group's dead-letter topic "
        "(ShareGroupMetrics DeadLetterQueueRecordCount)", labels=["group"])
    dlq_produces = CounterMetricFamily(
        "kafka_server_sharegroupmetrics_deadletterqueuetotalproducerequests",
        "Produce requests of dead letters to the group's dead-letter topic "
        "(ShareGroupMetrics DeadLetterQueueTotalProduceRequestsPerSec)", labels=["group"])
    dlq_failed = CounterMetricFamily(
        "kafka_server_sharegroupmetrics_deadletterqueuefailedproducerequests",
        "Those that failed (ShareGroupMetrics DeadLetterQueueFailedProduceRequestsPerSec)",
        labels=["group"])
    for family, counts in ((dlq_records, stats.dlq_records), (dlq_produces, stats.dlq_produces),
                           (dlq_failed, stats.dlq_produce_failed)):
        for gid, n in sorted(counts.items()):
            family.add_metric([gid], n)
    return [groups, rebalances, acks, load, in_flight, batches, batch_sizes, timeouts,
            acquire, dlq_records, dlq_produces, dlq_failed]


def share_coordinator_families(stats: ShareCoordinatorStats) -> list[Metric]:
    """The share coordinator's share-coordinator-metrics: state writes and their latency
    (seconds: promtool refuses a `_ms` unit)."""
    prefix = "kafka_server_share_coordinator_metrics_"
    return [
        CounterMetricFamily(prefix + "write",
                            "Share-partition state writes asked of this share coordinator "
                            "(write-total; write-rate is its rate)", value=stats.writes),
        SummaryMetricFamily(
            prefix + "write_latency_seconds",
            "Seconds from a share-partition state write's call to its answer, the record "
            "stored in __share_group_state (write-latency-avg is rate(_sum)/rate(_count))",
            count_value=stats.write_latency_count, sum_value=stats.write_latency_sum),
        GaugeMetricFamily(prefix + "write_latency_max_seconds",
                          "The longest share-partition state write since the node started "
                          "(write-latency-max, not windowed)", value=stats.write_latency_max),
    ]


def _group_offsets(gid: str, g: Any, n_members: int, replicas: Any,
                   members: GaugeMetricFamily, current: GaugeMetricFamily,
                   lag: GaugeMetricFamily) -> None:
    members.add_metric([gid], n_members)
    for (topic, index), committed in sorted(g.offsets.items()):
        offset = getattr(committed, "offset", committed)
        labels = [gid, topic, str(index)]
        current.add_metric(labels, offset)
        part = replicas.get(topic, index) if replicas is not None else None
        if part is not None and offset >= 0:
            lag.add_metric(labels, max(0, part.high_watermark - offset))


# ---- the whole node -------------------------------------------------------------------


# (manager attribute, MBean type as the JMX exporter lowers it, attribute, help)
QUOTA_METRICS = (
    ("produce", "produce", "byte_rate", "Bytes/s produced, per quota sensor (Produce byte-rate)"),
    ("fetch", "fetch", "byte_rate", "Bytes/s fetched by consumers, per quota sensor "
                                    "(Fetch byte-rate)"),
    ("request", "request", "request_time", "Handler time as % of one thread, per quota "
                                           "sensor (Request request-time)"),
    ("controller_mutation", "controllermutation", "mutation_rate",
     "Partitions created or deleted per second, per quota sensor (ControllerMutation "
     "mutation-rate)"),
)


def quota_families(quotas: Any, now_ms: int) -> list[Metric]:
    """Client quotas (broker/quotas): the rate of every sensor a quota created, labelled as
    Kafka's quota MBeans are (user, client-id: empty when the quota is not per that part),
    and Skiff's counts of throttled answers."""
    out: list[Metric] = []
    throttled = CounterMetricFamily("skiff_quota_throttled", "Answers throttled by a client "
                                    "quota", labels=["type"])
    throttle_s = CounterMetricFamily("skiff_quota_throttle_seconds", "Throttle time given "
                                     "by a client quota", labels=["type"])
    for attr, mbean, name, help_text in QUOTA_METRICS:
        manager = getattr(quotas, attr)
        fam = GaugeMetricFamily(f"kafka_server_{mbean}_{name}", help_text,
                                labels=["user", "client_id"])
        for (user, client_id), sensor in sorted(manager.sensors.items()):
            fam.add_metric([user, client_id], sensor.rate(now_ms))
        out.append(fam)
        throttled.add_metric([mbean], manager.throttled)
        throttle_s.add_metric([mbean], manager.throttle_ms_total / 1000)
    out.extend((throttled, throttle_s))
    return out


class QuorumView(Protocol):
    """The node's metadata quorum driver (broker/node/quorum.py), as the metrics read it."""

    @property
    def driver(self) -> RaftDriver: ...

    @property
    def is_leader(self) -> bool: ...


class MetricsNode(Protocol):
    """What the metrics read of their node (broker/node), besides the parts its start()
    makes, which node_families takes on their own (None until made)."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def stats(self) -> NodeStats | None: ...

    @property
    def quotas(self) -> Quotas: ...

    @property
    def telemetry(self) -> TelemetryStore: ...

    @property
    def broker_server(self) -> Server | None: ...

    @property
    def controller_server(self) -> Server | None: ...

    @property
    def controller_service(self) -> ControllerService | None: ...

    @property
    def election_counter(self) -> ElectionCounter | None: ...

    @property
    def group_coordinator(self) -> GroupCoordinatorService | None: ...

    @property
    def share_groups(self) -> ShareService | None: ...

    @property
    def share_coordinator(self) -> ShareCoordinatorService | None: ...


def node_families(node: MetricsNode, *, publisher: MetadataPublisher | None,
                  replicas: ReplicaManager | None, fetchers: ReplicaFetcherManager | None,
                  quorum: QuorumView | None) -> list[Metric]:
    """Every family for one node, from whatever of it is running."""
    out: list[Metric] = []
    info = GaugeMetricFamily("skiff_node_info", "Always 1: this node's id and roles",
                             labels=["node_id", "roles", "cluster_id"])
    info.add_metric([str(node.node_id), ",".join(sorted(node.config.process_roles)),
                     node.cluster_id], 1)
    out.append(info)
    stats = node.stats
    image = None if publisher is None else publisher.image
    if stats is not None:
        out.extend(request_families(stats.server))
        servers = [s for s in (node.broker_server, node.controller_server) if s is not None]
        out.extend(network_families(stats.server, servers))
        if node.config.is_broker:
            live = None if image is None else image.topics_by_name.keys()
            out.extend(topic_families(stats.topics, live))
    if node.config.is_broker and replicas is not None and image is not None:
        out.extend(replica_families(replicas, image))
    if node.config.is_broker and fetchers is not None:
        out.extend(fetcher_families(fetchers))
    if node.config.is_broker:
        out.extend(quota_families(node.quotas, time.monotonic_ns() // 1_000_000))
    applied_ts = publisher.last_applied_timestamp if publisher is not None else 0
    now_ms = int(time.time() * 1000)
    if image is not None:
        out.extend(metadata_families(image, applied_ts, now_ms))
    out.extend(log_flush_families())
    if quorum is not None:
        driver = quorum.driver
        out.extend(raft_families(driver))
        if node.config.is_controller and image is not None:
            active = node.controller_service is not None and quorum.is_leader
            out.extend(controller_families(image, active, driver.core.hw,
                                           node.election_counter,
                                           node.controller_service, applied_ts, now_ms))
    if node.config.is_broker:
        from broker.metrics.telemetry import telemetry_families

        out.extend(telemetry_families(node.telemetry, node.clock()))
    if node.config.is_broker and node.group_coordinator is not None:
        out.extend(group_families(list(node.group_coordinator.coordinators.values()),
                                  replicas))
    if node.config.is_broker and node.share_groups is not None:
        out.extend(share_families(node.share_groups))
    if node.config.is_broker and node.share_coordinator is not None:
        out.extend(share_coordinator_families(node.share_coordinator.stats))
    return out


__all__ = [
    "ElectionCounter",
    "TopicStats",
    "node_families",
    "request_label",
]
