"""The node configuration: Kafka's property names, types, defaults and checks.

Sources, lowest to highest precedence:
  1. a Kafka `.properties` file (java.util.Properties syntax),
  2. `--override key=value` arguments,
  3. environment variables `SKIFF_<KEY>`: the key upper-cased with dots as
     underscores (SKIFF_NODE_ID, SKIFF_LOG_DIRS). As in Kafka's container image, a
     double underscore stands for '_' and a triple one for '-'.
A value that does not parse or validate raises ConfigError naming the key, the
value and what was expected; an unknown key is a warning; cross-field rules
follow KafkaConfig's KRaft checks.

Also here: the topic-level config definitions (each with the broker key it falls
back to) for CreateTopics/AlterConfigs validation and DescribeConfigs sources and
synonyms, and `log_config()` turning a topic's effective configs into the log
engine's dict.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A config value that stops startup (or a request): says key, value and what was expected."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        super().__init__(f"Invalid value {value!r} for configuration {key}: {expected}")
        self.key = key
        self.value = value
        self.expected = expected


class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type codes (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


# -- validators ---------------------------------------------------------------

Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and v < minimum:
            raise ConfigError(key, v, f"Value must be at least {minimum}")
    return check


def between(lo: float, hi: float) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and not lo <= v <= hi:
            raise ConfigError(key, v, f"Value must be between {lo} and {hi}")
    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    allowed = choices if case_sensitive else tuple(c.lower() for c in choices)

    def check(key: str, v: Any) -> None:
        if v is None:
            return
        probe = v if case_sensitive else str(v).lower()
        if probe not in allowed:
            raise ConfigError(key, v, f"String must be one of: {', '.join(choices)}")
    return check


def list_of(*choices: str, allow_empty: bool = True) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is None:
            return
        if not v and not allow_empty:
            raise ConfigError(key, v, "Empty list not allowed")
        for item in v:
            if item not in choices:
                raise ConfigError(key, ",".join(v), f"Valid values are: {', '.join(choices)}")
    return check


def one_of_ints(*allowed: int) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and v not in allowed:
            raise ConfigError(key, v, f"Value must be one of {list(allowed)}")
    return check


# -- definitions ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any  # parsed value; None means "no default" (null)
    validator: Validator | None = None
    doc: str = ""
    sensitive: bool = False

    def parse(self, raw: object) -> Any:
        return parse_value(self.name, self.type, raw, self.validator)


_INT_RANGES = {ConfigType.INT: (-(2**31), 2**31 - 1), ConfigType.SHORT: (-(2**15), 2**15 - 1),
               ConfigType.LONG: (-(2**63), 2**63 - 1)}
_EXPECTED = {ConfigType.INT: "an int (32 bit)", ConfigType.SHORT: "a short (16 bit)",
             ConfigType.LONG: "a long (64 bit)"}


def parse_value(key: str, ctype: ConfigType, raw: object, validator: Validator | None) -> Any:
    """Parse one value as Kafka's ConfigDef does (strings are trimmed; booleans are true/false)."""
    value: Any
    if raw is None:
        value = None
    elif ctype is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            value = raw
        else:
            s = str(raw).strip().lower()
            if s not in ("true", "false"):
                raise ConfigError(key, raw, "Expected value to be either true or false")
            value = s == "true"
    elif ctype in _INT_RANGES:
        if isinstance(raw, bool):
            raise ConfigError(key, raw, f"Expected value to be {_EXPECTED[ctype]}")
        if isinstance(raw, int):
            value = raw
        else:
            s = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", s):
                raise ConfigError(key, raw, f"Expected value to be {_EXPECTED[ctype]}")
            value = int(s)
        lo, hi = _INT_RANGES[ctype]
        if not lo <= value <= hi:
            raise ConfigError(key, raw, f"Expected value to be {_EXPECTED[ctype]}")
    elif ctype is ConfigType.DOUBLE:
        try:
            value = float(str(raw).strip()) if not isinstance(raw, int | float) else float(raw)
        except ValueError:
            raise ConfigError(key, raw, "Expected value to be a double") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(key, raw, "Expected value to be a finite double")
    elif ctype is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            value = [str(x).strip() for x in raw]
        else:
            s = str(raw).strip()
            value = [] if not s else [x.strip() for x in s.split(",")]
    elif ctype is ConfigType.PASSWORD:
        value = str(raw)
    else:
        value = str(raw).strip()
    if validator is not None:
        try:
            validator(key, value)
        except ConfigError as exc:
            shown = raw if isinstance(raw, str) else exc.value
            raise ConfigError(key, shown, exc.expected) from None
    return value


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """A parsed value as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.DOUBLE:
        return repr(float(value))
    return str(value)


B, S, INT, SH, L, D, LI, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                              ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE,
                              ConfigType.LIST, ConfigType.PASSWORD)

_DEFAULT_SECURITY_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

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
    ConfigDef("metadata.log.segment.bytes", INT, 1024 * 1024 * 1024, at_least(12)),
    ConfigDef("metadata.log.segment.ms", L, 7 * 24 * 3600 * 1000, at_least(1)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", L, 20 * 1024 * 1024,
              at_least(1)),
    ConfigDef("metadata.log.max.snapshot.interval.ms", L, 3600 * 1000, at_least(0)),
    ConfigDef("metadata.max.retention.bytes", L, 100 * 1024 * 1024),
    ConfigDef("metadata.max.retention.ms", L, 7 * 24 * 3600 * 1000),
    ConfigDef("metadata.max.idle.interval.ms", INT, 500, at_least(0)),
    # Broker liveness. Kafka's defaults (9000 / 2000) leave a crashed broker's partitions
    # leaderless for up to 9 s. Skiff aims at a failover under 2 s (kill -9 of a leader's
    # broker -> the producer's next write acknowledged): a broker is fenced, and its
    # leaderships move, 1.5 s after its last heartbeat, plus at most one controller tick
    # (CONTROLLER_TICK_MS in broker/node.py). Three heartbeats fit in a session, so one
    # lost or late heartbeat (a busy event loop) does not fence a live broker. Heartbeats
    # are small and answered from memory unless the broker's state changes, so 2/s per
    # broker is cheap for the controller. Raise both on slow or overloaded hosts.
    ConfigDef("broker.session.timeout.ms", INT, 1500, at_least(1)),
    ConfigDef("broker.heartbeat.interval.ms", INT, 500, at_least(1)),
    # Skiff's: null is 1.5 x broker.heartbeat.interval.ms; -1 is Kafka's behaviour.
    ConfigDef("broker.session.disconnect.timeout.ms", INT, None, at_least(-1)),
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
    ConfigDef("security.inter.broker.protocol", S, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS)),
    ConfigDef("socket.request.max.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    ConfigDef("socket.send.buffer.bytes", INT, 100 * 1024),
    ConfigDef("socket.receive.buffer.bytes", INT, 100 * 1024),
    ConfigDef("socket.listen.backlog.size", INT, 50, at_least(1)),
    ConfigDef("connections.max.idle.ms", L, 600000),
    ConfigDef("queued.max.requests", INT, 500, at_least(1)),
    ConfigDef("max.connections", INT, INT_MAX, at_least(0)),
    ConfigDef("max.connections.per.ip", INT, INT_MAX, at_least(0)),
    ConfigDef("num.network.threads", INT, 3, at_least(1)),
    ConfigDef("num.io.threads", INT, 8, at_least(1)),
    ConfigDef("request.timeout.ms", INT, 30000, at_least(0)),
    ConfigDef("broker.rack", S, None),
    # topics and logs
    ConfigDef("log.dirs", LI, None),
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
    ConfigDef("num.recovery.threads.per.data.dir", INT, 1, at_least(1)),
    # replication
    ConfigDef("replica.lag.time.max.ms", L, 30000),
    ConfigDef("num.replica.fetchers", INT, 1),
    ConfigDef("replica.fetch.max.bytes", INT, 1024 * 1024, at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", INT, 10 * 1024 * 1024, at_least(0)),
    ConfigDef("replica.fetch.min.bytes", INT, 1),
    ConfigDef("replica.fetch.wait.max.ms", INT, 500),
    ConfigDef("replica.fetch.backoff.ms", INT, 1000, at_least(0)),
    ConfigDef("replica.socket.timeout.ms", INT, 30000),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", L, 5000),
    ConfigDef("fetch.max.bytes", INT, 55 * 1024 * 1024, at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0)),
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
    ConfigDef("group.consumer.max.size", INT, INT_MAX, at_least(1)),
    # transactions and producer ids
    ConfigDef("transaction.state.log.num.partitions", INT, 50, at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", SH, 3, at_least(1)),
    ConfigDef("transaction.state.log.min.isr", INT, 2, at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    ConfigDef("transaction.max.timeout.ms", INT, 900000, at_least(1)),
    ConfigDef("transactional.id.expiration.ms", INT, 604800000, at_least(1)),
    ConfigDef("producer.id.expiration.ms", INT, 86400000, at_least(1)),
    # Skiff's own (no Kafka equivalent: Kafka configures logging through log4j)
    ConfigDef("log.format", S, "console", one_of("json", "console")),
    ConfigDef("log.level", S, "INFO",
              one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", case_sensitive=False)),
]


# -- security (broker/security/) -------------------------------------------------
# Kafka's ssl.* keys with Kafka's defaults. Each may also be set per listener as
# `listener.name.<listener>.ssl.<key>` (broker/security/tls.py resolves them); an ssl.* or
# sasl.* key not listed here stops startup (broker/security/settings.py).
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


# -- java.util.Properties ------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    lines = text.splitlines()
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= n:
                    break
                line = lines[i].lstrip(" \t\f")
                i += 1
                continue
            parts.append(line)
            break
        yield "".join(parts)


def _unescape(s: str) -> str:
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1:i + 5]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ValueError(f"Malformed \\uxxxx encoding in {s!r}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: '#'/'!' comments, '=' ':' or whitespace separators,
    backslash escapes (\\t \\n \\uXXXX ...), and lines continued by a trailing backslash."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key_raw = line[:min(i, n)]
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        props[_unescape(key_raw)] = _unescape(line[j:])
    return props


# -- listeners, voters ---------------------------------------------------------

_LISTENER = re.compile(r"^([A-Za-z0-9_.\-]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str  # "" means all interfaces
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_listeners(key: str, items: Sequence[str],
                    protocol_map: Mapping[str, str]) -> list[Listener]:
    out: list[Listener] = []
    seen: set[str] = set()
    for item in items:
        m = _LISTENER.match(item.strip())
        if not m:
            raise ConfigError(key, ",".join(items),
                              f"{item!r} is not a listener of the form NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, ",".join(items), f"port {port} is not in 0..65535")
        if name in seen:
            raise ConfigError(key, ",".join(items), f"listener name {name} appears twice")
        seen.add(name)
        proto = protocol_map.get(name)
        if proto is None:
            raise ConfigError(key, ",".join(items),
                              f"listener {name} has no entry in listener.security.protocol.map")
        out.append(Listener(name, host, port, proto))
    return out


def _host_port(key: str, value: str, item: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[?([0-9a-zA-Z\-%._:]+?)\]?:([0-9]+)", item)
    if not m or not 0 < int(m.group(2)) <= 65535:
        raise ConfigError(key, value, f"{item!r} is not host:port")
    return m.group(1), int(m.group(2))


def parse_voters(key: str, items: Sequence[str]) -> list[Voter]:
    value = ",".join(items)
    out: list[Voter] = []
    for item in items:
        node, sep, rest = item.strip().partition("@")
        if not sep or not re.fullmatch(r"\d+", node):
            raise ConfigError(key, value, f"{item!r} is not of the form id@host:port")
        host, port = _host_port(key, value, rest)
        out.append(Voter(int(node), host, port))
    ids = [v.node_id for v in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(key, value, "a node id appears more than once")
    return out


# -- the node config -----------------------------------------------------------


@dataclass
class NodeConfig:
    """Parsed, validated config of one node. `cfg["num.partitions"]` gives the typed value."""

    values: dict[str, Any]
    originals: dict[str, str]          # what was explicitly set (known and unknown keys)
    origin: dict[str, str]             # key -> "file" | "override" | "env"
    warnings: list[str] = field(default_factory=list)
    # derived
    process_roles: frozenset[str] = frozenset()
    node_id: int = -1
    voters: list[Voter] = field(default_factory=list)
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    advertised_listeners: list[Listener] = field(default_factory=list)
    security_protocol_map: dict[str, str] = field(default_factory=dict)
    controller_listener_names: list[str] = field(default_factory=list)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dirs: list[Path] = field(default_factory=list)
    metadata_log_dir: Path = Path()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    def is_set(self, key: str) -> bool:
        """Whether a key was given explicitly (STATIC_BROKER_CONFIG) rather than defaulted."""
        return key in self.originals

    def listener(self, name: str) -> Listener | None:
        for lst in self.listeners:
            if lst.name == name:
                return lst
        return None

    @property
    def broker_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name not in self.controller_listener_names]

    @property
    def controller_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name in self.controller_listener_names]

    def all_directories(self) -> list[Path]:
        """Every log dir plus the metadata log dir, without duplicates, in order."""
        out: list[Path] = []
        for d in [*self.log_dirs, self.metadata_log_dir]:
            if d not in out:
                out.append(d)
        return out

    def retention_ms(self) -> int:
        return int(_broker_synonym_value(self, TOPIC_CONFIGS["retention.ms"])[0])

    def summary(self) -> dict[str, Any]:
        """Explicitly-set known keys and a few essentials, for the startup log line."""
        keys = {"process.roles", "node.id", "listeners", "log.dirs"} | set(self.originals)
        return {k: self.values[k] for k in sorted(keys)
                if k in self.values and not BROKER_CONFIGS[k].sensitive}


def env_key(key: str) -> str:
    return "SKIFF_" + key.upper().replace("_", "__").replace("-", "___").replace(".", "_")


def _key_from_env(name: str) -> str:
    body = name[len("SKIFF_"):].lower()
    return body.replace("___", "\0").replace("__", "\1").replace("_", ".").replace(
        "\0", "-").replace("\1", "_")


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--override", item, "key=value")
        out[key.strip()] = value
    return out


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, str] | Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> NodeConfig:
    """Read a properties file, then overrides, then SKIFF_* env; validate; return the config.

    `env` defaults to os.environ; pass {} to ignore the environment. Warnings (unknown
    keys) go to `warn`, or to the structlog logger "skiff.config" when it is None, and
    are kept in `NodeConfig.warnings` either way.
    """
    raw: dict[str, str] = {}
    origin: dict[str, str] = {}
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("config file", str(p), f"a readable file ({exc.strerror})") from None
        for k, v in parse_properties(text).items():
            raw[k], origin[k] = v, "file"
    ov = overrides if isinstance(overrides, Mapping) else parse_overrides(overrides)
    for k, v in ov.items():
        raw[k], origin[k] = v, "override"
    if env is None:
        env = os.environ
    if env:
        for name, v in env.items():
            if not name.startswith("SKIFF_") or len(name) <= len("SKIFF_"):
                continue
            k = _key_from_env(name)
            raw[k], origin[k] = v, "env"
    return build_config(raw, origin, warn)


def build_config(raw: Mapping[str, str], origin: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None) -> NodeConfig:
    warnings: list[str] = []

    def _emit(msg: str) -> None:
        if warn is not None:
            warn(msg)
        else:
            import structlog

            structlog.get_logger("skiff.config").warning(msg)

    def warning(msg: str) -> None:
        warnings.append(msg)
        _emit(msg)

    values: dict[str, Any] = {}
    for key, d in BROKER_CONFIGS.items():
        values[key] = d.parse(raw[key]) if key in raw else d.default
    from broker.security.settings import refuse_unsupported_keys

    # ssl.*/sasl.* keys Skiff lacks are errors; per-listener forms of known ones are parsed
    accepted = refuse_unsupported_keys(raw, BROKER_CONFIGS)
    for key in raw:
        if key not in BROKER_CONFIGS and key not in accepted:
            warning(f"unknown configuration {key!r} (from {(origin or {}).get(key, 'input')}) "
                    "is ignored")
    cfg = NodeConfig(values=values, originals=dict(raw), origin=dict(origin or {}),
                     warnings=warnings)
    warnings_before = list(warnings)
    _derive_and_check(cfg, set(raw))
    for msg in cfg.warnings[len(warnings_before):]:
        _emit(msg)
    return cfg


def _derive_and_check(cfg: NodeConfig, explicit: set[str]) -> None:
    v = cfg.values
    roles = v["process.roles"]
    if not roles:
        raise ConfigError("process.roles", ",".join(roles),
                          "a non-empty list of roles: broker, controller, or broker,controller")
    if len(set(roles)) != len(roles):
        raise ConfigError("process.roles", ",".join(roles), "each role at most once")
    cfg.process_roles = frozenset(roles)
    if v["node.id"] < 0:
        raise ConfigError("node.id", v["node.id"], "a non-negative node id (required in KRaft)")
    cfg.node_id = v["node.id"]

    # security protocol map
    pmap: dict[str, str] = {}
    for item in v["listener.security.protocol.map"]:
        name, sep, proto = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError("listener.security.protocol.map", ",".join(
                v["listener.security.protocol.map"]), f"{item!r} is not NAME:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", item,
                              f"a security protocol among {', '.join(SECURITY_PROTOCOLS)}")
        pmap[name.strip().upper()] = proto
    cfg.controller_listener_names = [n.upper() for n in v["controller.listener.names"]]
    if "listener.security.protocol.map" not in explicit:
        # As Kafka does in KRaft: controller listeners not in the default map use PLAINTEXT.
        for n in cfg.controller_listener_names:
            pmap.setdefault(n, "PLAINTEXT")
    cfg.security_protocol_map = pmap
    if not cfg.controller_listener_names:
        raise ConfigError("controller.listener.names", "",
                          "at least one listener name (required when process.roles is set)")
    for n in cfg.controller_listener_names:
        if n not in pmap:
            raise ConfigError("controller.listener.names", n,
                              "a name with an entry in listener.security.protocol.map")

    for item in v["listeners"]:
        if not _LISTENER.match(item.strip()):
            raise ConfigError("listeners", ",".join(v["listeners"]),
                              f"{item!r} is not a listener of the form NAME://host:port")
    raw_names = [item.strip().split("://", 1)[0].upper() for item in v["listeners"]]
    if cfg.is_controller and not any(n in raw_names for n in cfg.controller_listener_names):
        raise ConfigError(
            "controller.listener.names", ",".join(cfg.controller_listener_names),
            "at least one value appearing in listeners "
            f"({','.join(v['listeners'])}) because process.roles contains controller")
    cfg.listeners = parse_listeners("listeners", v["listeners"], pmap)
    from broker.security.settings import refuse_unsupported_listeners

    refuse_unsupported_listeners("listeners", cfg.listeners)  # never served as PLAINTEXT
    ports = [x.port for x in cfg.listeners if x.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError("listeners", ",".join(v["listeners"]), "each listener on its own port")
    listener_names = [x.name for x in cfg.listeners]

    # voters / bootstrap servers
    cfg.voters = parse_voters("controller.quorum.voters", v["controller.quorum.voters"])
    cfg.bootstrap_servers = [
        _host_port("controller.quorum.bootstrap.servers",
                   ",".join(v["controller.quorum.bootstrap.servers"]), s.strip())
        for s in v["controller.quorum.bootstrap.servers"]
    ]
    if not cfg.voters and not cfg.bootstrap_servers:
        raise ConfigError("controller.quorum.voters", "",
                          "either controller.quorum.voters (id@host:port,...) or "
                          "controller.quorum.bootstrap.servers must be set")
    voter_ids = {x.node_id for x in cfg.voters}


    if cfg.is_controller:
        if cfg.voters and cfg.node_id not in voter_ids:
            raise ConfigError(
                "controller.quorum.voters", ",".join(v["controller.quorum.voters"]),
                f"the set of voters to include node.id {cfg.node_id} "
                "because process.roles contains controller")
        if not cfg.is_broker:
            extra = [n for n in listener_names if n not in cfg.controller_listener_names]
            if extra:
                raise ConfigError(
                    "listeners", ",".join(v["listeners"]),
                    "only controller listeners when process.roles=controller "
                    f"(found {','.join(extra)})")
    else:
        if cfg.node_id in voter_ids:
            raise ConfigError(
                "controller.quorum.voters", ",".join(v["controller.quorum.voters"]),
                f"a set of voters that does not include node.id {cfg.node_id}, because "
                "process.roles contains just the broker role")
        clash = [n for n in cfg.controller_listener_names if n in listener_names]
        if clash:
            raise ConfigError(
                "controller.listener.names", ",".join(cfg.controller_listener_names),
                "names that do not appear in listeners when process.roles=broker "
                f"(found {','.join(clash)})")

    if cfg.is_broker:
        if v["inter.broker.listener.name"] is not None and "security.inter.broker.protocol" in \
                explicit:
            raise ConfigError("inter.broker.listener.name", v["inter.broker.listener.name"],
                              "not to be set together with security.inter.broker.protocol")
        ibl = v["inter.broker.listener.name"]
        if ibl is None:
            proto = v["security.inter.broker.protocol"]
            ibl = next((x.name for x in cfg.broker_listeners if x.security_protocol == proto),
                       proto)
        ibl = ibl.upper()
        if ibl in cfg.controller_listener_names:
            raise ConfigError("inter.broker.listener.name", ibl,
                              "a broker listener, not one of controller.listener.names")
        if ibl not in listener_names:
            raise ConfigError("inter.broker.listener.name", ibl,
                              "a listener name that appears in listeners "
                              f"({','.join(listener_names)})")
        cfg.inter_broker_listener_name = ibl
        if not cfg.broker_listeners:
            raise ConfigError("listeners", ",".join(v["listeners"]),
                              "at least one non-controller listener for the broker role")

    if v["advertised.listeners"] is not None:
        adv = parse_listeners("advertised.listeners", v["advertised.listeners"], pmap)
        for a in adv:
            if a.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", ",".join(v["advertised.listeners"]),
                                  f"a routable host, not the meta-address {a.host}")
            if a.name not in listener_names:
                raise ConfigError("advertised.listeners", ",".join(v["advertised.listeners"]),
                                  f"listener {a.name} to appear in listeners")
        named = {a.name for a in adv}
        # listeners not advertised explicitly are advertised as they are bound
        cfg.advertised_listeners = adv + [x for x in cfg.listeners if x.name not in named]
    else:
        cfg.advertised_listeners = list(cfg.listeners)

    dirs = v["log.dirs"] if v["log.dirs"] is not None else [v["log.dir"]]
    dirs = [d for d in dirs if d]
    if not dirs:
        raise ConfigError("log.dirs", ",".join(v["log.dirs"] or []), "at least one directory")
    if len(set(dirs)) != len(dirs):
        raise ConfigError("log.dirs", ",".join(dirs), "each directory once")
    cfg.log_dirs = [Path(d) for d in dirs]
    cfg.metadata_log_dir = Path(v["metadata.log.dir"]) if v["metadata.log.dir"] else \
        cfg.log_dirs[0]

    if v["broker.heartbeat.interval.ms"] >= v["broker.session.timeout.ms"]:
        raise ConfigError("broker.heartbeat.interval.ms", v["broker.heartbeat.interval.ms"],
                          "less than broker.session.timeout.ms "
                          f"({v['broker.session.timeout.ms']})")
    disconnect = v["broker.session.disconnect.timeout.ms"]
    if disconnect is not None and 0 <= disconnect < v["broker.heartbeat.interval.ms"]:
        # A live broker whose connection dropped heartbeats again within an interval.
        raise ConfigError("broker.session.disconnect.timeout.ms", disconnect,
                          "-1, or at least broker.heartbeat.interval.ms "
                          f"({v['broker.heartbeat.interval.ms']})")
    if v["socket.request.max.bytes"] < v["message.max.bytes"]:
        cfg.warnings.append("socket.request.max.bytes is smaller than message.max.bytes: "
                            "produce requests near the message limit will be refused")


def session_disconnect_timeout_ms(cfg: NodeConfig) -> int:
    """broker.session.disconnect.timeout.ms as the controller applies it."""
    value = cfg["broker.session.disconnect.timeout.ms"]
    return int(value) if value is not None else cfg["broker.heartbeat.interval.ms"] * 3 // 2


# -- effective topic configs and DescribeConfigs -------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def _broker_synonym_value(
    cfg: NodeConfig, d: TopicConfigDef,
    dynamic_default: Mapping[str, str] | None = None,
) -> tuple[Any, ConfigSource, list[ConfigSynonym]]:
    """The broker-level value a topic config falls back to, its source, and the synonyms.

    Order as Kafka reports it: dynamic cluster default, then static broker keys in the
    file (most specific key first), then the Kafka default of the first synonym.
    """
    synonyms: list[ConfigSynonym] = []
    chosen: tuple[Any, ConfigSource] | None = None
    for src, getter in ((ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default or {}),
                        (ConfigSource.STATIC_BROKER_CONFIG, cfg.originals)):
        for key in d.synonyms:
            if key in getter:
                bd = BROKER_CONFIGS[key]
                val = bd.parse(getter[key])
                synonyms.append(ConfigSynonym(key, format_value(bd.type, val), src))
                if chosen is None and val is not None:
                    chosen = (val * _SYNONYM_SCALE.get(key, 1), src)
    if chosen is None:
        for key in d.synonyms:
            bd = BROKER_CONFIGS[key]
            if bd.default is not None:
                synonyms.append(ConfigSynonym(key, format_value(bd.type, bd.default),
                                              ConfigSource.DEFAULT_CONFIG))
                chosen = (bd.default * _SYNONYM_SCALE.get(key, 1)
                          if not isinstance(bd.default, bool | list | str) else bd.default,
                          ConfigSource.DEFAULT_CONFIG)
                break
    if chosen is None:
        chosen = (d.default, ConfigSource.DEFAULT_CONFIG)
    return chosen[0], chosen[1], synonyms


def effective_topic_configs(
    cfg: NodeConfig, topic_overrides: Mapping[str, str],
    dynamic_default: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every topic config's typed value for one topic: override, else the broker's value."""
    out: dict[str, Any] = {}
    for name, d in TOPIC_CONFIGS.items():
        if name in topic_overrides:
            try:
                out[name] = d.parse(topic_overrides[name])
                continue
            except ConfigError:
                pass  # only a record from another version could hold one: use the default
        out[name] = _broker_synonym_value(cfg, d, dynamic_default)[0]
    return out


def describe_topic_configs(
    cfg: NodeConfig, topic_overrides: Mapping[str, str],
    names: Iterable[str] | None = None, include_synonyms: bool = False,
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs for a TOPIC resource: value, source and (optionally) synonyms."""
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    out: list[ConfigEntry] = []
    for name in wanted:
        d = TOPIC_CONFIGS[name]
        bval, bsrc, bsyn = _broker_synonym_value(cfg, d, dynamic_default)
        synonyms: list[ConfigSynonym] = []
        if name in topic_overrides:
            try:
                shown = format_value(d.type, d.parse(topic_overrides[name]))
            except ConfigError:
                shown = topic_overrides[name]
            synonyms.append(ConfigSynonym(name, shown, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            value, source = shown, ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = format_value(d.type, bval), bsrc
        synonyms.extend(bsyn)
        out.append(ConfigEntry(name, value, source, d.type,
                               synonyms=tuple(synonyms) if include_synonyms else ()))
    return out


def describe_broker_configs(
    cfg: NodeConfig, names: Iterable[str] | None = None, include_synonyms: bool = False,
    dynamic_broker: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs for a BROKER resource (this node)."""
    wanted = sorted(BROKER_CONFIGS) if names is None else [n for n in names if n in BROKER_CONFIGS]
    out: list[ConfigEntry] = []
    for name in wanted:
        d = BROKER_CONFIGS[name]
        synonyms: list[ConfigSynonym] = []
        layers = ((ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker or {}),
                  (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default or {}),
                  (ConfigSource.STATIC_BROKER_CONFIG, cfg.originals))
        for src, layer in layers:
            if name in layer:
                synonyms.append(ConfigSynonym(name, format_value(d.type, d.parse(layer[name])),
                                              src))
        if d.default is not None:
            synonyms.append(ConfigSynonym(name, format_value(d.type, d.default),
                                          ConfigSource.DEFAULT_CONFIG))
        if synonyms:
            value, source = synonyms[0].value, synonyms[0].source
        else:
            value, source = None, ConfigSource.DEFAULT_CONFIG
        if d.sensitive:
            value = None
        out.append(ConfigEntry(name, value, source, d.type,
                               read_only=name in READ_ONLY_BROKER_KEYS, sensitive=d.sensitive,
                               synonyms=tuple(synonyms) if include_synonyms else ()))
    return out


def log_config(effective: Mapping[str, Any]) -> dict[str, Any]:
    """The log engine's config dict from a topic's effective configs (typed values,
    Kafka's topic-level names)."""
    keys = ("segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes",
            "index.interval.bytes", "retention.ms", "retention.bytes", "cleanup.policy",
            "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
            "message.timestamp.after.max.ms", "flush.messages", "flush.ms",
            "file.delete.delay.ms", "delete.retention.ms", "min.compaction.lag.ms",
            "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "compression.type",
            "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
            "preallocate", "drop.behind.bytes", "min.insync.replicas",
            "unclean.leader.election.enable")
    out = {k: effective[k] for k in keys}
    out["cleanup.policy"] = list(out["cleanup.policy"])
    out["compression.type"] = str(out["compression.type"]).lower()
    return out


def topic_log_config(cfg: NodeConfig, topic_overrides: Mapping[str, str],
                     dynamic_default: Mapping[str, str] | None = None) -> dict[str, Any]:
    return log_config(effective_topic_configs(cfg, topic_overrides, dynamic_default))
