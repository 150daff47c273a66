"""Every broker and topic property Skiff knows, under Kafka's names, with its type, default
and check; topic configs name the broker key they fall back to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.config.types import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigType,
    at_least,
    between,
    kafka_default_only,
    list_of,
    one_of,
    one_of_ints,
    parse_ip_overrides,
    parse_value,
)

if TYPE_CHECKING:
    from broker.config.types import Validator

# Why num.io.threads sizes nothing in Skiff.
_ONE_LOOP = ("a Skiff broker reads and handles every request on one event loop in each of "
             "its processes, with no request-handler threads to size (num.network.threads "
             "sizes the threads that send large answers); its processes are "
             "skiff.broker.workers (docs/operations.md, \"Using more than one core\")")

# Why the metadata log's segment and retention keys apply to nothing in Skiff.
_METADATA_SEGMENTS = ("Skiff's metadata log (__cluster_metadata) rolls a segment every "
                      "64 MiB and never by time, and deletes segments only once a snapshot "
                      "covers them (broker/metadata/log_store.py)")
_METADATA_RETENTION = ("Skiff keeps the metadata log from its latest snapshot on and the two "
                       "latest snapshots, deleting what they cover as soon as they are "
                       "written, with no size or time limit to set")
# Why queued.max.requests has no queue to bound.
_NO_REQUEST_QUEUE = ("Skiff has no request queue between network and request-handler "
                     "threads: each connection holds at most 100 requests (and 100 MiB of "
                     "request frames) in flight, then its socket is paused and TCP pushes back "
                     "on the client (broker/server/server.py)")
# Why num.recovery.threads.per.data.dir sizes nothing.
_ONE_RECOVERY = ("Skiff recovers a node's logs one after another before it serves, with no "
                 "pool of recovery threads to size")

B, S, INT, SH, L, D, LI, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                              ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE,
                              ConfigType.LIST, ConfigType.PASSWORD)

_DEFAULT_SECURITY_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

def _socket_buffer(key: str, v: Any) -> None:
    if v is not None and v != -1 and v < 1:
        raise ConfigError(key, v, "a size in bytes, or -1 for the OS default")


def _connection_overrides(key: str, v: Any) -> None:
    try:
        parse_ip_overrides(v or "")
    except ValueError as e:
        raise ConfigError(key, v, f"host:count pairs separated by commas ({e})") from None


STREAMS_ASSIGNORS = ("sticky",)  # Kafka 4.4's built-in streams task assignors


def _streams_assignors(key: str, v: Any) -> None:
    if v is None:
        return
    if not v:
        raise ConfigError(key, "", "must not be empty")
    for name in v:
        if name not in STREAMS_ASSIGNORS:
            # Kafka would try it as a class name
            raise ConfigError(key, name, "Class cannot be found")


def _tag_keys(key: str, v: Any) -> None:
    if v is None:
        return
    if any(not t for t in v):
        raise ConfigError(key, ",".join(v), "values must not be empty")
    if len(set(v)) != len(v):
        raise ConfigError(key, ",".join(v), "must not contain duplicate tag keys")


# KIP-1331 (broker/group/streams_topology_description.py): Skiff cannot load a JVM class; it
# builds in the one topology description plugin Kafka ships
_IN_MEMORY_TOPOLOGY_DESCRIPTION_PLUGIN = (
    "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin")


def _topology_description_plugin(key: str, v: Any) -> None:
    if v is not None and str(v).strip() != _IN_MEMORY_TOPOLOGY_DESCRIPTION_PLUGIN:
        raise ConfigError(key, v, "Skiff builds in one topology description plugin, "
                          f"{_IN_MEMORY_TOPOLOGY_DESCRIPTION_PLUGIN}, and can load no other")


# Keys Kafka also reads per listener as listener.name.<listener>.<key> (broker/quotas/
# connections.py); node_config accepts those forms and parses them as the base key.
LISTENER_SCOPED_KEYS = frozenset({"max.connections", "max.connection.creation.rate"})


_BROKER_DEFS: list[ConfigDef] = [
    # KRaft roles and quorum
    ConfigDef("process.roles", LI, [], list_of("broker", "controller")),
    ConfigDef("node.id", INT, -1),
    ConfigDef("controller.quorum.voters", LI, []),
    ConfigDef("controller.quorum.bootstrap.servers", LI, []),
    ConfigDef("controller.listener.names", LI, []),
    ConfigDef("controller.quorum.election.timeout.ms", INT, 1000, at_least(1)),
    ConfigDef("controller.quorum.fetch.timeout.ms", INT, 2000, at_least(1)),
    ConfigDef("controller.quorum.election.backoff.max.ms", INT, 1000, at_least(1)),
    ConfigDef("controller.quorum.append.linger.ms", INT, 25, at_least(0)),
    ConfigDef("controller.quorum.request.timeout.ms", INT, 2000, at_least(1)),
    ConfigDef("controller.quorum.retry.backoff.ms", INT, 20, at_least(0)),
    ConfigDef("controller.quorum.fetch.snapshot.max.bytes", INT, 1024 * 1024, at_least(1)),
    ConfigDef("controller.socket.timeout.ms", INT, 30000, at_least(0)),
    ConfigDef("metadata.log.dir", S, None),
    ConfigDef("metadata.log.segment.bytes", INT, 1024 * 1024 * 1024,
              kafka_default_only(1024 * 1024 * 1024, _METADATA_SEGMENTS)),
    ConfigDef("metadata.log.segment.ms", L, 7 * 24 * 3600 * 1000,
              kafka_default_only(7 * 24 * 3600 * 1000, _METADATA_SEGMENTS)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", L, 20 * 1024 * 1024,
              at_least(1)),
    ConfigDef("metadata.log.max.snapshot.interval.ms", L, 3600 * 1000, at_least(0)),
    ConfigDef("metadata.max.retention.bytes", L, 100 * 1024 * 1024,
              kafka_default_only(100 * 1024 * 1024, _METADATA_RETENTION)),
    ConfigDef("metadata.max.retention.ms", L, 7 * 24 * 3600 * 1000,
              kafka_default_only(7 * 24 * 3600 * 1000, _METADATA_RETENTION)),
    ConfigDef("metadata.max.idle.interval.ms", INT, 500, at_least(0)),
    # Broker liveness: Kafka's defaults. A broker whose heartbeats stop (paused, starved of
    # CPU, cut off) is fenced 9 s after its last one, and a single slow heartbeat or a
    # broker busy applying a large metadata delta for a few seconds fences nothing: Skiff's
    # earlier 1.5 s / 0.5 s fenced brokers over and over on a loaded 2-core machine at
    # 100,000 partitions (issue 17, docs/benchmarks.md), each fence of an RF=1 broker
    # rewriting thousands of partitions. Fast failover after a crash comes from the next
    # key instead.
    ConfigDef("broker.session.timeout.ms", INT, 9000, at_least(1)),
    ConfigDef("broker.heartbeat.interval.ms", INT, 2000, at_least(1)),
    # Skiff's: a broker whose heartbeat connection closed (its process died: the kernel
    # closes its sockets) and that has not heartbeated since is fenced after this many ms,
    # without waiting out the session; a live broker heartbeats at once on a new
    # connection when its heartbeat connection closes. -1 is Kafka's behaviour.
    ConfigDef("broker.session.disconnect.timeout.ms", INT, 750, at_least(-1)),
    # Controlled shutdown (SIGTERM): the broker heartbeats with WantShutDown until the
    # controller, having moved its leaderships away, answers ShouldShutDown; it gives up and
    # stops anyway after controlled.shutdown.timeout.ms (a Skiff key: KRaft Kafka waits up to
    # 5 minutes; 30 s keeps a stuck rollout visible without hanging a deploy).
    ConfigDef("controlled.shutdown.enable", B, True),
    ConfigDef("controlled.shutdown.timeout.ms", INT, 30000, at_least(0)),
    ConfigDef("initial.broker.registration.timeout.ms", INT, 60000, at_least(1)),
    # listeners and network
    ConfigDef("listeners", LI, ["PLAINTEXT://:9092"]),
    ConfigDef("advertised.listeners", LI, None),
    ConfigDef("listener.security.protocol.map", LI, _DEFAULT_SECURITY_MAP.split(",")),
    ConfigDef("inter.broker.listener.name", S, None),
    ConfigDef("admin.listeners", LI, ["127.0.0.1:9094"]),  # Skiff's gRPC admin API
    # ... its TLS (PEM files), client certificates and who may call it unauthenticated
    # (broker/admin/auth.py, docs/security.md)
    ConfigDef("admin.ssl.certificate.location", S, None),
    ConfigDef("admin.ssl.key.location", S, None),
    ConfigDef("admin.ssl.truststore.location", S, None),
    # Kafka's "requested" is not offered: grpcio cannot ask without requiring
    ConfigDef("admin.ssl.client.auth", S, "none", one_of("none", "required")),
    ConfigDef("admin.ssl.principal.mapping.rules", S, "DEFAULT"),
    ConfigDef("admin.allow.unauthenticated", S, "none", one_of("none", "loopback", "all")),
    # Skiff's Prometheus endpoint (docs/monitoring.md); empty: off
    ConfigDef("metrics.listeners", LI, ["127.0.0.1:9095"]),
    # Client telemetry (KIP-714, docs/monitoring.md): Kafka takes what to request from
    # client-metrics resources; Skiff from these two (empty: request nothing).
    ConfigDef("client.telemetry.metrics", LI, []),
    ConfigDef("client.telemetry.push.interval.ms", INT, 300000, at_least(100)),
    ConfigDef("telemetry.max.bytes", INT, 1048576, at_least(1)),
    ConfigDef("security.inter.broker.protocol", S, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS)),
    ConfigDef("socket.request.max.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    # SO_SNDBUF / SO_RCVBUF of the Kafka listeners' sockets (-1: the OS's own sizing)
    ConfigDef("socket.send.buffer.bytes", INT, 100 * 1024, _socket_buffer),
    ConfigDef("socket.receive.buffer.bytes", INT, 100 * 1024, _socket_buffer),
    ConfigDef("socket.listen.backlog.size", INT, 50, at_least(1)),
    ConfigDef("connections.max.idle.ms", L, 600000),
    ConfigDef("queued.max.requests", INT, 500, kafka_default_only(500, _NO_REQUEST_QUEUE)),
    ConfigDef("max.connections", INT, INT_MAX, at_least(0)),
    ConfigDef("max.connections.per.ip", INT, INT_MAX, at_least(0)),
    # "host-or-ip:count,..." (addresses are matched as written; names are not resolved)
    ConfigDef("max.connections.per.ip.overrides", S, "", _connection_overrides),
    # KIP-612; each of these two may also be set per listener as listener.name.<l>.<key>
    ConfigDef("max.connection.creation.rate", INT, INT_MAX, at_least(0)),
    # the native threads that send large zero-copy answers (broker/protocol/_sendpool.c)
    ConfigDef("num.network.threads", INT, 3, between(1, 64)),
    ConfigDef("num.io.threads", INT, 8, kafka_default_only(8, _ONE_LOOP)),
    ConfigDef("request.timeout.ms", INT, 30000, at_least(0)),
    ConfigDef("broker.rack", S, None),
    # topics and logs
    ConfigDef("log.dirs", LI, None),
    ConfigDef("cordoned.log.dirs", LI, []),  # KIP-1066; dynamic (configuration_control)
    ConfigDef("log.dir", S, "/tmp/kafka-logs"),
    ConfigDef("num.partitions", INT, 1, at_least(1)),
    ConfigDef("default.replication.factor", INT, 1, at_least(1)),
    ConfigDef("auto.create.topics.enable", B, True),
    ConfigDef("delete.topic.enable", B, True),
    ConfigDef("message.max.bytes", INT, 1048588, at_least(0)),
    ConfigDef("log.segment.bytes", INT, 1024 * 1024 * 1024, at_least(14)),
    ConfigDef("log.roll.ms", L, None),
    ConfigDef("log.roll.hours", INT, 168, at_least(1)),
    ConfigDef("log.roll.jitter.ms", L, None),
    ConfigDef("log.roll.jitter.hours", INT, 0, at_least(0)),
    ConfigDef("log.retention.ms", L, None),
    ConfigDef("log.retention.minutes", INT, None),
    ConfigDef("log.retention.hours", INT, 168),
    ConfigDef("log.retention.bytes", L, -1),
    ConfigDef("log.retention.check.interval.ms", L, 300000, at_least(1)),
    ConfigDef("log.cleanup.policy", LI, ["delete"], list_of("compact", "delete")),
    ConfigDef("log.cleaner.enable", B, True),
    ConfigDef("log.cleaner.threads", INT, 1, at_least(0)),
    ConfigDef("log.cleaner.backoff.ms", L, 15000, at_least(0)),
    ConfigDef("log.cleaner.delete.retention.ms", L, 86400000, at_least(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", L, 0, at_least(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, at_least(1)),
    ConfigDef("log.cleaner.min.cleanable.ratio", D, 0.5, between(0, 1)),
    ConfigDef("log.flush.interval.messages", L, LONG_MAX, at_least(1)),
    ConfigDef("log.flush.interval.ms", L, None),
    ConfigDef("log.flush.scheduler.interval.ms", L, LONG_MAX),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0)),
    ConfigDef("log.index.size.max.bytes", INT, 10 * 1024 * 1024, at_least(4)),
    ConfigDef("log.index.interval.bytes", INT, 4096, at_least(0)),
    ConfigDef("log.preallocate", B, True),
    ConfigDef("log.drop.behind.bytes", L, 64 * 1024 * 1024, at_least(-1)),  # Skiff's
    ConfigDef("log.segment.delete.delay.ms", L, 60000, at_least(0)),
    ConfigDef("log.message.timestamp.type", S, "CreateTime", one_of("CreateTime", "LogAppendTime")),
    ConfigDef("log.message.timestamp.before.max.ms", L, LONG_MAX, at_least(0)),
    ConfigDef("log.message.timestamp.after.max.ms", L, 3600000, at_least(0)),
    ConfigDef("log.message.downconversion.enable", B, True),
    ConfigDef("compression.type", S, "producer", one_of(*COMPRESSION_TYPES, case_sensitive=False)),
    ConfigDef("compression.gzip.level", INT, -1, one_of_ints(-1, *range(1, 10))),
    ConfigDef("compression.lz4.level", INT, 9, between(1, 17)),
    ConfigDef("compression.zstd.level", INT, 3, between(-131072, 22)),
    ConfigDef("min.insync.replicas", INT, 1, at_least(1)),
    ConfigDef("unclean.leader.election.enable", B, False),
    ConfigDef("auto.leader.rebalance.enable", B, True),
    ConfigDef("leader.imbalance.check.interval.seconds", L, 300, at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", INT, 10, at_least(0)),
    ConfigDef("num.recovery.threads.per.data.dir", INT, 2,  # Kafka 4.x's default
              kafka_default_only(2, _ONE_RECOVERY, sample=1)),
    # replication
    ConfigDef("replica.lag.time.max.ms", L, 30000),
    ConfigDef("num.replica.fetchers", INT, 1, kafka_default_only(
        1, "Skiff follows each leader broker with one fetcher, which carries every partition "
           "this broker follows from it")),
    ConfigDef("replica.fetch.max.bytes", INT, 1024 * 1024, at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", INT, 10 * 1024 * 1024, at_least(0)),
    ConfigDef("replica.fetch.min.bytes", INT, 1),
    ConfigDef("replica.fetch.wait.max.ms", INT, 500),
    ConfigDef("replica.fetch.backoff.ms", INT, 1000, at_least(0)),
    ConfigDef("replica.socket.timeout.ms", INT, 30000),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", L, 5000),
    ConfigDef("fetch.max.bytes", INT, 55 * 1024 * 1024, at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0)),
    # DescribeTopicPartitions (KIP-966): the most partitions one answer carries
    ConfigDef("max.request.partition.size.limit", INT, 2000, at_least(1)),
    # groups and offsets
    ConfigDef("offsets.topic.num.partitions", INT, 50, at_least(1)),
    ConfigDef("offsets.topic.replication.factor", SH, 3, at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    ConfigDef("offsets.retention.minutes", INT, 7 * 24 * 60, at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", L, 600000, at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", INT, 5000, at_least(1)),
    ConfigDef("offset.metadata.max.bytes", INT, 4096),
    ConfigDef("group.initial.rebalance.delay.ms", INT, 3000),
    ConfigDef("group.min.session.timeout.ms", INT, 6000),
    ConfigDef("group.max.session.timeout.ms", INT, 1800000),
    ConfigDef("group.max.size", INT, INT_MAX, at_least(1)),
    # KIP-848 (group.protocol=consumer) groups
    ConfigDef("group.consumer.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", INT, 5000, at_least(1)),
    # the bounds of a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    ConfigDef("group.consumer.min.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", INT, 60000, at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", INT, 5000, at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", INT, 15000, at_least(1)),
    ConfigDef("group.consumer.max.size", INT, INT_MAX, at_least(1)),
    # streams groups' topology descriptions (KIP-1331): unset = no plugin, as Kafka 4.4
    ConfigDef("group.streams.topology.description.plugin.class", ConfigType.CLASS, None,
              _topology_description_plugin),
    # how often a consumer group's target assignment may be recomputed (Kafka 4.4's batching)
    ConfigDef("group.consumer.assignment.interval.ms", INT, 1000, at_least(0)),
    ConfigDef("group.consumer.min.assignment.interval.ms", INT, 0, at_least(0)),
    ConfigDef("group.consumer.max.assignment.interval.ms", INT, 15000, at_least(0)),
    # Kafka 4.4 takes it and runs the assignor within the heartbeat whatever it says (no
    # code of its reads it); Skiff does the same, docs/compatibility.md "Assignment batching"
    ConfigDef("group.consumer.assignor.offload.enable", B, True),
    # streams groups (KIP-1071, broker/group/streams.py): Kafka 4.4's names and defaults
    ConfigDef("group.streams.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.streams.heartbeat.interval.ms", INT, 5000, at_least(1)),
    ConfigDef("group.streams.min.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.streams.max.session.timeout.ms", INT, 60000, at_least(1)),
    ConfigDef("group.streams.min.heartbeat.interval.ms", INT, 5000, at_least(1)),
    ConfigDef("group.streams.max.heartbeat.interval.ms", INT, 15000, at_least(1)),
    # how often a streams group's target assignment may be recomputed (Kafka 4.4's batching)
    ConfigDef("group.streams.assignment.interval.ms", INT, 1000, at_least(0)),
    ConfigDef("group.streams.min.assignment.interval.ms", INT, 0, at_least(0)),
    ConfigDef("group.streams.max.assignment.interval.ms", INT, 15000, at_least(0)),
    # Kafka 4.4 takes it and runs the assignor within the heartbeat whatever it says (no
    # code of its reads it); Skiff does the same, docs/compatibility.md "Assignment batching"
    ConfigDef("group.streams.assignor.offload.enable", B, True),
    ConfigDef("group.streams.max.size", INT, INT_MAX, at_least(1)),
    ConfigDef("group.streams.num.standby.replicas", INT, 0, at_least(0)),
    ConfigDef("group.streams.max.standby.replicas", INT, 2, at_least(0)),
    ConfigDef("group.streams.initial.rebalance.delay.ms", INT, 3000, at_least(0)),
    # the broker's task assignors, the first the default (Kafka 4.4 ships one built-in,
    # sticky; Kafka's custom assignor classes cannot be loaded here)
    ConfigDef("group.streams.assignors", LI, ["sticky"], _streams_assignors),
    ConfigDef("group.streams.rack.aware.assignment.tags", LI, [], _tag_keys),
    # Kafka 4.4 defines these five as internal configs: taken, not described
    ConfigDef("group.streams.task.offset.interval.ms", INT, 60000, at_least(1)),
    ConfigDef("group.streams.min.task.offset.interval.ms", INT, 15000, at_least(1)),
    ConfigDef("group.streams.num.warmup.replicas", INT, 2, at_least(0)),
    ConfigDef("group.streams.max.warmup.replicas", INT, 20, at_least(0)),
    ConfigDef("group.streams.acceptable.recovery.lag", L, 10000, at_least(0)),
    # share groups (KIP-932, broker/share): Kafka 4.4's names and defaults
    ConfigDef("group.share.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.share.heartbeat.interval.ms", INT, 5000, at_least(1)),
    ConfigDef("group.share.min.session.timeout.ms", INT, 45000, at_least(1)),
    ConfigDef("group.share.max.session.timeout.ms", INT, 60000, at_least(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", INT, 5000, at_least(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", INT, 15000, at_least(1)),
    # how often a share group's target assignment may be recomputed (Kafka 4.4's batching)
    ConfigDef("group.share.assignment.interval.ms", INT, 1000, at_least(0)),
    ConfigDef("group.share.min.assignment.interval.ms", INT, 0, at_least(0)),
    ConfigDef("group.share.max.assignment.interval.ms", INT, 15000, at_least(0)),
    # Kafka 4.4 takes it and runs the assignor within the heartbeat whatever it says (no
    # code of its reads it); Skiff does the same, docs/compatibility.md "Assignment batching"
    ConfigDef("group.share.assignor.offload.enable", B, True),
    ConfigDef("group.share.max.size", INT, 200, at_least(1)),
    ConfigDef("group.share.record.lock.duration.ms", INT, 30000, at_least(1000)),
    ConfigDef("group.share.min.record.lock.duration.ms", INT, 15000, at_least(1000)),
    ConfigDef("group.share.max.record.lock.duration.ms", INT, 60000, at_least(1000)),
    ConfigDef("group.share.delivery.count.limit", INT, 5, at_least(2)),
    ConfigDef("group.share.min.delivery.count.limit", INT, 2, at_least(2)),
    ConfigDef("group.share.max.delivery.count.limit", INT, 10, at_least(2)),
    ConfigDef("group.share.partition.max.record.locks", INT, 2000, at_least(1)),
    ConfigDef("group.share.min.partition.max.record.locks", INT, 100, at_least(1)),
    ConfigDef("group.share.max.partition.max.record.locks", INT, 4000, at_least(1)),
    ConfigDef("group.share.max.share.sessions", INT, 2000, at_least(1)),
    # share-group dead-letter queues (KIP-1191, share.version 2, broker/share/dlq.py)
    ConfigDef("errors.deadletterqueue.topic.name.prefix", S, "dlq."),
    ConfigDef("errors.deadletterqueue.auto.create.topics.enable", B, False),
    # the share coordinator (KIP-932, broker/share/coordinator.py) and __share_group_state
    ConfigDef("share.coordinator.state.topic.num.partitions", INT, 50, at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", SH, 3, at_least(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", SH, 2, at_least(1)),
    ConfigDef("share.coordinator.state.topic.segment.bytes", INT, 100 * 1024 * 1024,
              at_least(1)),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", INT, 500,
              at_least(0)),
    ConfigDef("share.coordinator.write.timeout.ms", INT, 5000, at_least(1)),
    # transactions and producer ids
    ConfigDef("transaction.state.log.num.partitions", INT, 50, at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", SH, 3, at_least(1)),
    ConfigDef("transaction.state.log.min.isr", INT, 2, at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    ConfigDef("transaction.max.timeout.ms", INT, 900000, at_least(1)),
    ConfigDef("transactional.id.expiration.ms", INT, 604800000, at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000,
              at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000,
              at_least(1)),
    ConfigDef("producer.id.expiration.ms", INT, 86400000, at_least(1)),
    # KIP-890: a leader checks with the coordinator before a transaction's first append
    ConfigDef("transaction.partition.verification.enable", B, True),
    # transactions V2: a leader adding a partition to a transaction for a Produce retries a
    # coordinator's CONCURRENT_TRANSACTIONS itself, this often, for up to this long (capped
    # by request.timeout.ms), before the producer sees it (Kafka's AddPartitionsToTxnConfig)
    ConfigDef("add.partitions.to.txn.retry.backoff.ms", INT, 20, at_least(1)),
    ConfigDef("add.partitions.to.txn.retry.backoff.max.ms", INT, 100, at_least(0)),
    # Client quotas (broker/quotas, docs/security.md): Kafka's sample windows of the byte-rate
    # and request quotas, and of the controller mutation quota
    ConfigDef("quota.window.num", INT, 11, at_least(1)),
    ConfigDef("quota.window.size.seconds", INT, 1, at_least(1)),
    ConfigDef("controller.quota.window.num", INT, 11, at_least(1)),
    ConfigDef("controller.quota.window.size.seconds", INT, 1, at_least(1)),
    # Skiff's own: which API versions the client listener serves. kafka3 = from v0, every
    # version Kafka 3.9 served; kafka4 = Kafka 4's floors (KIP-896 removed the oldest).
    ConfigDef("skiff.min.api.versions", S, "kafka3", one_of("kafka3", "kafka4")),
    # Skiff's own: how many processes a broker's partitions are spread over
    # (broker/node/shards.py); 1 = the node process serves every partition
    ConfigDef("skiff.broker.workers", INT, 1, at_least(1)),
    # Skiff's own (no Kafka equivalent: Kafka configures logging through log4j)
    ConfigDef("log.format", S, "console", one_of("json", "console")),
    ConfigDef("log.level", S, "INFO",
              one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", case_sensitive=False)),
]


# -- security (broker/security/) -------------------------------------------------
# Kafka's ssl.* keys with Kafka's defaults. Each may also be set per listener as
# `listener.name.<listener>.ssl.<key>` (broker/security/tls.py resolves them); an ssl.* or
# sasl.* key not listed here stops startup (broker/security/settings.py).
def _authorizer_class(key: str, v: Any) -> None:
    """The StandardAuthorizer, none, or an importable Python authorizer class
    (broker/security/plugins.py); anything else stops the node."""
    from broker.security.authorizer import AuthorizerSettings

    AuthorizerSettings.from_values(v, None, False)


def _mechanism_prefixed_only(key: str, v: Any) -> None:
    """Kafka reads a server callback handler only per listener and mechanism (and ignores
    it anywhere else); Skiff refuses it anywhere else rather than ignore it."""
    if v:
        raise ConfigError(key, v, "no value here: a server callback handler is set per "
                          "listener and mechanism, as listener.name.<listener>.oauthbearer."
                          "sasl.server.callback.handler.class (Kafka ignores it elsewhere; "
                          "Skiff takes only OAUTHBEARER's, see docs/security.md)")


def _principal_builder_class(key: str, v: Any) -> None:
    from broker.security.plugins import principal_builder_class

    principal_builder_class(v or "")


def _super_users(key: str, v: Any) -> None:
    from broker.security.authorizer import AuthorizerSettings

    AuthorizerSettings.from_values(None, v, False)


_SECURITY_DEFS: list[ConfigDef] = [
    ConfigDef("ssl.keystore.type", S, "JKS"),
    ConfigDef("ssl.keystore.location", S, None),
    ConfigDef("ssl.keystore.password", P, None, sensitive=True),
    ConfigDef("ssl.key.password", P, None, sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", P, None, sensitive=True),
    ConfigDef("ssl.keystore.key", P, None, sensitive=True),
    ConfigDef("ssl.truststore.type", S, "JKS"),
    ConfigDef("ssl.truststore.location", S, None),
    ConfigDef("ssl.truststore.password", P, None, sensitive=True),
    ConfigDef("ssl.truststore.certificates", P, None, sensitive=True),
    ConfigDef("ssl.client.auth", S, "none", one_of("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"],
              list_of("TLSv1.2", "TLSv1.3")),
    ConfigDef("ssl.protocol", S, "TLSv1.3", one_of("TLS", "TLSv1.2", "TLSv1.3")),
    ConfigDef("ssl.cipher.suites", LI, []),
    ConfigDef("ssl.endpoint.identification.algorithm", S, "https", one_of("https", "")),
    ConfigDef("ssl.principal.mapping.rules", S, "DEFAULT"),
    # SASL: mechanisms PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI is not
    # implemented: a SASL listener needs sasl.enabled.mechanisms set). JAAS configs are
    # per listener and mechanism: listener.name.<l>.<mechanism>.sasl.jaas.config.
    ConfigDef("sasl.enabled.mechanisms", LI, ["GSSAPI"]),
    ConfigDef("sasl.mechanism.inter.broker.protocol", S, "GSSAPI"),
    ConfigDef("sasl.mechanism.controller.protocol", S, "GSSAPI"),
    ConfigDef("connections.max.reauth.ms", L, 0, at_least(0)),
    # Delegation tokens (broker/security/delegation_token.py): disabled without a secret key
    ConfigDef("delegation.token.secret.key", P, None, sensitive=True),
    ConfigDef("delegation.token.max.lifetime.ms", L, 7 * 24 * 3600 * 1000, at_least(1)),
    ConfigDef("delegation.token.expiry.time.ms", L, 24 * 3600 * 1000, at_least(1)),
    ConfigDef("delegation.token.expiry.check.interval.ms", L, 3600 * 1000, at_least(1)),
    # OAUTHBEARER (broker/security/oauthbearer_config.py): the validator class, and the
    # signed-JWT validator's settings; each may be set per listener as
    # listener.name.<l>.oauthbearer.<key>.
    ConfigDef("sasl.server.callback.handler.class", ConfigType.CLASS, None,
              _mechanism_prefixed_only),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", S, None),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", L, 3_600_000, at_least(1)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", L, 100, at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", L, 10_000, at_least(0)),
    ConfigDef("sasl.oauthbearer.expected.audience", LI, []),
    ConfigDef("sasl.oauthbearer.expected.issuer", S, None),
    ConfigDef("sasl.oauthbearer.allow.unverified.audience", B, False),
    ConfigDef("sasl.oauthbearer.allow.unverified.issuer", B, False),
    ConfigDef("sasl.oauthbearer.sub.claim.name", S, "sub"),
    ConfigDef("sasl.oauthbearer.scope.claim.name", S, "scope"),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", INT, 30, at_least(0)),
    # Authorization (broker/security/authorizer.py): empty = none (every principal may do
    # everything); org.apache.kafka.metadata.authorizer.StandardAuthorizer = ACLs from the
    # metadata log; a Python class `module:Class` = a plugin (broker/security/plugins.py).
    # A class that cannot be imported is refused at start.
    ConfigDef("authorizer.class.name", S, "", _authorizer_class),
    # Principals (broker/security/plugins.py): Kafka's DefaultKafkaPrincipalBuilder (unset)
    # or a Python class `module:Class`.
    ConfigDef("principal.builder.class", ConfigType.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
              _principal_builder_class),
    ConfigDef("super.users", S, "", _super_users),
    ConfigDef("allow.everyone.if.no.acl.found", B, False),
]
_BROKER_DEFS += _SECURITY_DEFS


BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}

# Keys that are per-node identity or topology: AlterConfigs cannot change them.
READ_ONLY_BROKER_KEYS = frozenset(
    k for k in BROKER_CONFIGS
    if k.startswith(("process.", "node.", "controller.", "metadata.log.dir", "listener",
                     "log.dir", "broker.rack", "advertised.", "inter.broker",
                     "ssl.", "sasl."))  # security: files are re-read instead (docs/security.md)
    or k in ("listeners", "log.dirs", "log.dir", "connections.max.reauth.ms")
)


# -- topic configs -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic-level config, the broker keys it falls back to (synonyms, most specific first)."""

    name: str
    type: ConfigType
    validator: Validator | None
    synonyms: tuple[str, ...]  # broker keys; the first one present wins
    default: Any = None        # used only when there is no broker synonym

    def parse(self, raw: object) -> Any:
        return parse_value(self.name, self.type, raw, self.validator)


_TOPIC_DEFS: list[TopicConfigDef] = [
    TopicConfigDef("cleanup.policy", LI, list_of("compact", "delete"), ("log.cleanup.policy",)),
    TopicConfigDef("compression.type", S, one_of(*COMPRESSION_TYPES, case_sensitive=False),
                   ("compression.type",)),
    TopicConfigDef("compression.gzip.level", INT, one_of_ints(-1, *range(1, 10)),
                   ("compression.gzip.level",)),
    TopicConfigDef("compression.lz4.level", INT, between(1, 17), ("compression.lz4.level",)),
    TopicConfigDef("compression.zstd.level", INT, between(-131072, 22),
                   ("compression.zstd.level",)),
    TopicConfigDef("delete.retention.ms", L, at_least(0), ("log.cleaner.delete.retention.ms",)),
    # a share group may write its dead letters here (KIP-1191); no broker default behind it
    TopicConfigDef("errors.deadletterqueue.group.enable", B, None, (), False),
    TopicConfigDef("file.delete.delay.ms", L, at_least(0), ("log.segment.delete.delay.ms",)),
    TopicConfigDef("flush.messages", L, at_least(1), ("log.flush.interval.messages",)),
    TopicConfigDef("flush.ms", L, at_least(0),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    TopicConfigDef("follower.replication.throttled.replicas", LI, None, (), []),
    TopicConfigDef("index.interval.bytes", INT, at_least(0), ("log.index.interval.bytes",)),
    TopicConfigDef("leader.replication.throttled.replicas", LI, None, (), []),
    TopicConfigDef("max.compaction.lag.ms", L, at_least(1),
                   ("log.cleaner.max.compaction.lag.ms",)),
    TopicConfigDef("max.message.bytes", INT, at_least(0), ("message.max.bytes",)),
    TopicConfigDef("message.downconversion.enable", B, None,
                   ("log.message.downconversion.enable",)),
    TopicConfigDef("message.timestamp.after.max.ms", L, at_least(0),
                   ("log.message.timestamp.after.max.ms",)),
    TopicConfigDef("message.timestamp.before.max.ms", L, at_least(0),
                   ("log.message.timestamp.before.max.ms",)),
    TopicConfigDef("message.timestamp.type", S, one_of("CreateTime", "LogAppendTime"),
                   ("log.message.timestamp.type",)),
    TopicConfigDef("min.cleanable.dirty.ratio", D, between(0, 1),
                   ("log.cleaner.min.cleanable.ratio",)),
    TopicConfigDef("min.compaction.lag.ms", L, at_least(0),
                   ("log.cleaner.min.compaction.lag.ms",)),
    TopicConfigDef("min.insync.replicas", INT, at_least(1), ("min.insync.replicas",)),
    TopicConfigDef("preallocate", B, None, ("log.preallocate",)),
    TopicConfigDef("drop.behind.bytes", L, at_least(-1), ("log.drop.behind.bytes",)),
    TopicConfigDef("retention.bytes", L, None, ("log.retention.bytes",)),
    TopicConfigDef("retention.ms", L, at_least(-1),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    TopicConfigDef("segment.bytes", INT, at_least(14), ("log.segment.bytes",)),
    TopicConfigDef("segment.index.bytes", INT, at_least(4), ("log.index.size.max.bytes",)),
    TopicConfigDef("segment.jitter.ms", L, at_least(0),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    TopicConfigDef("segment.ms", L, at_least(1), ("log.roll.ms", "log.roll.hours")),
    TopicConfigDef("unclean.leader.election.enable", B, None,
                   ("unclean.leader.election.enable",)),
]
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}

# Broker keys whose unit differs from the topic key they stand in for.
_SYNONYM_SCALE = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
                  "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Check names and values of topic configs from a request; return the parsed values.

    Raises ConfigError for an unknown name or a bad value (INVALID_CONFIG to the client).
    A None value is kept as None (it means "delete" / "use the default").
    """
    out: dict[str, Any] = {}
    for name, raw in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(name, raw, "Unknown topic config name")
        out[name] = None if raw is None else d.parse(raw)
    return out
